/**
 * Raw IndexedDB requests as promises, reading no IndexedDB global: the factory and its key ranges may come
 * from the caller (fake-indexeddb in Node without `fake-indexeddb/auto`, another realm's implementation).
 * `idb` cannot do that — its `wrap` tests every value with `instanceof IDBRequest` (and the other
 * interfaces) against the globals — and the store uses only a handful of requests, so they are wrapped here.
 */
import { ensureError, KernelError, StorageError } from "../errors.ts";
import { entriesOfRows } from "./entry-runs.ts";
import type { KeyPart, RowWrite, Table } from "./rows.ts";
import { checkCreate, recordName } from "./rows.ts";
import type { StoredRecord } from "./storage.ts";
import type { SessionRowReader } from "./working-set.ts";

/** The request's result once it succeeds; its error (the transaction then aborts) if it fails. */
export function requested<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** Resolves when the transaction commits; rejects with why it aborted. */
export function finished(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new Error("the IndexedDB transaction was aborted"));
  });
}

/** Walks a cursor request, handing each position to `take`, for at most `limit` positions. */
export function walkCursor(
  request: IDBRequest<IDBCursorWithValue | null>,
  limit: number,
  take: (cursor: IDBCursorWithValue) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let taken = 0;
    request.onsuccess = () => {
      const cursor = request.result;
      if (!cursor || taken >= limit) return resolve();
      take(cursor);
      taken += 1;
      if (taken >= limit) resolve();
      else cursor.continue();
    };
    request.onerror = () => reject(request.error);
  });
}

/**
 * Opens a database (creating the object stores it lacks), from the given implementation or the globals, and
 * the key ranges of that implementation.
 */
export async function openStores(
  implementation: { readonly factory?: IDBFactory; readonly keyRange?: typeof IDBKeyRange },
  name: string,
  version: number,
  stores: readonly string[],
): Promise<{ db: IDBDatabase; ranges: SessionRanges }> {
  const factory = implementation.factory ?? globalThis.indexedDB;
  if (!factory) throw new StorageError("storage-failed", "IndexedDB is not available in this environment");
  const keyRange = implementation.keyRange ?? globalThis.IDBKeyRange;
  if (!keyRange) {
    throw new StorageError(
      "storage-failed",
      "IndexedDB key ranges are not available in this environment: pass `keyRange` (the IDBKeyRange of the implementation `factory` comes from)",
    );
  }
  const request = factory.open(name, version);
  request.onupgradeneeded = () => {
    const db = request.result;
    for (const store of stores) if (!db.objectStoreNames.contains(store)) db.createObjectStore(store);
  };
  return { db: await requested(request), ranges: new SessionRanges(keyRange) };
}

/** Key ranges of one session's rows (every key starts with the session id), from a given `IDBKeyRange`. */
export class SessionRanges {
  constructor(private readonly keyRange: typeof IDBKeyRange) {}

  /** Every key of the session that starts with `prefix`. */
  all(sessionId: string, ...prefix: KeyPart[]): IDBKeyRange {
    return this.keyRange.bound([sessionId, ...prefix], [sessionId, ...prefix, []]);
  }

  /** Keys `[sessionId, ...prefix, n]` with `from` ≤ n ≤ `to`. */
  numbers(sessionId: string, prefix: readonly KeyPart[], from: number, to: number): IDBKeyRange {
    return this.keyRange.bound([sessionId, ...prefix, from], [sessionId, ...prefix, to]);
  }

  /** Keys `[sessionId, …]` below `[sessionId, ...parts]`. */
  beforeKey(sessionId: string, parts: readonly KeyPart[]): IDBKeyRange {
    return this.keyRange.bound([sessionId, Number.NEGATIVE_INFINITY], [sessionId, ...parts], false, true);
  }

  /** Keys `[sessionId, n, …]` with n below `before`. */
  below(sessionId: string, before: number): IDBKeyRange {
    return this.keyRange.bound([sessionId, Number.NEGATIVE_INFINITY], [sessionId, before], false, true);
  }
}

/** Entries `from` ≤ seq ≤ `to` of one conversation, each its own record (see `entry-runs.ts`). */
export async function readEntries(
  tx: IDBTransaction,
  keys: SessionRanges,
  sessionId: string,
  conversation: string,
  from: number,
  to: number,
): Promise<StoredRecord[]> {
  if (from > to) return [];
  const floor: StoredRecord[] = [];
  const atOrBelow = keys.numbers(sessionId, [conversation], Number.NEGATIVE_INFINITY, from);
  const [, after] = await Promise.all([
    walkCursor(tx.objectStore("entries").openCursor(atOrBelow, "prev"), 1, ({ key, value }) => {
      floor.push({ key: recordName("entries", (key as KeyPart[]).slice(1)), value });
    }),
    from < to ? readRows(tx, "entries", keys.numbers(sessionId, [conversation], from + 1, to)) : [],
  ]);
  return entriesOfRows([...floor, ...after], conversation, from, to);
}

/** The rows of one session inside one transaction. */
export function reader(tx: IDBTransaction, keys: SessionRanges, sessionId: string): SessionRowReader {
  return {
    all: (table) => readRows(tx, table, keys.all(sessionId)),
    // An empty range (a tail of no entries) reads nothing: IndexedDB refuses a lower bound above the upper.
    range: async (table, id, from, to) => {
      if (from > to) return [];
      if (table !== "entries") return readRows(tx, table, keys.numbers(sessionId, [id], from, to));
      return readEntries(tx, keys, sessionId, id, from, to);
    },
    get: async (table, key) => {
      const value: unknown = await requested(tx.objectStore(table).get([sessionId, ...key]));
      return value === undefined ? undefined : { key: recordName(table, key), value };
    },
    latest: async (table, before, limit) => {
      const rows: StoredRecord[] = [];
      const cursor = tx.objectStore(table).openCursor(keys.below(sessionId, before), "prev");
      await walkCursor(cursor, limit, ({ key, value }) => {
        rows.push({ key: recordName(table, (key as KeyPart[]).slice(1)), value });
      });
      return rows;
    },
    parkedBefore: async (before, limit) => {
      const rows: StoredRecord[] = [];
      const range = before ? keys.beforeKey(sessionId, [before.version, before.id]) : keys.all(sessionId);
      await walkCursor(tx.objectStore("parked").openCursor(range, "prev"), limit, ({ key, value }) => {
        rows.push({ key: recordName("parked", (key as KeyPart[]).slice(1)), value });
      });
      return rows;
    },
    earliest: (table, limit) => readRows(tx, table, keys.all(sessionId), limit),
    count: (table) => requested(tx.objectStore(table).count(keys.all(sessionId))),
  };
}

export async function readRows(
  tx: IDBTransaction,
  table: Table,
  range: IDBKeyRange,
  limit?: number,
): Promise<StoredRecord[]> {
  const store = tx.objectStore(table);
  const [keys, values] = await Promise.all([
    requested(store.getAllKeys(range, limit)),
    requested(store.getAll(range, limit)),
  ]);
  return values.map((value, i) => ({ key: recordName(table, (keys[i] as KeyPart[]).slice(1)), value }));
}

/** The typed duplicate refusal for an `add` that failed on an existing key; undefined for any other failure. */
export function refusalOf(error: unknown, row: RowWrite, version: number): KernelError | undefined {
  if ((error as { name?: unknown } | null)?.name !== "ConstraintError") return undefined;
  try {
    checkCreate(row, true, version);
  } catch (refusal) {
    if (refusal instanceof KernelError) return refusal;
  }
  return undefined;
}

export function toStorageError(error: unknown, context: string): KernelError {
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
