/**
 * The durable inbox: a follower tab's input is written here (one IndexedDB transaction, strict durability)
 * before the follower acknowledges it; the leader accepts inbox rows as Submissions (idempotent by
 * requestId) and only then deletes them, so nothing is lost if either tab dies in between.
 */
import { type IDBPDatabase, openDB } from "idb";
import type { SubmitInput } from "../src/index.ts";

const STORE = "inbox";

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
  async put(sessionId: string, input: SubmitInput): Promise<void> {
    const db = await this.db();
    const tx = db.transaction(STORE, "readwrite", { durability: "strict" });
    await Promise.all([tx.store.put(input, [sessionId, input.requestId]), tx.done]);
  }

  /** Inputs waiting for a session's leader, oldest request ids first. */
  async pending(sessionId: string): Promise<SubmitInput[]> {
    const db = await this.db();
    return (await db.getAll(STORE, IDBKeyRange.bound([sessionId], [sessionId, []]))) as SubmitInput[];
  }

  async remove(sessionId: string, requestId: string): Promise<void> {
    const db = await this.db();
    await db.delete(STORE, [sessionId, requestId]);
  }

  async close(): Promise<void> {
    const database = this.database;
    this.database = undefined;
    (await database)?.close();
  }
}
