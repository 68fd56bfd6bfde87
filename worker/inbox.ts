/**
 * The durable inbox: a follower tab's input is written here (one IndexedDB transaction, strict durability)
 * before the follower acknowledges it; the leader accepts inbox rows — Submissions and signals, both
 * idempotent by requestId, and drops of early signals — and only then deletes them, so nothing is lost if
 * either tab dies in between.
 */
import { type IDBPDatabase, openDB } from "idb";
import type { Json, LocalInput, Session, SubmitInput } from "../src/index.ts";
import { toStorageError } from "../src/storage/indexeddb-requests.ts";

const STORE = "inbox";

/** A signal a follower tab was given, for the leader to deliver. */
export interface InboxSignal {
  readonly signal: { readonly key: string; readonly payload: Json; readonly requestId: string };
}

/**
 * A Submission given again that was cancelled in a copy rebuilt from its edge (`followRemote`'s
 * `onRebased`): the leader accepts it already cancelled, or cancels it if the session has it unfinished.
 * The input's own fields stay at the top, so a tab of an older version that leads reads it as the input.
 */
export type InboxCancelled = SubmitInput & { readonly cancelled: string };

/**
 * An early signal to drop (a follower tab's `dropEarlySignal`, the devtools of a local session, a rebuilt
 * copy's drop given again): the one the leader keeps for `key` when it is still the one accepted at
 * `version` (a newer signal of the key is left alone).
 */
export interface InboxDrop {
  readonly drop: { readonly key: string; readonly version: number };
  /**
   * The row's id: a tab of an older version that leads reads the row as a submission, refuses it (it is not
   * one) under this id, tells the asking tab and removes it — never a row without an id that jams its inbox.
   */
  readonly requestId: string;
}

/**
 * A cancel of an accepted Submission (a follower tab's `cancelSubmission`): the leader cancels it as
 * `session.cancelSubmission` does (one that has ended stays as it ended). Its `requestId`, like a drop's, is
 * the row's id, which a tab of an older version that leads refuses under that id.
 */
export interface InboxCancel {
  readonly cancel: { readonly submissionId: string; readonly reason?: string };
  readonly requestId: string;
}

/** The inbox row that asks the leader to cancel the Submission `submissionId` (the kernel's reason if none). */
export function inboxCancel(submissionId: string, reason?: string): InboxCancel {
  return {
    cancel: { submissionId, ...(reason !== undefined && { reason }) },
    requestId: `cancel\u0000${submissionId}`,
  };
}

/** The inbox row that asks the leader to drop the early signal of `key` accepted at `version`. */
export function inboxDrop(key: string, version: number): InboxDrop {
  return { drop: { key, version }, requestId: `drop\u0000${key}\u0000${version}` };
}

/**
 * One input waiting for the leader: a submission (maybe cancelled), a signal, an early signal's drop, or a
 * Submission's cancel.
 */
export type InboxRow = SubmitInput | InboxSignal | InboxCancelled | InboxDrop | InboxCancel;

export const isInboxSignal = (row: InboxRow): row is InboxSignal => "signal" in row;
export const isInboxDrop = (row: InboxRow): row is InboxDrop => "drop" in row;
export const isInboxCancel = (row: InboxRow): row is InboxCancel => "cancel" in row;

/** The inbox row that gives a rebuilt copy's kept input again. */
export function inboxRowOf(input: LocalInput): InboxRow {
  if (input.kind === "drop") return inboxDrop(input.key, input.version);
  if (input.kind === "signal")
    return { signal: { key: input.key, payload: input.payload, requestId: input.requestId } };
  return input.cancelled === undefined ? input.input : { ...input.input, cancelled: input.cancelled };
}

