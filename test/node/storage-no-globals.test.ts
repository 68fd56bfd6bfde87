/**
 * The IndexedDB store with an injected implementation in a realm that has no IndexedDB globals at all (no
 * `fake-indexeddb/auto`): the whole storage contract runs on `indexedDbStorage(name, { factory, keyRange })`.
 */
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import { indexedDbStorage, StorageError } from "../../src/index.ts";
import { writeRawIndexedDbRow } from "../support/raw-indexeddb.ts";
import { describeStorageContract } from "../support/storage-contract.ts";

const INDEXEDDB_GLOBALS = [
  "indexedDB",
  "IDBFactory",
  "IDBRequest",
  "IDBOpenDBRequest",
  "IDBKeyRange",
  "IDBDatabase",
  "IDBTransaction",
  "IDBObjectStore",
  "IDBIndex",
  "IDBCursor",
  "IDBCursorWithValue",
  "IDBVersionChangeEvent",
];

const factory = new IDBFactory();

describe("a realm without IndexedDB globals", () => {
  it("has none of them (the contract below runs on the injected factory alone)", () => {
    expect(INDEXEDDB_GLOBALS.filter((name) => name in globalThis)).toEqual([]);
  });

  it("refuses to open without key ranges, naming the option to pass, and creates nothing", async () => {
    const storage = indexedDbStorage("no-key-range", { factory });
    const opening = storage.open("s", { mode: "write", at: 0, entryTail: 10, settled: 0 });
    await expect(opening).rejects.toBeInstanceOf(StorageError);
    await expect(opening).rejects.toThrow(/pass `keyRange`/);
    expect((await factory.databases()).map((d) => d.name)).not.toContain("no-key-range");
  });
});

describeStorageContract("IndexedDB (fake-indexeddb injected, no globals)", {
  storage: (options) => indexedDbStorage("contract", { ...options, factory, keyRange: IDBKeyRange }),
  corrupt: (sessionId, table, key, value) =>
    writeRawIndexedDbRow("contract", sessionId, table, key, value, factory),
});
