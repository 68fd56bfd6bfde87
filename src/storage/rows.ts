/**
 * The row layout shared by every store: which rows one commit writes. Keeping it in one place means the
 * stores differ only in how they run a transaction, never in what they write.
 */

import { DuplicateKeyError, DuplicateRequestError, RecordTooLargeError } from "../errors.ts";
import type {
  CommitRecord,
  DocumentChange,
  DocumentHead,
  DocumentRow,
  RemovedItem,
} from "../records/schemas.ts";
import { headAfter, isSubmissionFinished, isTerminal, utf8Length } from "../records/schemas.ts";

/** Tables of the layout, keyed by the parts after the session id. */
export type Table =
  | "conversations" // [conversationId]
  | "entries" // [conversationId, seq]
  | "documents" // [documentId] → DocumentHead
  | "documentRows" // [documentId, version] → DocumentRow
  | "tasks" // [taskId]
  | "submissions" // [submissionId]
  | "changes" // [version] → CommitRecord
  // Indexes, so a session opens with its working set only (DESIGN §9):
  | "items" // [version, itemId] → Item: every Submission and root task, in the order they came (permanent)
  | "live" // [version, itemId] → Item: those not finished yet (deleted when they finish)
  | "settled" // [version, itemId] → Item: those finished (written when they finish)
  | "requests" // [requestId] → submissionId (written once: a requestId never changes owner)
  | "children" // [parentId, childIndex] → childId (a task tree is read from its root down)
  | "signals" // [key] → Signal (written once; consumed by the wait that names its key)
  | "earlySignals" // [key] → null: signals no wait has taken yet (deleted when one does)
  // Parked waits (a root task awaiting outside keys, nothing else of its tree open), apart from `live`:
  | "parked" // [version, itemId] → Item
  | "waitKeys" // [key] → root task id of the parked wait on it
  | "deadlines"; // [at, itemId] → null: parked waits by deadline

export const TABLES: readonly Table[] = [
  "conversations",
  "entries",
  "documents",
  "documentRows",
  "tasks",
  "submissions",
  "changes",
  "items",
  "live",
  "settled",
  "requests",
  "children",
  "signals",
  "earlySignals",
  "parked",
  "waitKeys",
  "deadlines",
];

/**
 * How each table's rows are keyed (see `Table`): an id, an id and a number, a number and an id, or a number
 * (the change log). Stores that split a key into columns (the Durable Object's), and a snapshot's check of
 * the rows it brings, read it here.
 */
export const KEY_LAYOUT: Readonly<Record<Table, "id" | "id,n" | "n,id" | "n">> = {
  conversations: "id",
  entries: "id,n",
  documents: "id",
  documentRows: "id,n",
  tasks: "id",
  submissions: "id",
  changes: "n",
  items: "n,id",
  live: "n,id",
  settled: "n,id",
  requests: "id",
  children: "id,n",
  signals: "id",
  earlySignals: "id",
  parked: "n,id",
  waitKeys: "id",
  deadlines: "n,id",
};

/**
 * A unit of work in the session's order of inputs: a Submission (with its root task, when it has one) or
 * a root task started without a Submission. Keyed by the version of the commit that created it and its
 * id (the Submission's, or the root task's).
 */
export interface Item {
  readonly submission?: string;
  readonly root?: string;
}

export type KeyPart = string | number;

/** One row to write. */
export interface RowWrite {
  readonly table: Table;
  readonly key: readonly KeyPart[];
  readonly value: unknown;
  /**
   * `put` (default) writes or replaces; `create` writes a row that must not exist yet (the store fails the
   * whole commit if it does); `delete` removes the row (`value` is ignored).
   */
  readonly op?: "put" | "create" | "delete";
  /** The key did not exist before this commit (a new entry, task, item…): deleting it later needs no write. */
  readonly fresh?: true;
}

/**
 * The rows one commit leaves, in a stable order (its change-log row apart: see `log-rows.ts`). The stores
 * write them when they materialize the log's tail (`tail.ts`); `create` rows are written with the commit.
 */
