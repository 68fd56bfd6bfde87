/** A session's history saved to a file with Export, and opened again: read-only, nothing live. */

import { type CommitRecord, CommitRecordSchema, type SessionView } from "../../src/index.ts";
import type { SessionSource } from "./session-source.ts";

/** A session's history as the devtools save it: the base view and every change after it, as JSON. */
export interface ExportedHistory {
  readonly format: "durable-agent-history";
  readonly formatVersion: 1;
  /** Where it was read from (`local db / session`, `edge url / session`). */
  readonly label: string;
  readonly exportedAt: number;
  readonly base: SessionView;
  readonly changes: readonly CommitRecord[];
}

/** What the devtools write to a file for `label`'s history. */
export function exportHistory(
  label: string,
  base: SessionView,
  changes: readonly CommitRecord[],
  exportedAt: number,
): ExportedHistory {
  return { format: "durable-agent-history", formatVersion: 1, label, exportedAt, base, changes };
}

/**
 * Reads an exported history back, refusing — with what is wrong and where — anything that is not one: not
 * JSON, another format, a change that is not a valid commit record, or changes that do not follow the base
 * one by one.
 */
export function parseExportedHistory(text: string): ExportedHistory {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new Error(`not a durable-agent history: the file is not JSON (${(error as Error).message})`);
  }
  const file = data as Partial<ExportedHistory> | null;
  if (file?.format !== "durable-agent-history" || file.formatVersion !== 1)
    throw new Error(
      'not a durable-agent history: "format" must be "durable-agent-history", "formatVersion" 1',
    );
  const base = file.base as SessionView | undefined;
  const lists = ["conversations", "documents", "tasks", "submissions", "pending", "blocked"] as const;
  if (
    typeof base?.id !== "string" ||
    !Number.isSafeInteger(base.version) ||
    typeof base.limits !== "object" ||
    lists.some((list) => !Array.isArray(base[list])) ||
    !Array.isArray(file.changes)
  )
    throw new Error(
      `not a durable-agent history: it needs a base view (id, version, limits, ${lists.join(", ")}) and a list of changes`,
    );
  const changes: CommitRecord[] = [];
  for (const [i, raw] of file.changes.entries()) {
    const parsed = CommitRecordSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(
        `change #${i} is not a commit record: ${issue?.path.join(".") || "(root)"}: ${issue?.message}`,
      );
    }
    // The page folds them on from the base: each must follow the one before (as applyChangeToView demands).
    const expected = base.version + i + 1;
    if (parsed.data.version !== expected)
      throw new Error(`change #${i}: version ${parsed.data.version} does not follow version ${expected - 1}`);
    changes.push(parsed.data);
  }
  return { ...(file as ExportedHistory), base, changes };
}

/** An exported history, opened from a file: everything it holds at once, nothing live. */
export function fileSource(name: string, history: ExportedHistory): SessionSource {
  return {
    label: `file ${name} (${history.label}, exported ${new Date(history.exportedAt).toISOString()})`,
    base: history.base,
    follow(onChanges) {
      onChanges([...history.changes]);
      return () => undefined;
    },
    async close() {},
  };
}
