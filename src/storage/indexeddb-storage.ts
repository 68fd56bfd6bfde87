/**
 * The IndexedDB store (via `idb`): one readwrite transaction per commit group, compound keys
 * `[sessionId, …]` so every session lives in the same object stores and each read is one key range.
 */
import { type KernelError, StorageError } from "../errors.ts";
import type { CommitRecord, SessionMeta } from "../records/schemas.ts";
import { type GroupPlan, isSameRow, mayMaterialize, openedWriterMeta, RowChanged } from "./group-plan.ts";
import { writeGroupInTx } from "./indexeddb-commit.ts";
import { deleteInTx, exportInTx, importInTx } from "./indexeddb-export.ts";
import { tailInTx, writeMaterialization, writeRow } from "./indexeddb-log.ts";
import {
  finished,
  openStores,
  readEntries,
  reader,
  readRows,
  requested,
  type SessionRanges,
  toStorageError,
} from "./indexeddb-requests.ts";
import { changesAfter } from "./log-rows.ts";
import type { WriteHook } from "./memory-storage.ts";
import { rawNumber, TABLES } from "./rows.ts";
import { checkGuard, nextWriterMeta, upgradedMeta } from "./session-row.ts";
import type {
  CommitGuard,
  OpenRequest,
  ParkedCursor,
  RawSession,
  SessionImport,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredSession,
} from "./storage.ts";
import { checkStorageOptions, DEFAULT_RETAIN_CHANGE_BYTES, DEFAULT_RETAIN_CHANGES } from "./storage.ts";
import { Tail, TailCache } from "./tail.ts";
import { overlayReader } from "./tail-overlay.ts";
import {
  noSignalRows,
  noWaitingTrees,
  readItemPage,
  readParkedPage,
  readRequest,
  readSettledPage,
  readSignalRows,
  readStoredSession,
  readTrees,
  readWaitingTrees,
  type SessionRowReader,
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
/** What a group that does not materialize the tail writes: the session row, its log row, the rows written with it. */
const COMMIT_STORES = [SESSIONS, "changes", "requests", "signals", "entries"];

/** The IndexedDB store. Create one with {@link indexedDbStorage}. */
export class IndexedDbStorage implements Storage {
  private database: Promise<IDBDatabase> | undefined;
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
    checkStorageOptions(options);
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
    this.retainBytes = options.retainChangeBytes ?? DEFAULT_RETAIN_CHANGE_BYTES;
    this.durability = options.durability ?? "strict";
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    if (request.mode === "read") {
      return this.read(sessionId, (r, meta) => readStoredSession(sessionId, meta, request, r), undefined);
    }
    let opened: SessionMeta | undefined;
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
      opened = openedWriterMeta(meta) as SessionMeta;
      await requested(sessions.put(opened, sessionId));
      return readStoredSession(sessionId, opened, request, reader(tx, keys, sessionId));
    });
    if (opened) this.tails.remember(sessionId, Tail.materialized(opened.version), opened, true);
    return stored;
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.transaction("readwrite", (tx, keys) => deleteInTx(tx, keys, sessionId));
    this.tails.forget(sessionId);
  }

  async exportRaw(sessionId: string): Promise<RawSession | undefined> {
    return this.transaction("readonly", (tx, keys) => exportInTx(tx, keys, sessionId));
  }

  async importRaw(sessionId: string, session: SessionImport): Promise<void> {
    await this.transaction("readwrite", (tx, keys) => importInTx(tx, keys, sessionId, session));
    this.tails.forget(sessionId);
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    if (commits.length === 0) return;
    // A refused create aborts the transaction; whatever else was waiting then fails with AbortError (a
    // read of the pruning step, the transaction itself). The refusal is what the caller is told.
    let refusal: KernelError | undefined;
    const refused = (error: KernelError) => {
      refusal ??= error;
    };
    try {
      let plan: GroupPlan;
      try {
        plan = await this.writeGroup(guard, commits, refused, true);
      } catch (error) {
        if (!(error instanceof RowChanged)) throw error;
        // The session row was not as this handle left it (nothing was written): read it, then write.
        this.tails.forget(guard.sessionId);
        plan = await this.writeGroup(guard, commits, refused, false);
      }
      this.tails.remember(guard.sessionId, plan.tail, plan.meta, true);
    } catch (error) {
      throw refusal ?? error;
    }
  }

  /** One group's transaction (see `writeGroupInTx`). */
  private writeGroup(
    guard: CommitGuard,
    commits: readonly CommitRecord[],
    refused: (error: KernelError) => void,
    optimistic: boolean,
  ): Promise<GroupPlan> {
    const cached = this.tails.guess(guard.sessionId);
    const known = optimistic ? this.tails.writtenRow(guard.sessionId) : undefined;
    // Most groups write only their log row, create-only rows and the session row: their transaction names
    // only those stores (a smaller scope costs the browser less to schedule).
    const wide = mayMaterialize(cached, guard.expectedVersion, commits, this.options.tailCommits);
    const group = { guard, commits, cached, known, wide, refused };
    return this.transaction("readwrite", wide ? ALL_STORES : COMMIT_STORES, (tx, keys) =>
      writeGroupInTx(tx, keys, group, {
        tails: this.tails,
        retain: this.retain,
        tailCommits: this.options.tailCommits,
        retainBytes: this.retainBytes,
        onWrite: this.options.onWrite,
      }),
    );
  }

  /** Writes this handle's tail of the session into rows, if the guard still holds (a writer closing). */
  async checkpoint(guard: CommitGuard): Promise<void> {
    const done = await this.transaction("readwrite", async (tx, keys) => {
      const sessions = tx.objectStore(SESSIONS);
      const meta = checkGuard(await requested(sessions.get(guard.sessionId)), guard);
      const tail = await tailInTx(tx, keys, guard.sessionId, meta, this.tails);
      if (tail.isEmpty) return { tail, meta, written: false };
      const materialization = tail.materialization();
      for (const [i, row] of materialization.rows.entries()) this.options.onWrite?.(row, i);
      const written = { ...meta, materialized: tail.version };
      await Promise.all([
        ...writeMaterialization(tx, keys, guard.sessionId, materialization),
        requested(sessions.put(written, guard.sessionId)),
      ]);
      return { tail: Tail.materialized(tail.version), meta: written, written: true };
    });
    this.tails.remember(guard.sessionId, done.tail, done.meta, done.written);
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.read(sessionId, async (r) => r.range("entries", conversationId, fromSeq, toSeq - 1), []);
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    return this.transaction("readonly", async (tx, keys) => {
      const [[first], meta] = await Promise.all([
        readRows(tx, "changes", keys.all(sessionId), 1),
        requested(tx.objectStore(SESSIONS).get(sessionId)),
      ]);
      const read = {
        rows: (from: number, to: number, most?: number) =>
          readRows(tx, "changes", keys.numbers(sessionId, [], from, to), most),
        entries: (conversation: string, from: number, to: number) =>
          readEntries(tx, keys, sessionId, conversation, from, to),
      };
      return changesAfter(read, first, afterVersion, limit, meta);
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

  async readSignals(sessionId: string, keys: readonly string[]) {
    return this.read(sessionId, readSignalRows(keys), noSignalRows(keys));
  }

  async readTaskTree(sessionId: string, rootId: string) {
    return this.read(sessionId, (r) => readTrees(r, [rootId]), []);
  }

  async readWaiting(sessionId: string, keys: readonly string[]) {
    return this.read(sessionId, readWaitingTrees(keys), noWaitingTrees(keys));
  }

  async readParked(sessionId: string, before: ParkedCursor | undefined, limit: number) {
    return this.read(sessionId, (r) => readParkedPage(r, before, limit), []);
  }

  async readDeadlines(sessionId: string, limit: number) {
    return this.read(sessionId, async (r) => r.earliest("deadlines", limit), []);
  }

  async readItems(sessionId: string, before: number, limit: number) {
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
    let row: unknown;
    const cached = this.tails.guess(sessionId);
    const known = this.tails.writtenRow(sessionId);
    const result = await this.transaction("readonly", async (tx, keys) => {
      const stored = requested(tx.objectStore(SESSIONS).get(sessionId));
      if (cached && known && cached.version === known.version) {
        // Read as this handle left the session while its row is read back (one round trip, not two);
        // read again when the row is not that one.
        const guess = body(overlayReader(reader(tx, keys, sessionId), cached), known);
        guess.catch(() => undefined);
        const meta: unknown = await stored;
        if (meta !== undefined && isSameRow(meta as SessionMeta, known)) {
          tail = cached;
          row = meta;
          return guess;
        }
      }
      const meta: unknown = await stored;
      if (meta === undefined) return none;
      tail = await tailInTx(tx, keys, sessionId, meta, this.tails);
      row = meta;
      return body(overlayReader(reader(tx, keys, sessionId), tail), meta);
    });
    if (tail) this.tails.remember(sessionId, tail, row);
    return result;
  }

  async close(): Promise<void> {
    this.closedReason ??= "closed by its owner";
    const database = this.database;
    this.database = undefined;
    const db = await database?.catch(() => undefined);
    db?.close();
  }

  private connect(): Promise<IDBDatabase> {
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

  private async openDatabase(): Promise<IDBDatabase> {
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
    scopeOrBody: readonly string[] | ((tx: IDBTransaction, keys: SessionRanges) => Promise<T>),
    scopedBody?: (tx: IDBTransaction, keys: SessionRanges) => Promise<T>,
  ): Promise<T> {
    const scope = typeof scopeOrBody === "function" ? ALL_STORES : scopeOrBody;
    const body = (scopedBody ?? scopeOrBody) as (tx: IDBTransaction, keys: SessionRanges) => Promise<T>;
    const db = await this.connect();
    const keys = this.ranges as SessionRanges; // set by connect()
    let tx: IDBTransaction;
    let done: Promise<void>;
    try {
      tx = db.transaction([...scope], mode, { durability: this.durability });
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
      if (error instanceof RowChanged) throw error;
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
