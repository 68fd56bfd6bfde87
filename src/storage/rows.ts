/**
 * The row layout shared by every store: which rows one commit writes. Keeping it in one place means the
 * stores differ only in how they run a transaction, never in what they write.
 */

import { RecordTooLargeError, SessionNotFoundError, StaleOwnerError } from "../errors.ts";
import type {
  CommitRecord,
  DocumentChange,
  DocumentHead,
  DocumentRow,
  SessionMeta,
} from "../records/schemas.ts";
import { headAfter, STORAGE_FORMAT, utf8Length } from "../records/schemas.ts";
import type { CommitGuard, StoredDocument, StoredRecord, StoredSession } from "./storage.ts";

/** Tables of the layout, keyed by the parts after the session id. */
export type Table =
  | "conversations" // [conversationId]
  | "entries" // [conversationId, seq]
  | "documents" // [documentId] → DocumentHead
  | "documentRows" // [documentId, version] → DocumentRow
  | "tasks" // [taskId]
  | "submissions" // [submissionId]
  | "changes"; // [version] → CommitRecord

export const TABLES: readonly Table[] = [
  "conversations",
  "entries",
  "documents",
  "documentRows",
  "tasks",
  "submissions",
  "changes",
];

export type KeyPart = string | number;

/** One row to put. */
export interface RowWrite {
  readonly table: Table;
  readonly key: readonly KeyPart[];
  readonly value: unknown;
}

/** Log pruning happens only at these boundaries, so most commits pay nothing for it. */
export const PRUNE_EVERY = 256;

/** The rows one commit writes, in a stable order. */
export function rowsOfCommit(commit: CommitRecord): RowWrite[] {
  const rows: RowWrite[] = [];
  for (const conversation of commit.conversations) {
    rows.push({ table: "conversations", key: [conversation.id], value: conversation });
  }
  for (const entry of commit.entries) {
    rows.push({ table: "entries", key: [entry.conversationId, entry.seq], value: entry });
  }
  for (const change of commit.documents) {
    const head: DocumentHead = headAfter(change, commit.at);
    const row: DocumentRow =
      change.baseline !== undefined
        ? { version: change.version, baseline: change.baseline }
        : { version: change.version, patch: change.patch };
    rows.push({ table: "documents", key: [change.id], value: head });
    rows.push({ table: "documentRows", key: [change.id, change.version], value: row });
  }
  for (const task of commit.tasks) rows.push({ table: "tasks", key: [task.id], value: task });
  for (const submission of commit.submissions) {
    rows.push({ table: "submissions", key: [submission.id], value: submission });
  }
  rows.push({ table: "changes", key: [commit.version], value: commit });
  return rows;
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
  return change.baseline !== undefined && change.version > 1 ? change.version : undefined;
}

/** The highest log version to delete after writing `version`, or undefined when this commit prunes nothing. */
export function pruneChangesThrough(version: number, retain: number): number | undefined {
  if (version % PRUNE_EVERY !== 0) return undefined;
  const through = version - retain;
  return through > 0 ? through : undefined;
}

/** A new session row. */
function newSessionMeta(sessionId: string, at: number): SessionMeta {
  return { id: sessionId, format: STORAGE_FORMAT, version: 0, epoch: 1, createdAt: at, updatedAt: at };
}

/**
 * The session row a writer stores when it opens a session: a new session's first row, or the stored one
 * with the next owner epoch (fencing off every earlier writer). A row without a usable epoch is refused.
 */
export function nextWriterMeta(stored: unknown, sessionId: string, at: number): unknown {
  if (stored === undefined) return newSessionMeta(sessionId, at);
  const epoch = rawNumber(stored, "epoch");
  if (epoch === undefined) throw new SessionNotFoundError(sessionId);
  return { ...(stored as object), epoch: epoch + 1 };
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

/**
 * Checks a commit batch's guard against the stored session row. Called inside the store's transaction,
 * so the check and the write are one atomic step.
 */
export function checkGuard(storedMeta: unknown, guard: CommitGuard): SessionMeta {
  const storedEpoch = rawNumber(storedMeta, "epoch") ?? -1;
  const storedVersion = rawNumber(storedMeta, "version") ?? -1;
  if (storedEpoch !== guard.epoch || storedVersion !== guard.expectedVersion) {
    const why =
      storedEpoch !== guard.epoch
        ? `owner epoch ${guard.epoch} was superseded by epoch ${storedEpoch}`
        : `version moved from ${guard.expectedVersion} to ${storedVersion}`;
    throw new StaleOwnerError(`session ${guard.sessionId}: stale writer, ${why}; nothing was written`, {
      expectedEpoch: guard.epoch,
      storedEpoch,
      expectedVersion: guard.expectedVersion,
      storedVersion,
    });
  }
  return storedMeta as SessionMeta;
}

/** How a store reads its rows of one session: a whole table, or one id's numbered rows in [from, to]. */
export interface SessionRowReader {
  all(table: Table): Promise<StoredRecord[]> | StoredRecord[];
  range(table: Table, id: string, from: number, to: number): Promise<StoredRecord[]> | StoredRecord[];
}

/**
 * What a session's live state is made of, read the same way by every store: each conversation's latest
 * `entryTail` entries, each document's rows from its last baseline on, all tasks and submissions.
 * History beyond that is never read on open.
 */
export async function readStoredSession(
  sessionId: string,
  meta: unknown,
  entryTail: number,
  reader: SessionRowReader,
): Promise<StoredSession> {
  const conversations = await reader.all("conversations");
  const entries: StoredRecord[] = [];
  for (const conversation of conversations) {
    const count = rawNumber(conversation.value, "entryCount") ?? 0;
    if (count === 0) continue;
    const id = conversation.key.slice("conversations/".length);
    entries.push(...(await reader.range("entries", id, Math.max(0, count - entryTail), count - 1)));
  }
  const documents: StoredDocument[] = [];
  for (const head of await reader.all("documents")) {
    const from = rawNumber(head.value, "baselineVersion");
    const id = head.key.slice("documents/".length);
    const rows =
      from === undefined ? [] : await reader.range("documentRows", id, from, Number.MAX_SAFE_INTEGER);
    documents.push({ head, rows });
  }
  return {
    meta: { key: recordName("sessions", [sessionId]), value: meta },
    conversations,
    entries,
    documents,
    tasks: await reader.all("tasks"),
    submissions: await reader.all("submissions"),
  };
}
