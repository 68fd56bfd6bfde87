/**
 * The durable inbox: a follower tab's input is written here (one IndexedDB transaction, strict durability)
 * before the follower acknowledges it; the leader accepts inbox rows — Submissions and signals, both
 * idempotent by requestId — and only then deletes them, so nothing is lost if either tab dies in between.
 */
import { type IDBPDatabase, openDB } from "idb";
import type { Json, SubmitInput } from "../src/index.ts";

const STORE = "inbox";

/** A signal a follower tab was given, for the leader to deliver. */
export interface InboxSignal {
  readonly signal: { readonly key: string; readonly payload: Json; readonly requestId: string };
}

/** One input waiting for the leader: a submission, or a signal. */
export type InboxRow = SubmitInput | InboxSignal;

export const isInboxSignal = (row: InboxRow): row is InboxSignal => "signal" in row;

/** Its key in the store: a signal's cannot collide with a submission's requestId. */
function rowId(row: InboxRow): string {
  return isInboxSignal(row) ? `signal\u0000${row.signal.key}\u0000${row.signal.requestId}` : row.requestId;
}

export class DurableInbox {
  private database: Promise<IDBPDatabase> | undefined;
  constructor(private readonly name: string) {}

  private db(): Promise<IDBPDatabase> {
    this.database ??= openDB(this.name, 1, {
      upgrade(db) {
        if (!db.objectStoreNames.contains(STORE)) db.createObjectStore(STORE);
      },
    });
    return this.database;
  }

  /** Stores an input durably; resolves once the browser confirmed the write. */
  async put(sessionId: string, row: InboxRow): Promise<void> {
    const db = await this.db();
    const tx = db.transaction(STORE, "readwrite", { durability: "strict" });
    await Promise.all([tx.store.put(row, [sessionId, rowId(row)]), tx.done]);
  }

  /** Inputs waiting for a session's leader, by key. */
  async pending(sessionId: string): Promise<InboxRow[]> {
    const db = await this.db();
    return (await db.getAll(STORE, IDBKeyRange.bound([sessionId], [sessionId, []]))) as InboxRow[];
  }

  async remove(sessionId: string, row: InboxRow): Promise<void> {
    const db = await this.db();
    await db.delete(STORE, [sessionId, rowId(row)]);
  }

  async close(): Promise<void> {
    const database = this.database;
    this.database = undefined;
    (await database)?.close();
  }
}
