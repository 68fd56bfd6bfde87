/**
 * Child links as runs (format 4): a parent's children are read from its `children` rows in key order, each
 * row naming a run of consecutive children, so a window of spawned children costs one row per parent.
 */
import type { RowWrite } from "./rows.ts";

/**
 * The child links a materialization writes (see `tail.ts`): one row per run of consecutive children of a
 * parent, keyed by the first one's index and listing their ids in order. A parent's children are read as
 * all its rows, in key order; a row written before runs (format 3) names one child.
 */
export function childRuns(links: readonly { parentId: string; index: number; id: string }[]): RowWrite[] {
  const byParent = new Map<string, { index: number; id: string }[]>();
  for (const { parentId, index, id } of links) {
    const siblings = byParent.get(parentId);
    if (siblings) siblings.push({ index, id });
    else byParent.set(parentId, [{ index, id }]);
  }
  const rows: RowWrite[] = [];
  for (const [parentId, siblings] of byParent) {
    siblings.sort((a, b) => a.index - b.index);
    let run: string[] = [];
    let start = 0;
    siblings.forEach(({ index, id }, i) => {
      if (i > 0 && index !== start + run.length) {
        rows.push({ table: "children", key: [parentId, start], value: run });
        run = [];
      }
      if (run.length === 0) start = index;
      run.push(id);
    });
    rows.push({ table: "children", key: [parentId, start], value: run });
  }
  return rows;
}

/** The child ids a `children` row names: a run of them, or one (a row written before runs). */
export function childIdsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  return Array.isArray(value) ? value.filter((id): id is string => typeof id === "string") : [];
}