export function rowsOfCommit(commit: CommitRecord): RowWrite[] {
  const rows: RowWrite[] = [];
  for (const conversation of commit.conversations) {
    rows.push({ table: "conversations", key: [conversation.id], value: conversation });
  }
  for (const entry of commit.entries) {
    // Written with their commit, as create-only rows (see `createRowsOf`): the log refers to them.
    rows.push({
      table: "entries",
      key: [entry.conversationId, entry.seq],
      value: entry,
      op: "create",
      fresh: true,
    });
  }
  for (const change of commit.documents) {
    if (change.deleted) {
      // Its rows below the version are deleted with it (see documentRowsObsoleteBelow).
      rows.push({ table: "documents", key: [change.id], value: null, op: "delete" });
      continue;
    }
    const head: DocumentHead = headAfter(change, commit.at);
    const row: DocumentRow =
      change.baseline !== undefined
        ? { version: change.version, baseline: change.baseline }
        : { version: change.version, patch: change.patch };
    rows.push({ table: "documents", key: [change.id], value: head });
    rows.push({ table: "documentRows", key: [change.id, change.version], value: row, fresh: true });
  }
  const created = new Map<string, { item: Item; finished: boolean }>();
  // A Submission's root task is created in the commit that accepts it and belongs to its item; any other
  // root task is an item of its own.
  const submissionRoots = new Set(commit.submissions.map((s) => s.taskId));
  for (const task of commit.tasks) {
    const isNew = task.createdVersion === commit.version;
    rows.push({ table: "tasks", key: [task.id], value: task, ...(isNew && { fresh: true as const }) });
    const standalone = task.parentId === undefined && !submissionRoots.has(task.id);
    if (!isNew) {
      if (standalone && isTerminal(task) && task.createdVersion !== undefined) {
        const key = [task.createdVersion, task.id];
        rows.push({ table: "live", key, value: null, op: "delete" });
        rows.push({ table: "settled", key, value: { root: task.id } satisfies Item });
      }
      continue;
    }
    if (task.parentId !== undefined) {
      const childIndex = task.childIndex ?? 0;
      rows.push({ table: "children", key: [task.parentId, childIndex], value: task.id, fresh: true });
    } else if (standalone) created.set(task.id, { item: { root: task.id }, finished: isTerminal(task) });
  }
  for (const submission of commit.submissions) {
    const version = submission.acceptedVersion;
    const isNew = version === commit.version;
    rows.push({
      table: "submissions",
      key: [submission.id],
      value: submission,
      ...(isNew && { fresh: true as const }),
    });
    if (version === undefined) continue;
    if (version === commit.version) {
      const item = { submission: submission.id, ...(submission.taskId && { root: submission.taskId }) };
      created.set(submission.id, { item, finished: isSubmissionFinished(submission) });
      rows.push({ table: "requests", key: [submission.requestId], value: submission.id, op: "create" });
    } else if (isSubmissionFinished(submission)) {
      const key = [version, submission.id];
      const item: Item = { submission: submission.id, ...(submission.taskId && { root: submission.taskId }) };
      rows.push({ table: "live", key, value: null, op: "delete" });
      rows.push({ table: "settled", key, value: item });
    }
  }
  for (const [id, { item, finished }] of created) {
    rows.push({ table: "items", key: [commit.version, id], value: item, fresh: true });
    rows.push({ table: finished ? "settled" : "live", key: [commit.version, id], value: item, fresh: true });
  }
  // A dropped early signal's row is deleted with its commit (`createRowsOf`); its delete is here too, so a
  // read through the log's tail does not find the row a create of the same tail wrote. Its index row goes.
  for (const { key } of commit.droppedSignals ?? []) {
    rows.push({ table: "signals", key: [key], value: null, op: "delete" });
    rows.push({ table: "earlySignals", key: [key], value: null, op: "delete" });
  }
  for (const signal of commit.signals ?? []) {
    const isNew = signal.version === commit.version;
    rows.push({
      table: "signals",
      key: [signal.key],
      value: signal,
      ...(isNew && { op: "create" as const }),
    });
    if (signal.consumedBy === undefined) rows.push({ table: "earlySignals", key: [signal.key], value: null });
    else if (!isNew) rows.push({ table: "earlySignals", key: [signal.key], value: null, op: "delete" });
  }
  for (const item of commit.removed ?? []) rows.push(...removedRows(item));
  rows.push(...parkingRows(commit));
  return rows;
}

/**
 * The index rows of parked waits: a wait moved on loses its rows (and its item is live again unless it
 * finished or parks anew); a parked one leaves `live` for `parked`, with a row per key and its deadline.
 */
function parkingRows(commit: CommitRecord): RowWrite[] {
  if (!commit.parked && !commit.unparked) return [];
  const rows: RowWrite[] = [];
  const doomed = (table: Table, key: KeyPart[]): RowWrite => ({ table, key, value: null, op: "delete" });
  const parkedNow = new Set((commit.parked ?? []).map((wait) => wait.id));
  const tasks = new Map(commit.tasks.map((task) => [task.id, task]));
  for (const wait of commit.unparked ?? []) {
    rows.push(doomed("parked", [wait.version, wait.id]));
    for (const key of wait.keys) rows.push(doomed("waitKeys", [key]));
    if (wait.at !== undefined) rows.push(doomed("deadlines", [wait.at, wait.id]));
    const task = tasks.get(wait.id);
    if (!parkedNow.has(wait.id) && task && !isTerminal(task))
      rows.push({ table: "live", key: [wait.version, wait.id], value: { root: wait.id } satisfies Item });
  }
  for (const wait of commit.parked ?? []) {
    rows.push(doomed("live", [wait.version, wait.id]));
    rows.push({ table: "parked", key: [wait.version, wait.id], value: { root: wait.id } satisfies Item });
    for (const key of wait.keys) rows.push({ table: "waitKeys", key: [key], value: wait.id });
    if (wait.at !== undefined) rows.push({ table: "deadlines", key: [wait.at, wait.id], value: null });
  }
  return rows;
}

