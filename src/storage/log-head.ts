/**
 * The head of a stored change-log row — how much of the log came before it (`logStart`) and the first
 * version it holds — and its value, for a store that keeps rows as their JSON text (see `log-rows.ts`).
 */
import { rawNumber } from "./rows.ts";

/**
 * A stored log row's value: a store may keep the row as its JSON text (IndexedDB does: the browser copies a
 * string at once, where it would walk every object of the commit). Text that is not JSON stays as it is, so
 * the reader's validation reports it.
 */
export function logRowValue(stored: unknown): unknown {
  if (typeof stored !== "string") return stored;
  try {
    return JSON.parse(stored);
  } catch {
    return stored;
  }
}

/** The first version a stored log row holds (its key's version for a format-3 row). */
export function firstVersionOf(stored: unknown, key: number): number {
  if (typeof stored === "string") {
    const head = GROUP_HEAD.exec(stored);
    if (head && stored.endsWith("]}")) return Number(head[2]);
    if (ONE_HEAD.test(stored) && ONE_END.test(stored)) return key;
  }
  const value = logRowValue(stored);
  if (!isGroupRow(value)) return key;
  const version = (value.commits[0] as { version?: unknown } | undefined)?.version;
  return typeof version === "number" ? version : key;
}

/**
 * How much of the log came before a stored log row (its `logStart`). Pruning looks it up at every boundary
 * and a reader of the log for its first row: read from the text's ends as `logRowsOfGroup` writes them
 * (`{"logStart":…,"commits":[…]}`, or one commit with `"logStart":…` last), so a large row is not parsed
 * whole for one number. Text of another shape is parsed.
 */
export function logStartOf(stored: unknown): number | undefined {
  if (typeof stored === "string") {
    const group = GROUP_HEAD.exec(stored);
    if (group && stored.endsWith("]}")) return Number(group[1]);
    const one = ONE_HEAD.test(stored) ? ONE_END.exec(stored) : null;
    if (one) return Number(one[1]);
  }
  return rawNumber(logRowValue(stored), "logStart");
}

const GROUP_HEAD = /^\{"logStart":(\d{1,15}),"commits":\[\{"version":(\d{1,15}),/;
const ONE_HEAD = /^\{"version":\d{1,15},/;
const ONE_END = /,"logStart":(\d{1,15})\}$/;

/** Whether a stored log row holds several commits rather than one. */
export function isGroupRow(value: unknown): value is { commits: unknown[] } {
  return (
    typeof value === "object" && value !== null && Array.isArray((value as { commits?: unknown }).commits)
  );
}
