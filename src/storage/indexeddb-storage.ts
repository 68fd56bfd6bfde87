/**
 * The IndexedDB store (via `idb`): one readwrite transaction per commit group, compound keys
 * `[sessionId, …]` so every session lives in the same object stores and each read is one key range.
 */
import { type KernelError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { createRowsOf, logRowWrite, openedWriterMeta, planGroup } from "./group-plan.ts";
import { pruneThroughInTx, tailInTx, writeMaterialization, writeRow } from "./indexeddb-log.ts";
import {
  finished,
  openStores,
  reader,
  readRows,
  refusalOf,
  requested,
  type SessionRanges,
  toStorageError,
} from "./indexeddb-requests.ts";
import { changesAfter } from "./log-rows.ts";
import type { WriteHook } from "./memory-storage.ts";
import { checkGuard, nextWriterMeta, rawNumber, TABLES, upgradedMeta } from "./rows.ts";
import type {
  CommitGuard,
  OpenRequest,
  ParkedCursor,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredRecord,
  StoredSession,
} from "./storage.ts";
import { DEFAULT_RETAIN_CHANGE_BYTES, DEFAULT_RETAIN_CHANGES } from "./storage.ts";
import { overlayReader, Tail, TailCache } from "./tail.ts";
import {
  readItemPage,
  readParkedPage,
  readRequest,
  readSettledPage,
  readStoredSession,
  readTrees,
  readWaitingTree,
  type SessionRowReader,
  type StoredItem,
  upgradeRows,
} from "./working-set.ts";

export interface IndexedDbStorageOptions extends StorageOptions {
  /**
   * Transaction durability. Default `"strict"`: a commit is confirmed only once the browser reports it
   * flushed to disk, so it survives an OS crash or power loss, not just a tab or browser crash. `"relaxed"`
   * roughly halves commit latency in Chromium and still survives tab reloads and browser crashes.
   */
  readonly durability?: "strict" | "relaxed" | "default";
  /**
   * The IndexedDB factory. Default `globalThis.indexedDB`. With another implementation (fake-indexeddb in
   * Node, no `fake-indexeddb/auto` needed) pass its `IDBKeyRange` as `keyRange` too: the store reads no
   * IndexedDB global then.
   */
  readonly factory?: IDBFactory;
  /** The `IDBKeyRange` of the same implementation as `factory`. Default `globalThis.IDBKeyRange`. */
  readonly keyRange?: typeof IDBKeyRange;
  /** Called for each row a commit writes; throwing aborts the transaction (fault injection in tests). */
  readonly onWrite?: WriteHook;
}

/**
 * 2 added the index stores (`items`, `live`, `requests`, `children`), 3 `signals` and `earlySignals`, 4
 * `settled`, 5 `parked`, `waitKeys` and `deadlines`; an upgrade only creates stores.
 */
const DB_VERSION = 5;
const SESSIONS = "sessions";
const ALL_STORES = [SESSIONS, ...TABLES];
type Db = IDBDatabase;
type Tx = IDBTransaction;

/** The IndexedDB store. Create one with {@link indexedDbStorage}. */
export class IndexedDbStorage implements Storage {
  private database: Promise<Db> | undefined;
  private closedReason: string | undefined;
  private readonly retain: number;
  private readonly retainBytes: number;
  private readonly durability: "strict" | "relaxed" | "default";
  private ranges: SessionRanges | undefined;
  /** This handle's tail of each session it wrote or read (see `tail.ts`). */
  private readonly tails = new TailCache();

  constructor(
    /** The IndexedDB database name; one database holds any number of sessions. */
    readonly name: string,
    private readonly options: IndexedDbStorageOptions = {},
  ) {
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
    this.retainBytes = options.retainChangeBytes ?? DEFAULT_RETAIN_CHANGE_BYTES;
    this.durability = options.durability ?? "strict";
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    if (request.mode === "read") {
      return this.read(sessionId, (r, meta) => readStoredSession(sessionId, meta, request, r), undefined);
    }
    let opened = 0;
    const stored = await this.transaction("readwrite", async (tx, keys) => {
      const sessions = tx.objectStore(SESSIONS);
      let meta = nextWriterMeta(
        await requested(sessions.get(sessionId)),
        sessionId,
        request.at,
        request.epoch,
      );
      // An older format: the index rows it lacks are written in this same transaction.
      const rows = await upgradeRows(rawNumber(meta, "format"), reader(tx, keys, sessionId));
      if (rows) {
        await Promise.all(rows.map((row) => writeRow(tx, sessionId, row)));
        meta = upgradedMeta(meta);
      }
      // The tail a previous writer left in the log only is written into rows before anything is read.
      const tail = await tailInTx(tx, keys, sessionId, meta, this.tails);
      await Promise.all(writeMaterialization(tx, keys, sessionId, tail.materialization()));
      meta = openedWriterMeta(meta);
      opened = rawNumber(meta, "version") ?? 0;
      await requested(sessions.put(meta, sessionId));
      return readStoredSession(sessionId, meta, request, reader(tx, keys, sessionId));
    });
    this.tails.remember(sessionId, Tail.materialized(opened));
    return stored;
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.transaction("readwrite", async (tx, keys) => {
      await Promise.all([
        requested(tx.objectStore(SESSIONS).delete(sessionId)),
        ...TABLES.map((table) => requested(tx.objectStore(table).delete(keys.all(sessionId)))),
      ]);
    });
    this.tails.forget(sessionId);
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    if (commits.length === 0) return;
    // A refused create aborts the transaction; whatever else was waiting then fails with AbortError (a
    // read of the pruning step, the transaction itself). The refusal is what the caller is told.
    let refusal: KernelError | undefined;
    try {
      const tail = await this.writeGroup(guard, commits, (error) => {
        refusal ??= error;
      });
      this.tails.remember(guard.sessionId, tail);
    } catch (error) {
      throw refusal ?? error;
    }
  }

  private writeGroup(
    guard: CommitGuard,
    commits: readonly CommitRecord[],
    refused: (error: KernelError) => void,
  ): Promise<Tail> {
    return this.transaction("readwrite", async (tx, keys) => {
      const sessions = tx.objectStore(SESSIONS);
      // The guard is read in this transaction. The create-only rows queue up behind the read instead of
      // waiting for it: a stale guard aborts the transaction, and nothing it queued is written. Each is an
      // `add`, which fails on an existing key and aborts the transaction the same way: the duplicate refuses
      // the whole group without a read before it.
      const stored = requested(sessions.get(guard.sessionId));
      stored.catch(() => undefined);
      const writes: Promise<unknown>[] = [];
      // Handled as they are queued: one may fail (a refused create) while the body still awaits a read.
      const queue = (write: Promise<unknown>) => {
        write.catch(() => undefined);
        writes.push(write);
      };
      let index = 0;
      for (const { row, version } of createRowsOf(commits)) {
        this.options.onWrite?.(row, index++);
        const key = [guard.sessionId, ...row.key];
        queue(
          requested(tx.objectStore(row.table).add(row.value, key)).catch((error: unknown) => {
            const refusal = refusalOf(error, row, version);
            if (refusal) refused(refusal);
            throw refusal ?? error;
          }),
        );
      }
      const meta = checkGuard(await stored, guard);
      const plan = planGroup(meta, await tailInTx(tx, keys, guard.sessionId, meta, this.tails), commits, {
        retain: this.retain,
      });
      const changes = tx.objectStore("changes");
      for (const log of plan.log) {
        this.options.onWrite?.(logRowWrite(log), index++);
        queue(requested(changes.put(log.value, [guard.sessionId, log.version])));
      }
      if (plan.materialize) {
        for (const row of plan.materialize.rows) this.options.onWrite?.(row, index++);
        for (const write of writeMaterialization(tx, keys, guard.sessionId, plan.materialize)) queue(write);
      }
      if (plan.prune) {
        const through = await pruneThroughInTx(
          tx,
          keys,
          guard,
          plan.prune,
          this.retainBytes,
          plan.meta.logEnd,
        );
        if (through > 0) queue(requested(changes.delete(keys.numbers(guard.sessionId, [], 0, through))));
      }
      queue(requested(sessions.put(plan.meta, guard.sessionId)));
      await Promise.all(writes);
      return plan.tail;
    });
  }

  /** Writes this handle's tail of the session into rows, if the guard still holds (a writer closing). */
  async checkpoint(guard: CommitGuard): Promise<void> {
    const done = await this.transaction("readwrite", async (tx, keys) => {
      const sessions = tx.objectStore(SESSIONS);
      const meta = checkGuard(await requested(sessions.get(guard.sessionId)), guard);
      const tail = await tailInTx(tx, keys, guard.sessionId, meta, this.tails);
      if (tail.isEmpty) return tail;
      const materialization = tail.materialization();
      for (const [i, row] of materialization.rows.entries()) this.options.onWrite?.(row, i);
      await Promise.all([
        ...writeMaterialization(tx, keys, guard.sessionId, materialization),
        requested(sessions.put({ ...meta, materialized: tail.version }, guard.sessionId)),
      ]);
      return Tail.materialized(tail.version);
    });
    this.tails.remember(guard.sessionId, done);
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.read(sessionId, async (r) => r.range("entries", conversationId, fromSeq, toSeq - 1), []);
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    return this.transaction("readonly", async (tx, keys) => {
      const after = keys.numbers(sessionId, [], afterVersion + 1, Number.POSITIVE_INFINITY);
      const [[first], rows, meta] = await Promise.all([
        readRows(tx, "changes", keys.all(sessionId), 1),
        readRows(tx, "changes", after, limit),
        requested(tx.objectStore(SESSIONS).get(sessionId)),
      ]);
      return changesAfter(rows, first, afterVersion, limit, rawNumber(meta, "version") ?? 0);
    });
  }

  async readDocumentRows(sessionId: string, documentId: string, fromVersion: number, toVersion: number) {
    return this.read(sessionId, async (r) => r.range("documentRows", documentId, fromVersion, toVersion), []);
  }

  async readSubmission(sessionId: string, submissionId: string) {
    return this.read(sessionId, async (r) => r.get("submissions", [submissionId]), undefined);
  }

  async readRequest(sessionId: string, requestId: string) {
    return this.read(sessionId, (r) => readRequest(r, requestId), undefined);
  }

  async readTask(sessionId: string, taskId: string) {
    return this.read(sessionId, async (r) => r.get("tasks", [taskId]), undefined);
  }

  async readSignal(sessionId: string, key: string) {
    return this.read(sessionId, async (r) => r.get("signals", [key]), undefined);
  }

  async readTaskTree(sessionId: string, rootId: string) {
    return this.read(sessionId, (r) => readTrees(r, [rootId]), []);
  }

  async readWaiting(sessionId: string, key: string) {
    return this.read(sessionId, (r) => readWaitingTree(r, key), []);
  }

  async readParked(sessionId: string, before: ParkedCursor | undefined, limit: number) {
    return this.read(sessionId, (r) => readParkedPage(r, before, limit), []);
  }

  async readDeadlines(sessionId: string, limit: number) {
    return this.read(sessionId, async (r) => r.earliest("deadlines", limit), []);
  }

  async readItems(
    sessionId: string,
    before: number,
    limit: number,
  ): Promise<{ items: StoredItem[]; submissions: StoredRecord[] }> {
    return this.read(sessionId, (r) => readItemPage(r, before, limit), { items: [], submissions: [] });
  }

  async readSettled(sessionId: string, limit: number) {
    return this.read(sessionId, (r) => readSettledPage(r, limit), { items: [], count: 0 });
  }

  /**
   * A read of one session in one transaction, through its rows as the log's tail leaves them (the session
   * row says whether there is a tail); `none` when the session does not exist.
   */
  private async read<T>(
    sessionId: string,
    body: (reader: SessionRowReader, meta: unknown) => Promise<T>,
    none: T,
  ): Promise<T> {
    let tail: Tail | undefined;
    const result = await this.transaction("readonly", async (tx, keys) => {
      const meta: unknown = await requested(tx.objectStore(SESSIONS).get(sessionId));
      if (meta === undefined) return none;
      tail = await tailInTx(tx, keys, sessionId, meta, this.tails);
      return body(overlayReader(reader(tx, keys, sessionId), tail), meta);
    });
    if (tail) this.tails.remember(sessionId, tail);
    return result;
  }

  async close(): Promise<void> {
    this.closedReason ??= "closed by its owner";
    const database = this.database;
    this.database = undefined;
    const db = await database?.catch(() => undefined);
    db?.close();
  }

  private connect(): Promise<Db> {
    if (this.closedReason) {
      return Promise.reject(
        new StorageError("storage-closed", `IndexedDB "${this.name}" is ${this.closedReason}`),
      );
    }
    this.database ??= this.openDatabase().catch((error: unknown) => {
      this.database = undefined;
      throw toStorageError(error, `cannot open IndexedDB "${this.name}"`);
    });
    return this.database;
  }

  private async openDatabase(): Promise<Db> {
    const { db, ranges } = await openStores(this.options, this.name, DB_VERSION, ALL_STORES);
    this.ranges = ranges;
    // Another tab is upgrading the schema: let it, and stop cleanly instead of blocking it.
    db.addEventListener("versionchange", () => {
      this.closedReason = "closed because another connection is upgrading it";
      db.close();
      this.database = undefined;
    });
    // The browser closed the connection (storage cleared, disk error): reconnect on next use.
    db.addEventListener("close", () => {
      this.database = undefined;
    });
    return db;
  }

  private async transaction<T>(
    mode: "readonly" | "readwrite",
    body: (tx: Tx, keys: SessionRanges) => Promise<T>,
  ): Promise<T> {
    const db = await this.connect();
    const keys = this.ranges as SessionRanges; // set by connect()
    let tx: Tx;
    let done: Promise<void>;
    try {
      tx = db.transaction(ALL_STORES, mode, { durability: this.durability });
      done = finished(tx);
    } catch (error) {
      this.database = undefined;
      throw toStorageError(error, `cannot start an IndexedDB transaction on "${this.name}"`);
    }
    try {
      const [result] = await Promise.all([body(tx, keys), done]);
      return result;
    } catch (error) {
      try {
        tx.abort();
      } catch {
        // Already finished or aborted by the browser; `tx.done` below reports why.
      }
      // Wait for the abort to settle; the error that caused it is the one worth reporting.
      await done.catch(() => undefined);
      throw toStorageError(error, "IndexedDB transaction failed");
    }
  }
}

/**
 * Creates an IndexedDB store.
 *
 * @example
 * const storage = indexedDbStorage("my-app", { durability: "relaxed" });
 */
export function indexedDbStorage(name: string, options?: IndexedDbStorageOptions): IndexedDbStorage {
  return new IndexedDbStorage(name, options);
}
