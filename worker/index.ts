/**
 * durable-agent/worker: the browser host. Today: the IndexedDB store and persistent-storage helpers; the
 * Web Worker host (comlink, tab leadership) builds on them.
 */
export type { IndexedDbStorageOptions } from "../src/storage/indexeddb-storage.ts";
export { IndexedDbStorage, indexedDbStorage } from "../src/storage/indexeddb-storage.ts";
export type { PersistenceReport } from "./persistent-storage.ts";
export { requestPersistentStorage } from "./persistent-storage.ts";
