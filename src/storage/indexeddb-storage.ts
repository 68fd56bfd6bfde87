/**
 * The IndexedDB store (via `idb`): one readwrite transaction per commit group, compound keys
 * `[sessionId, …]` so every session lives in the same object stores and each read is one key range.
 */
import { type KernelError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import {
  finished,
  pruneThroughInTx,
  reader,
  readRows,
  refusalOf,
  requested,
  SessionRanges,
  toStorageError,
} from "./indexeddb-requests.ts";
import type { WriteHook } from "./memory-storage.ts";
import type { KeyPart } from "./rows.ts";
import {
  checkGuard,
  loggedChange,
  nextWriterMeta,
  opsOfGroup,
  parkedCountAfter,
  rawNumber,
  TABLES,
  upgradedMeta,
} from "./rows.ts";
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
    return this.transaction(request.mode === "write" ? "readwrite" : "readonly", async (tx, keys) => {
      const sessions = tx.objectStore(SESSIONS);
      let meta: unknown = await requested(sessions.get(sessionId));
      if (request.mode === "write") {
        meta = nextWriterMeta(meta, sessionId, request.at, request.epoch);
        // An older format: the index rows it lacks are written in this same transaction.
        const rows = await upgradeRows(rawNumber(meta, "format"), reader(tx, keys, sessionId));
        if (rows) {
          await Promise.all(
            rows.map((row) => requested(tx.objectStore(row.table).put(row.value, [sessionId, ...row.key]))),
          );
          meta = upgradedMeta(meta);
        }
        await requested(sessions.put(meta, sessionId));
      }
      if (meta === undefined) return undefined;
      return readStoredSession(sessionId, meta, request, reader(tx, keys, sessionId));
    });
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.transaction("readwrite", async (tx, keys) => {
      await Promise.all([
        requested(tx.objectStore(SESSIONS).delete(sessionId)),
        ...TABLES.map((table) => requested(tx.objectStore(table).delete(keys.all(sessionId)))),
      ]);
    });
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    const last = commits.at(-1);
    if (!last) return;
    // A refused create aborts the transaction; whatever else was waiting then fails with AbortError (a
    // read of the pruning step, the transaction itself). The refusal is what the caller is told.
    let refusal: KernelError | undefined;
    try {
      await this.writeGroup(guard, commits, last, (error) => {
        refusal ??= error;
      });
    } catch (error) {
      throw refusal ?? error;
    }
  }

  private async writeGroup(
    guard: CommitGuard,
    commits: readonly CommitRecord[],
    last: CommitRecord,
    refused: (error: KernelError) => void,
  ): Promise<void> {
    await this.transaction("readwrite", async (tx, keys) => {
      const sessions = tx.objectStore(SESSIONS);
      const ops = opsOfGroup(commits, this.retain);
      // The guard is read in this transaction. The writes queue up behind the read instead of waiting for
      // it (one round trip to the database, not two): a stale guard aborts the transaction, and nothing it
      // queued is written. A create-only row is an `add`, which fails on an existing key and aborts the
      // transaction the same way: the duplicate refuses the whole commit without a read before it.
      const stored = requested(sessions.get(guard.sessionId));
      stored.catch(() => undefined);
      let meta: ReturnType<typeof checkGuard> | undefined;
      const writes: Promise<unknown>[] = [];
      // Handled as they are queued: one may fail (a refused create) while the body still awaits a read.
      const queue = (write: Promise<unknown>) => {
        write.catch(() => undefined);
        writes.push(write);
      };
      let index = 0;
      // The change log's size so far is in the session row: read before the first change row is queued.
      let logEnd: number | undefined;
      for (const op of ops) {
        if (op.kind === "obsolete") {
          const obsolete = keys.numbers(guard.sessionId, [op.documentId], 0, op.below - 1);
          queue(requested(tx.objectStore("documentRows").delete(obsolete)));
          continue;
        }
        if (op.kind === "prune") {
          const through = await pruneThroughInTx(tx, keys, guard, op, this.retainBytes, logEnd);
          if (through > 0) {
            const pruned = keys.numbers(guard.sessionId, [], 0, through);
            queue(requested(tx.objectStore("changes").delete(pruned)));
          }
          continue;
        }
        let { row } = op;
        if (row.table === "changes") {
          meta ??= checkGuard(await stored, guard);
          logEnd ??= rawNumber(meta, "logEnd") ?? 0;
          row = loggedChange(row, logEnd);
          logEnd += JSON.stringify(row.value).length;
        }
        this.options.onWrite?.(row, index++);
        const store = tx.objectStore(row.table);
        const key = [guard.sessionId, ...row.key];
        // `add` fails (and aborts the transaction) if the key exists: a requestId never changes owner.
        queue(
          row.op === "delete"
            ? requested(store.delete(key))
            : row.op === "create"
              ? requested(store.add(row.value, key)).catch((error: unknown) => {
                  const refusal = refusalOf(error, row, op.version);
                  if (refusal) refused(refusal);
                  throw refusal ?? error;
                })
              : requested(store.put(row.value, key)),
        );
      }
      meta ??= checkGuard(await stored, guard);
      const log = logEnd === undefined ? {} : { logEnd };
      queue(
        requested(
          sessions.put(
            {
              ...meta,
              version: last.version,
              updatedAt: last.at,
              ...log,
              ...parkedCountAfter(meta, commits),
            },
            guard.sessionId,
          ),
        ),
      );
      await Promise.all(writes);
    });
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.transaction("readonly", (tx, keys) =>
      readRows(tx, "entries", keys.numbers(sessionId, [conversationId], fromSeq, toSeq - 1)),
    );
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    return this.transaction("readonly", async (tx, keys) => {
      const store = tx.objectStore("changes");
      const first = (await requested(store.getKey(keys.all(sessionId)))) as KeyPart[] | undefined;
      const changes = await readRows(
        tx,
        "changes",
        keys.numbers(sessionId, [], afterVersion + 1, Number.POSITIVE_INFINITY),
        limit,
      );
      const meta = await requested(tx.objectStore(SESSIONS).get(sessionId));
      const oldestRetained = first ? Number(first[1]) : (rawNumber(meta, "version") ?? 0) + 1;
      return { changes, oldestRetained };
    });
  }

  async readDocumentRows(sessionId: string, documentId: string, fromVersion: number, toVersion: number) {
    return this.transaction("readonly", (tx, keys) =>
      readRows(tx, "documentRows", keys.numbers(sessionId, [documentId], fromVersion, toVersion)),
    );
  }

  async readSubmission(sessionId: string, submissionId: string) {
    return this.read(sessionId, async (r) => r.get("submissions", [submissionId]));
  }

  async readRequest(sessionId: string, requestId: string) {
    return this.read(sessionId, (r) => readRequest(r, requestId));
  }

  async readTask(sessionId: string, taskId: string) {
    return this.read(sessionId, async (r) => r.get("tasks", [taskId]));
  }

  async readSignal(sessionId: string, key: string) {
    return this.read(sessionId, async (r) => r.get("signals", [key]));
  }

  async readTaskTree(sessionId: string, rootId: string) {
    return this.read(sessionId, (r) => readTrees(r, [rootId]));
  }

  async readWaiting(sessionId: string, key: string) {
    return this.read(sessionId, (r) => readWaitingTree(r, key));
  }

  async readParked(sessionId: string, before: ParkedCursor | undefined, limit: number) {
    return this.read(sessionId, (r) => readParkedPage(r, before, limit));
  }

  async readDeadlines(sessionId: string, limit: number) {
    return this.read(sessionId, async (r) => r.earliest("deadlines", limit));
  }

  async readItems(
    sessionId: string,
    before: number,
    limit: number,
  ): Promise<{ items: StoredItem[]; submissions: StoredRecord[] }> {
    return this.read(sessionId, (r) => readItemPage(r, before, limit));
  }

  async readSettled(sessionId: string, limit: number) {
    return this.read(sessionId, (r) => readSettledPage(r, limit));
  }

  private read<T>(sessionId: string, body: (reader: SessionRowReader) => Promise<T>): Promise<T> {
    return this.transaction("readonly", (tx, keys) => body(reader(tx, keys, sessionId)));
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
    const factory = this.options.factory ?? globalThis.indexedDB;
    if (!factory) throw new StorageError("storage-failed", "IndexedDB is not available in this environment");
    const keyRange = this.options.keyRange ?? globalThis.IDBKeyRange;
    if (!keyRange) {
      throw new StorageError(
        "storage-failed",
        "IndexedDB key ranges are not available in this environment: pass `keyRange` (the IDBKeyRange of the implementation `factory` comes from)",
      );
    }
    this.ranges = new SessionRanges(keyRange);
    const request = factory.open(this.name, DB_VERSION);
    request.onupgradeneeded = () => {
      const db = request.result;
      for (const store of ALL_STORES) if (!db.objectStoreNames.contains(store)) db.createObjectStore(store);
    };
    const db = await requested(request);
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