/** Accepts one inbox row on the leader's session (a repeat is taken as the first); throws its refusal. */
export async function acceptInboxRow(session: Session, row: InboxRow): Promise<void> {
  if (isInboxDrop(row)) {
    await session.dropEarlySignal(row.drop.key, { version: row.drop.version });
  } else if (isInboxCancel(row)) {
    await session.cancelSubmission(row.cancel.submissionId, row.cancel.reason);
  } else if (isInboxSignal(row)) {
    const { key, payload, requestId } = row.signal;
    await session.signal(key, payload, { requestId });
  } else if ("cancelled" in row) {
    const { cancelled, ...input } = row;
    await session.submit(input, { cancelled });
  } else await session.submit(row);
}

/** Its key in the store (a signal's or a drop's cannot collide with a requestId), and its name between tabs. */
export function inboxRowId(row: InboxRow): string {
  if (isInboxDrop(row) || isInboxCancel(row)) return row.requestId;
  return isInboxSignal(row) ? `signal\u0000${row.signal.key}\u0000${row.signal.requestId}` : row.requestId;
}

/**
 * A stored row carries when it was queued, so the leader takes inputs in the order they came (its key, the
 * requestId, says nothing of that): milliseconds, then a count within the tab for the same millisecond.
 * The fields sit beside the input's own, which a tab of an older version that leads takes as the input
 * (it ignores them, and drains by key as it always did).
 */
interface Queued {
  readonly queuedAt?: number;
  readonly queuedSeq?: number;
}

let queuedSeq = 0;

export class DurableInbox {
  private database: Promise<IDBPDatabase> | undefined;
  constructor(private readonly name: string) {}

  private db(): Promise<IDBPDatabase> {
    if (this.database !== undefined) return this.database;
    const opening = openDB(this.name, 1, {
      upgrade(db) {
        if (!db.objectStoreNames.contains(STORE)) db.createObjectStore(STORE);
      },
    });
    this.database = opening;
    // A failed open (a full disk, a blocked upgrade) is tried again by the next call, not kept.
    opening.catch(() => {
      if (this.database === opening) this.database = undefined;
    });
    return opening;
  }

  /**
   * Stores an input durably; resolves once the browser confirmed the write. Fails as the session's store
   * does: a StorageError `quota-exceeded` (a full disk), `storage-closed` or `storage-failed`.
   */
  put(sessionId: string, row: InboxRow): Promise<void> {
    return this.stored("cannot queue the input in the inbox", async (db) => {
      const tx = db.transaction(STORE, "readwrite", { durability: "strict" });
      const stored: InboxRow & Queued = { ...row, queuedAt: Date.now(), queuedSeq: queuedSeq++ };
      await Promise.all([tx.store.put(stored, [sessionId, inboxRowId(row)]), tx.done]);
    });
  }

  /** Inputs waiting for a session's leader, in the order they were queued (rows of older versions first). */
  pending(sessionId: string): Promise<InboxRow[]> {
    return this.stored("cannot read the inbox", async (db) => {
      const range = IDBKeyRange.bound([sessionId], [sessionId, []]);
      const stored = (await db.getAll(STORE, range)) as (InboxRow & Queued)[];
      stored.sort((a, b) => (a.queuedAt ?? 0) - (b.queuedAt ?? 0) || (a.queuedSeq ?? 0) - (b.queuedSeq ?? 0));
      return stored.map(({ queuedAt: _at, queuedSeq: _seq, ...row }) => row as InboxRow);
    });
  }

  remove(sessionId: string, row: InboxRow): Promise<void> {
    return this.stored("cannot remove an input from the inbox", async (db) => {
      await db.delete(STORE, [sessionId, inboxRowId(row)]);
    });
  }

  /**
   * Runs `use` on the open database; an IndexedDB failure becomes the StorageError the session's store
   * would throw (its callers, and the drain that tells a passing failure from a refusal, expect those).
   */
  private async stored<T>(context: string, use: (db: IDBPDatabase) => Promise<T>): Promise<T> {
    try {
      return await use(await this.db());
    } catch (error) {
      throw toStorageError(error, context);
    }
  }

  async close(): Promise<void> {
    const database = this.database;
    this.database = undefined;
    (await database)?.close();
  }
}
