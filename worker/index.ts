/**
 * durable-agent/worker: the browser host. A session host per tab with one writer across tabs (Web Locks),
 * live follower views (BroadcastChannel), a durable inbox for followers' inputs, the IndexedDB store and
 * persistent-storage helpers. (The comlink Web Worker wrapper and the demo page are still to come.)
 */
export type { IndexedDbStorageOptions } from "../src/storage/indexeddb-storage.ts";
export { IndexedDbStorage, indexedDbStorage } from "../src/storage/indexeddb-storage.ts";
export { DurableInbox } from "./inbox.ts";
export type { Leadership, LeadershipOptions } from "./leadership.ts";
export { requestLeadership } from "./leadership.ts";
export type { PersistenceReport } from "./persistent-storage.ts";
export { requestPersistentStorage } from "./persistent-storage.ts";
export type { BrowserSessionHostOptions } from "./session-host.ts";
export { BrowserSessionHost } from "./session-host.ts";
