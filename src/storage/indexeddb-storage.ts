/**
 * The IndexedDB store (via `idb`): one readwrite transaction per commit group, compound keys
 * `[sessionId, …]` so every session lives in the same object stores and each read is one key range.
 */
import type { IDBPDatabase, IDBPTransaction } from "idb";
import { wrap } from "idb";
import { ensureError, KernelError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { pruneThroughAsync } from "./change-log.ts";
import type { WriteHook } from "./memory-storage.ts";
import type { KeyPart, Table } from "./rows.ts";
import {
  checkCreate,
  checkGuard,
  loggedChange,
  nextWriterMeta,
  opsOfGroup,
  rawNumber,
  recordName,
  TABLES,
  upgradedMeta,
} from "./rows.ts";
import type {
  CommitGuard,
  OpenRequest,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredRecord,
  StoredSession,
} from "./storage.ts";
import { DEFAULT_RETAIN_CHANGE_BYTES, DEFAULT_RETAIN_CHANGES } from "./storage.ts";
import {
  readItemPage,
  readRequest,
  readSettledPage,
  readStoredSession,
  readTrees,
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
  /** The IndexedDB factory. Default `globalThis.indexedDB`; tests pass fake-indexeddb's. */
  readonly factory?: IDBFactory;
  /** Called for each row a commit writes; throwing aborts the transaction (fault injection in tests). */
  readonly onWrite?: WriteHook;
}

/**
 * 2 added the index stores (`items`, `live`, `requests`, `children`), 3 `signals` and `earlySignals`, 4
 * `settled`; an upgrade only creates stores.
 */
const DB_VERSION = 4;
const SESSIONS = "sessions";
const ALL_STORES = [SESSIONS, ...TABLES];
type Db = IDBPDatabase<unknown>;
// Typed as readwrite so one helper serves both modes; readonly bodies only read.
type Tx = IDBPTransaction<unknown, string[], "readwrite">;

type PruneOp = { readonly through: number; readonly version: number };
const sessionRange = (sessionId: string, ...prefix: KeyPart[]) =>
  IDBKeyRange.bound([sessionId, ...prefix], [sessionId, ...prefix, []]);
const numberRange = (sessionId: string, prefix: KeyPart[], from: number, to: number) =>
  IDBKeyRange.bound([sessionId, ...prefix, from], [sessionId, ...prefix, to]);

/** The IndexedDB store. Create one with {@link indexedDbStorage}. */
export class IndexedDbStorage implements Storage {
  private database: Promise<Db> | undefined;
  private closedReason: string | undefined;
  private readonly retain: number;
  private readonly retainBytes: number;
  private readonly durability: "strict" | "relaxed" | "default";

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
    return this.transaction(request.mode === "write" ? "readwrite" : "readonly", async (tx) => {
      const sessions = tx.objectStore(SESSIONS);
      let meta: unknown = await sessions.get(sessionId);
      if (request.mode === "write") {
        meta = nextWriterMeta(meta, sessionId, request.at, request.epoch);
        // An older format: the index rows it lacks are written in this same transaction.
        const rows = await upgradeRows(rawNumber(meta, "format"), reader(tx, sessionId));
        if (rows) {
          await Promise.all(
            rows.map((row) => tx.objectStore(row.table).put(row.value, [sessionId, ...row.key])),
          );
          meta = upgradedMeta(meta);
        }
        await sessions.put(meta, sessionId);
      }
      if (meta === undefined) return undefined;
      return readStoredSession(sessionId, meta, request, reader(tx, sessionId));
    });
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.transaction("readwrite", async (tx) => {
      await Promise.all([
        tx.objectStore(SESSIONS).delete(sessionId),
        ...TABLES.map((table) => tx.objectStore(table).delete(sessionRange(sessionId))),
      ]);
    });
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    const last = commits.at(-1);
    if (!last) return;
    await this.transaction("readwrite", async (tx) => {
      const sessions = tx.objectStore(SESSIONS);
      const ops = opsOfGroup(commits, this.retain);
      // The guard is read in this transaction. The writes queue up behind the read instead of waiting for
      // it (one round trip to the database, not two): a stale guard aborts the transaction, and nothing it
      // queued is written. Create-only rows are checked before any write: a duplicate refuses the commit.
      const stored = sessions.get(guard.sessionId);
      stored.catch(() => undefined);
      const creates = ops.flatMap((op) => (op.kind === "row" && op.row.op === "create" ? [op] : []));
      let meta = creates.length > 0 ? checkGuard(await stored, guard) : undefined;
      for (const { row, version } of creates) {
        const found = await tx.objectStore(row.table).getKey([guard.sessionId, ...row.key]);
        checkCreate(row, found !== undefined, version);
      }
      const writes: Promise<unknown>[] = [];
      try {
        let index = 0;
        // The change log's size so far is in the session row: read before the first change row is queued.
        let logEnd: number | undefined;
        for (const op of ops) {
          if (op.kind === "obsolete") {
            const obsolete = numberRange(guard.sessionId, [op.documentId], 0, op.below - 1);
            writes.push(tx.objectStore("documentRows").delete(obsolete));
            continue;
          }
          if (op.kind === "prune") {
            const through = await this.pruneThrough(tx, guard, op, logEnd);
            if (through > 0)
              writes.push(tx.objectStore("changes").delete(numberRange(guard.sessionId, [], 0, through)));
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
          writes.push(
            row.op === "delete"
              ? store.delete(key)
              : row.op === "create"
                ? store.add(row.value, key)
                : store.put(row.value, key),
          );
        }
        meta ??= checkGuard(await stored, guard);
        const log = logEnd === undefined ? {} : { logEnd };
        writes.push(
          sessions.put({ ...meta, version: last.version, updatedAt: last.at, ...log }, guard.sessionId),
        );
      } catch (error) {
        // The transaction will abort and every request issued so far will reject: keep those handled.
        for (const write of writes) write.catch(() => undefined);
        throw error;
      }
      await Promise.all(writes);
    });
  }

  /** The highest change version a pruning boundary deletes once the log holds `logEnd` characters (0: none). */
  private async pruneThrough(tx: Tx, guard: CommitGuard, op: PruneOp, logEnd = 0): Promise<number> {
    const store = tx.objectStore("changes");
    const first = (await store.getKey(sessionRange(guard.sessionId))) as KeyPart[] | undefined;
    if (!first) return 0;
    const logStartOf = async (v: number) => rawNumber(await store.get([guard.sessionId, v]), "logStart");
    return pruneThroughAsync(logStartOf, {
      oldest: Number(first[1]),
      newest: op.version,
      logEnd,
      limit: this.retainBytes,
      through: op.through,
      keepChangesAfter: guard.keepChangesAfter,
    });
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.transaction("readonly", (tx) =>
      readRows(tx, "entries", numberRange(sessionId, [conversationId], fromSeq, toSeq - 1)),
    );
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    return this.transaction("readonly", async (tx) => {
      const store = tx.objectStore("changes");
      const first = (await store.getKey(sessionRange(sessionId))) as KeyPart[] | undefined;
      const changes = await readRows(
        tx,
        "changes",
        numberRange(sessionId, [], afterVersion + 1, Number.POSITIVE_INFINITY),
        limit,
      );
      const meta = await tx.objectStore(SESSIONS).get(sessionId);
      const oldestRetained = first ? Number(first[1]) : (rawNumber(meta, "version") ?? 0) + 1;
      return { changes, oldestRetained };
    });
  }

  async readDocumentRows(sessionId: string, documentId: string, fromVersion: number, toVersion: number) {
    return this.transaction("readonly", (tx) =>
      readRows(tx, "documentRows", numberRange(sessionId, [documentId], fromVersion, toVersion)),
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
    return this.transaction("readonly", (tx) => body(reader(tx, sessionId)));
  }

  async close(): Promise<void> {
    this.closedReason ??= "closed by its owner";
    const database = this.database;
    this.database = undefined;
    if (database) (await database.catch(() => undefined))?.close();
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
    const request = factory.open(this.name, DB_VERSION);
    request.onupgradeneeded = () => {
      const db = request.result;
      for (const store of ALL_STORES) if (!db.objectStoreNames.contains(store)) db.createObjectStore(store);
    };
    const db = (await wrap(request)) as Db;
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

  private async transaction<T>(mode: "readonly" | "readwrite", body: (tx: Tx) => Promise<T>): Promise<T> {
    const db = await this.connect();
    let tx: Tx;
    try {
      tx = db.transaction(ALL_STORES, mode, { durability: this.durability }) as unknown as Tx;
    } catch (error) {
      this.database = undefined;
      throw toStorageError(error, `cannot start an IndexedDB transaction on "${this.name}"`);
    }
    try {
      const [result] = await Promise.all([body(tx), tx.done]);
      return result;
    } catch (error) {
      try {
        tx.abort();
      } catch {
        // Already finished or aborted by the browser; `tx.done` below reports why.
      }
      // Wait for the abort to settle; the error that caused it is the one worth reporting.
      await tx.done.catch(() => undefined);
      throw toStorageError(error, "IndexedDB transaction failed");
    }
  }
}

/** The rows of one session inside one transaction. */
function reader(tx: Tx, sessionId: string): SessionRowReader {
  return {
    all: (table) => readRows(tx, table, sessionRange(sessionId)),
    // An empty range (a tail of no entries) reads nothing: IndexedDB refuses a lower bound above the upper.
    range: async (table, id, from, to) =>
      from > to ? [] : readRows(tx, table, numberRange(sessionId, [id], from, to)),
    get: async (table, key) => {
      const value: unknown = await tx.objectStore(table).get([sessionId, ...key]);
      return value === undefined ? undefined : { key: recordName(table, key), value };
    },
    latest: async (table, before, limit) => {
      const rows: StoredRecord[] = [];
      const range = IDBKeyRange.bound(
        [sessionId, Number.NEGATIVE_INFINITY],
        [sessionId, before],
        false,
        true,
      );
      let cursor = await tx.objectStore(table).openCursor(range, "prev");
      while (cursor && rows.length < limit) {
        rows.push({ key: recordName(table, (cursor.key as KeyPart[]).slice(1)), value: cursor.value });
        cursor = await cursor.continue();
      }
      return rows;
    },
    earliest: (table, limit) => readRows(tx, table, sessionRange(sessionId), limit),
    count: (table) => tx.objectStore(table).count(sessionRange(sessionId)),
  };
}

async function readRows(tx: Tx, table: Table, range: IDBKeyRange, limit?: number): Promise<StoredRecord[]> {
  const store = tx.objectStore(table);
  const [keys, values] = await Promise.all([store.getAllKeys(range, limit), store.getAll(range, limit)]);
  return values.map((value, i) => ({ key: recordName(table, (keys[i] as KeyPart[]).slice(1)), value }));
}

function toStorageError(error: unknown, context: string): KernelError {
  if (error instanceof KernelError) return error;
  const err = ensureError(error);
  if (err.name === "QuotaExceededError") {
    return new StorageError("quota-exceeded", `${context}: storage quota exceeded`, { cause: err });
  }
  if (err.name === "InvalidStateError") {
    return new StorageError("storage-closed", `${context}: the connection is closing (${err.message})`, {
      cause: err,
    });
  }
  return new StorageError("storage-failed", `${context}: ${err.name}: ${err.message}`, { cause: err });
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
