/**
 * The change log's rows (format 4): one row per transaction, holding the commits of its group in order and
 * keyed by the version of the last one. The log is the first and, until the rows are materialized (see
 * `tail.ts`), the only copy of what a commit wrote. A row of one commit is that commit with its `logStart`
 * (as format 3 wrote every row); a row of several is `{ logStart, commits }`. Readers take both.
 */
import { CorruptRecordError, RecordTooLargeError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { utf8Length } from "../records/schemas.ts";
import { checkFormat } from "./format.ts";
import {
  blockStart,
  decodeCommit,
  encodeCommit,
  entriesNamed,
  loggedAsChanges,
  missingBase,
  WholeRecords,
  withEntries,
} from "./log-codec.ts";
import { firstVersionOf, isGroupRow, logRowValue } from "./log-head.ts";
import { checkRowSize, rawNumber, recordName, rowsOfCommit } from "./rows.ts";
import { incarnationOf } from "./session-row.ts";
import type { StoredChanges, StoredRecord } from "./storage.ts";

/**
 * A change-log row as stored: one commit, or the commits of one group, as the log writes commits (see
 * `log-codec.ts`); and how much of the log (in JSON characters) came before it.
 */
export type LogRow =
  | (Record<string, unknown> & { readonly logStart: number })
  | { readonly logStart: number; readonly commits: readonly Record<string, unknown>[] };

/** The row of logged commits starting at `logStart`. */
function logRowOf(logged: readonly Record<string, unknown>[], logStart: number): LogRow {
  const [only] = logged;
  return logged.length === 1 && only ? { ...only, logStart } : { logStart, commits: logged };
}

/** One log row to write: its key (the last commit's version), its value and that value's JSON. */
export interface LogRowWrite {
  readonly version: number;
  readonly value: LogRow;
  readonly json: string;
}

/**
 * The log rows of a commit group, starting at `logStart`, each commit written as `encodeCommit` writes it
 * against the records `wholes` holds (and those of the group's earlier commits, which the returned chain
 * adds): one row, or — when a store bounds its row size and the group is larger — as many as keep each
 * under `maxBytes` UTF-8 bytes. A commit larger than that alone is refused with `RecordTooLargeError`
 * before anything is written, naming its largest record when that alone is over the bound; so is a commit
 * that logs a record as its changes when that record's whole row would be over it. With `packBytes`,
 * commits are packed into rows of at most that many bytes (a larger commit still gets a row of its own).
 */
export function logRowsOfGroup(
  commits: readonly CommitRecord[],
  logStart: number,
  wholes: WholeRecords,
  maxBytes?: number,
  packBytes?: number,
): { rows: LogRowWrite[]; logEnd: number; wholes: WholeRecords } {
  const next = new WholeRecords(wholes);
  const lookup = next.lookup();
  const logged = commits.map((commit) => {
    const encoded = encodeCommit(commit, lookup);
    // A record logged as its changes is written whole into its own row later: that row must fit too, and
    // is checked now, while the commit can still be refused alone.
    if (maxBytes !== undefined)
      for (const row of loggedAsChanges(commit, encoded))
        checkRowSize(row, JSON.stringify(row.value), maxBytes, commit.version);
    next.add(commit, encoded);
    return encoded;
  });
  const whole = logRowOf(logged, logStart);
  const json = JSON.stringify(whole);
  const pack = Math.min(packBytes ?? Number.POSITIVE_INFINITY, maxBytes ?? Number.POSITIVE_INFINITY);
  if (pack === Number.POSITIVE_INFINITY || fits(json, pack)) {
    const version = (commits.at(-1) as CommitRecord).version;
    return { rows: [{ version, value: whole, json }], logEnd: logStart + json.length, wholes: next };
  }
  const rows: LogRowWrite[] = [];
  let start = logStart;
  let part: Record<string, unknown>[] = [];
  let partBytes = 0; // the sum of its commits' rows alone: at least the row of them all, less its brackets
  const close = () => {
    const value = logRowOf(part, start);
    const text = JSON.stringify(value);
    rows.push({ version: (part.at(-1) as { version: number }).version, value, json: text });
    start += text.length;
    part = [];
    partBytes = 0;
  };
  logged.forEach((encoded, i) => {
    const commit = commits[i] as CommitRecord;
    const alone = JSON.stringify(logRowOf([encoded], start));
    const bytes = utf8Length(alone);
    if (maxBytes !== undefined && bytes > maxBytes) {
      // Named by the record that is too large when one is (its row would be too), else as the whole commit.
      for (const row of rowsOfCommit(commit))
        if (row.op !== "delete") checkRowSize(row, JSON.stringify(row.value), maxBytes, commit.version);
      throw new RecordTooLargeError(
        `commit ${commit.version} was not written: its change-log row changes/${commit.version} (the whole commit) is ${bytes} bytes, and one row holds at most ${maxBytes}`,
        `changes/${commit.version}`,
        bytes,
        maxBytes,
        commit.version,
      );
    }
    if (part.length > 0 && partBytes + bytes + 64 > pack) close();
    part.push(encoded);
    partBytes += bytes;
  });
  close();
  return { rows, logEnd: start, wholes: next };
}

/** Whether a JSON text is at most `limit` UTF-8 bytes (counted only when it could be more). */
function fits(json: string, limit: number): boolean {
  return json.length * 3 <= limit || utf8Length(json) <= limit;
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
 * Whole commits from logged ones (see `log-codec.ts`), in order, each delta resolved against a record logged
 * whole before it in `changes` or in `wholes` (what earlier reads decoded); the chain `wholes` then holds
 * the new ones too. `missing` is the first version whose delta refers to a record neither holds: the caller
 * reads further back in its block, or reports it. A change that is not a logged commit comes back as it is.
 */
export function decodeChanges(
  changes: readonly StoredRecord[],
  wholes = new WholeRecords(),
): { changes: StoredRecord[]; wholes: WholeRecords; missing?: number } {
  const next = new WholeRecords(wholes);
  const lookup = next.byVersion();
  const decoded: StoredRecord[] = [];
  for (const change of changes) {
    const value = decodeCommit(change.value, lookup);
    if (value === undefined) return { changes: decoded, wholes: next, missing: versionOfChange(change) };
    if (isLoggedCommit(value)) next.add(value, change.value);
    decoded.push({ key: change.key, value });
  }
  return { changes: decoded, wholes: next };
}

/** How a store reads its log for `changesAfter`, inside one snapshot. */
export interface LogReader {
  /** Log rows keyed `from` ≤ key ≤ `to`, oldest first (at most `limit` of them). */
  rows(from: number, to: number, limit?: number): Promise<StoredRecord[]> | StoredRecord[];
  /** A conversation's entry rows `from` ≤ seq ≤ `to`, in order. */
  entries(conversationId: string, from: number, to: number): Promise<StoredRecord[]> | StoredRecord[];
}

/**
 * A page of the change log: up to `limit` whole commits after `afterVersion` (`limit` rows hold at least that
 * many), and the oldest version retained — the session row's `logFloor` (the stores keep the rest of its
 * block, which later commits' deltas refer to), the log's first row, or past the session's version when the
 * log is empty. A delta that refers back past the rows read has the rest of its block read for it.
 */
export async function changesAfter(
  read: LogReader,
  first: StoredRecord | undefined,
  afterVersion: number,
  limit: number,
  meta: unknown,
): Promise<StoredChanges> {
  checkFormat(meta, String((meta as { id?: unknown } | undefined)?.id));
  const version = rawNumber(meta, "version") ?? 0;
  const floor = rawNumber(meta, "logFloor") ?? 0;
  const oldestRetained = Math.max(
    floor,
    first ? firstVersionOf(first.value, versionOfChange(first)) : version + 1,
  );
  const from = Math.max(afterVersion + 1, oldestRetained);
  // Versions are consecutive: the page is `from`…`to`, in the rows keyed up to `to` and the one row after
  // them (a group's row is keyed by its last version). Commits of those rows past `to` are not decoded.
  const to = from + Math.min(limit, Number.MAX_SAFE_INTEGER - from) - 1;
  const rows = [...(await read.rows(from, to))];
  if (to < Number.MAX_SAFE_INTEGER) rows.push(...(await read.rows(to + 1, Number.MAX_SAFE_INTEGER, 1)));
  // A row may begin in an earlier block (a group written across a block's end): its commits before this
  // block are not needed, and may refer to rows pruned since, so they are not decoded either.
  const logged = changesOfRows(rows).filter(
    (change) => versionOfChange(change) >= blockStart(from) && !(versionOfChange(change) > to),
  );
  let page = decodeChanges(logged);
  if (page.missing !== undefined) {
    // The block's earlier rows hold what the deltas refer to; the commits before the block are not needed.
    const start = blockStart(page.missing);
    const earlier = changesOfRows(await read.rows(start, from - 1)).filter(
      (change) => versionOfChange(change) >= start && versionOfChange(change) < from,
    );
    const before = decodeChanges(earlier);
    page = decodeChanges(logged, before.wholes);
    if (before.missing !== undefined || page.missing !== undefined)
      throw missingBase(before.missing ?? (page.missing as number));
  }
  const changes = page.changes.filter((change) => versionOfChange(change) >= from);
  const incarnation = incarnationOf(meta);
  return {
    changes: await withNamedEntries(changes, read),
    oldestRetained,
    ...(incarnation !== undefined && { incarnation }),
  };
}

/**
 * Commits with the entries their log names, read from the entry rows (one range per conversation). An entry
 * that is not there is reported by name: it was written with its commit.
 */
async function withNamedEntries(changes: StoredRecord[], read: LogReader): Promise<StoredRecord[]> {
  const ranges = new Map<string, { from: number; to: number }>();
  const named = changes.map((change) => entriesNamed(change.value));
  for (const names of named)
    for (const [conversation, seq] of names) {
      const range = ranges.get(conversation);
      if (range) {
        range.from = Math.min(range.from, seq);
        range.to = Math.max(range.to, seq);
      } else ranges.set(conversation, { from: seq, to: seq });
    }
  if (ranges.size === 0) return changes;
  const entries = new Map<string, unknown>();
  for (const [conversation, { from, to }] of ranges)
    for (const row of await read.entries(conversation, from, to)) entries.set(row.key, row.value);
  return changes.map((change, i) => {
    const names = named[i] as [string, number][];
    if (names.length === 0) return change;
    const values = names.map(([conversation, seq]) => {
      const key = recordName("entries", [conversation, seq]);
      if (!entries.has(key))
        throw new CorruptRecordError(key, `commit ${versionOfChange(change)} names it, and it is not stored`);
      return entries.get(key);
    });
    return { key: change.key, value: withEntries(change.value, values) };
  });
}

/** The version of a change as `changesOfRows` named it. */
export function versionOfChange(change: StoredRecord): number {
  return Number(change.key.slice("changes/".length));
}

/**
 * The commits of the log rows a writer has not materialized yet (after `after`), decoded against `wholes` and
 * checked enough to derive their rows from (`rowsOfCommit` reads ids, keys and states): a row that is not
 * is reported by name, and the session cannot be opened until it is mended — it is the only copy of those
 * commits.
 */
export function tailCommitsOf(
  rows: readonly StoredRecord[],
  after: number,
  wholes?: WholeRecords,
): { commits: CommitRecord[]; wholes: WholeRecords } {
  const logged = changesOfRows(rows).filter((change) => versionOfChange(change) > after);
  const decoded = decodeChanges(logged, wholes);
  if (decoded.missing !== undefined) throw missingBase(decoded.missing);
  const commits: CommitRecord[] = [];
  for (const change of decoded.changes) {
    if (!isLoggedCommit(change.value)) {
      throw new CorruptRecordError(
        change.key,
        "a change-log row not yet materialized is not a commit record (the session cannot be rebuilt past it)",
      );
    }
    commits.push(change.value);
  }
  return { commits, wholes: decoded.wholes };
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
  droppedSignals: [
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
