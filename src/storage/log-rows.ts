/**
 * The change log's rows (format 4): one row per transaction, holding the commits of its group in order and
 * keyed by the version of the last one. The log is the first and, until the rows are materialized (see
 * `tail.ts`), the only copy of what a commit wrote. A row of one commit is that commit with its `logStart`
 * (as format 3 wrote every row); a row of several is `{ logStart, commits }`. Readers take both.
 */
import { CorruptRecordError, RecordTooLargeError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { utf8Length } from "../records/schemas.ts";
import { checkRowSize, rowsOfCommit } from "./rows.ts";
import type { StoredChanges, StoredRecord } from "./storage.ts";

/**
 * A change-log row as stored: one commit, or the commits of one group; and how much of the log (in JSON
 * characters) came before it.
 */
export type LogRow =
  | (CommitRecord & { readonly logStart: number })
  | { readonly logStart: number; readonly commits: readonly CommitRecord[] };

/** The row of `commits` starting at `logStart`. */
function logRowOf(commits: readonly CommitRecord[], logStart: number): LogRow {
  const [only] = commits;
  return commits.length === 1 && only ? { ...only, logStart } : { logStart, commits };
}

/** One log row to write: its key (the last commit's version), its value and that value's JSON. */
export interface LogRowWrite {
  readonly version: number;
  readonly value: LogRow;
  readonly json: string;
}

/**
 * The log rows of a commit group, starting at `logStart`: one row, or — when a store bounds its row size and
 * the group is larger — as many as keep each under `maxBytes` UTF-8 bytes. A commit larger than that alone is
 * refused with `RecordTooLargeError` before anything is written, naming its largest record when that alone
 * is over the bound.
 */
export function logRowsOfGroup(
  commits: readonly CommitRecord[],
  logStart: number,
  maxBytes?: number,
): { rows: LogRowWrite[]; logEnd: number } {
  const whole = logRowOf(commits, logStart);
  const json = JSON.stringify(whole);
  if (maxBytes === undefined || fits(json, maxBytes)) {
    const version = (commits.at(-1) as CommitRecord).version;
    return { rows: [{ version, value: whole, json }], logEnd: logStart + json.length };
  }
  const rows: LogRowWrite[] = [];
  let start = logStart;
  let part: CommitRecord[] = [];
  const close = () => {
    const value = logRowOf(part, start);
    const text = JSON.stringify(value);
    rows.push({ version: (part.at(-1) as CommitRecord).version, value, json: text });
    start += text.length;
    part = [];
  };
  for (const commit of commits) {
    const alone = JSON.stringify(logRowOf([commit], start));
    if (!fits(alone, maxBytes)) {
      // Named by the record that is too large when one is (its row would be too), else as the whole commit.
      for (const row of rowsOfCommit(commit))
        if (row.op !== "delete") checkRowSize(row, JSON.stringify(row.value), maxBytes, commit.version);
      const bytes = utf8Length(alone);
      throw new RecordTooLargeError(
        `commit ${commit.version} was not written: its change-log row changes/${commit.version} (the whole commit) is ${bytes} bytes, and one row holds at most ${maxBytes}`,
        `changes/${commit.version}`,
        bytes,
        maxBytes,
        commit.version,
      );
    }
    if (part.length > 0 && !fits(JSON.stringify(logRowOf([...part, commit], start)), maxBytes)) close();
    part.push(commit);
  }
  close();
  return { rows, logEnd: start };
}

/** Whether a JSON text is at most `limit` UTF-8 bytes (counted only when it could be more). */
function fits(json: string, limit: number): boolean {
  return json.length * 3 <= limit || utf8Length(json) <= limit;
}

/** Whether a stored log row holds several commits rather than one. */
function isGroupRow(value: unknown): value is { commits: unknown[] } {
  return (
    typeof value === "object" && value !== null && Array.isArray((value as { commits?: unknown }).commits)
  );
}

/**
 * The commits of stored log rows, each as a record named `changes/<version>`, oldest first. A row that is
 * neither shape comes back as it is, under its own name, so the reader's validation reports it.
 */
export function changesOfRows(rows: readonly StoredRecord[]): StoredRecord[] {
  const changes: StoredRecord[] = [];
  for (const stored of rows) {
    const row = { key: stored.key, value: logRowValue(stored.value) };
    if (!isGroupRow(row.value)) {
      changes.push(row);
      continue;
    }
    for (const commit of row.value.commits) {
      const version = (commit as { version?: unknown } | null)?.version;
      changes.push({ key: typeof version === "number" ? `changes/${version}` : row.key, value: commit });
    }
  }
  return changes;
}

/**
 * A page of the change log from its stored rows: the commits after `afterVersion` in `rows` (read from the
 * first row keyed after it; `limit` rows hold at least `limit` commits), and the oldest version retained
 * (from the log's first row, or past the session's `version` when the log is empty).
 */
export function changesAfter(
  rows: readonly StoredRecord[],
  first: StoredRecord | undefined,
  afterVersion: number,
  limit: number,
  version: number,
): StoredChanges {
  const changes = changesOfRows(rows)
    .filter((change) => versionOfChange(change) > afterVersion)
    .slice(0, limit);
  const oldestRetained = first ? firstVersionOf(first.value, versionOfChange(first)) : version + 1;
  return { changes, oldestRetained };
}

/** The version of a change as `changesOfRows` named it. */
export function versionOfChange(change: StoredRecord): number {
  return Number(change.key.slice("changes/".length));
}

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
  const value = logRowValue(stored);
  if (!isGroupRow(value)) return key;
  const version = (value.commits[0] as { version?: unknown } | undefined)?.version;
  return typeof version === "number" ? version : key;
}