/** Every row a removed item had: its index rows, its Submission, each task and each child link. */
function removedRows(item: RemovedItem): RowWrite[] {
  const doomed = (table: Table, key: KeyPart[]): RowWrite => ({ table, key, value: null, op: "delete" });
  const rows = [doomed("items", [item.version, item.id]), doomed("settled", [item.version, item.id])];
  if (item.submission !== undefined) rows.push(doomed("submissions", [item.submission]));
  // Each task's child links go with it, as a range (see rangeDeletesOfCommit): a row may list many.
  for (const task of item.tasks) rows.push(doomed("tasks", [task.id]));
  return rows;
}

/**
 * Rows of `[id, n]` keys deleted below `below`, all of one id: a document's rows a baseline made obsolete,
 * or the child links of a task that retention removed.
 */
export interface RangeDelete {
  readonly table: "documentRows" | "children";
  readonly id: string;
  readonly below: number;
}

/** The range deletes one commit makes, after its rows. */
export function rangeDeletesOfCommit(commit: CommitRecord): RangeDelete[] {
  const ranges: RangeDelete[] = [];
  for (const change of commit.documents) {
    const below = documentRowsObsoleteBelow(change);
    if (below !== undefined) ranges.push({ table: "documentRows", id: change.id, below });
  }
  for (const item of commit.removed ?? [])
    for (const task of item.tasks)
      ranges.push({ table: "children", id: task.id, below: Number.MAX_SAFE_INTEGER });
  return ranges;
}

/**
 * Refuses a row whose serialized value is larger than `limit` UTF-8 bytes, naming it. Counting only runs
 * when the text could be too large (one UTF-16 unit is at most 3 UTF-8 bytes), so small rows pay nothing.
 */
export function checkRowSize(row: RowWrite, json: string, limit: number, version: number): void {
  if (json.length * 3 <= limit) return;
  const bytes = utf8Length(json);
  if (bytes <= limit) return;
  const name = recordName(row.table, row.key);
  const what = row.table === "changes" ? `its change-log row ${name} (the whole commit)` : name;
  throw new RecordTooLargeError(
    `commit ${version} was not written: ${what} is ${bytes} bytes, and one row holds at most ${limit}`,
    name,
    bytes,
    limit,
    version,
  );
}

/**
 * Below which version a document's rows become obsolete when `change` is written: a baseline makes every
 * earlier row of its document unreadable (a document loads from its latest baseline on, and its history
 * lives in the change log), so stores delete them in the same transaction. Undefined for a delta.
 */
export function documentRowsObsoleteBelow(change: DocumentChange): number | undefined {
  if (change.deleted) return Number.MAX_SAFE_INTEGER; // every row of a deleted document
  return change.baseline !== undefined && change.version > 1 ? change.version : undefined;
}

/**
 * The session row's count of parked waits after `commits` (`{ parked }`, absent while there never were any):
 * kept exact by the commits themselves, so opening a session never counts its parked waits.
 */
export function parkedCountAfter(meta: unknown, commits: readonly CommitRecord[]): { parked?: number } {
  let count = rawNumber(meta, "parked");
  for (const commit of commits) {
    const delta = (commit.parked?.length ?? 0) - (commit.unparked?.length ?? 0);
    if (delta !== 0) count = Math.max(0, (count ?? 0) + delta);
  }
  return count === undefined ? {} : { parked: count };
}

/**
 * Refuses a `create` row whose key the store already holds (`exists`): a requestId that already has a
 * Submission. Stores call it inside the commit's transaction, before writing the row.
 */
export function checkCreate(row: RowWrite, exists: boolean, version: number): void {
  if (row.op !== "create" || !exists) return;
  if (row.table === "requests") throw new DuplicateRequestError(String(row.key[0]), version);
  throw new DuplicateKeyError(recordName(row.table, row.key), version);
}

/** The readable name of a row, used in errors and in the `blocked` list of views. */
export function recordName(table: Table | "sessions", key: readonly KeyPart[]): string {
  return `${table}/${key.join("/")}`;
}

/** Reads a numeric field of a raw (not yet validated) row, for layout decisions only. */
export function rawNumber(value: unknown, field: string): number | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const n = (value as Record<string, unknown>)[field];
  return typeof n === "number" && Number.isInteger(n) && n >= 0 ? n : undefined;
}