/**
 * The commits of the log rows a writer has not materialized yet, checked enough to derive their rows from
 * (`rowsOfCommit` reads ids, keys and states): a row that is not is reported by name, and the session cannot
 * be opened until it is mended — it is the only copy of those commits.
 */
export function tailCommitsOf(rows: readonly StoredRecord[], after: number): CommitRecord[] {
  const commits: CommitRecord[] = [];
  for (const change of changesOfRows(rows)) {
    if (!isLoggedCommit(change.value)) {
      throw new CorruptRecordError(
        change.key,
        "a change-log row not yet materialized is not a commit record (the session cannot be rebuilt past it)",
      );
    }
    if (change.value.version > after) commits.push(change.value);
  }
  return commits;
}

/** Per list of a commit, the fields of each record that name its rows (what `rowsOfCommit` keys them by). */
type FieldType = "string" | "number" | "object";
const KEYED: Record<string, readonly (readonly [field: string, type: FieldType])[]> = {
  conversations: [["id", "string"]],
  entries: [
    ["conversationId", "string"],
    ["seq", "number"],
  ],
  documents: [
    ["id", "string"],
    ["version", "number"],
  ],
  tasks: [
    ["id", "string"],
    ["state", "object"],
  ],
  submissions: [
    ["id", "string"],
    ["requestId", "string"],
  ],
};
const OPTIONAL_KEYED: Record<string, readonly (readonly [field: string, type: FieldType])[]> = {
  signals: [
    ["key", "string"],
    ["version", "number"],
  ],
  removed: [
    ["id", "string"],
    ["version", "number"],
  ],
  parked: [
    ["id", "string"],
    ["version", "number"],
  ],
  unparked: [
    ["id", "string"],
    ["version", "number"],
  ],
};

/** The shape `rowsOfCommit` relies on; each record's other fields are validated when its row loads. */
function isLoggedCommit(value: unknown): value is CommitRecord {
  if (typeof value !== "object" || value === null) return false;
  const commit = value as Record<string, unknown>;
  if (typeof commit.version !== "number" || typeof commit.at !== "number") return false;
  for (const [list, fields] of Object.entries(KEYED)) if (!isKeyedList(commit[list], fields)) return false;
  for (const [list, fields] of Object.entries(OPTIONAL_KEYED))
    if (commit[list] !== undefined && !isKeyedList(commit[list], fields)) return false;
  return true;
}

function isKeyedList(value: unknown, fields: readonly (readonly [string, FieldType])[]): boolean {
  return (
    Array.isArray(value) &&
    value.every(
      (item) =>
        typeof item === "object" &&
        item !== null &&
        fields.every(([field, type]) => {
          const v = (item as Record<string, unknown>)[field];
          return type === "object" ? typeof v === "object" && v !== null : typeof v === type;
        }),
    )
  );
}
