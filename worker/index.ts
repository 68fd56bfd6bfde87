/**
 * durable-agent/worker: the browser host. A session host per tab with one writer across tabs (Web Locks),
 * live follower views (BroadcastChannel), a durable inbox for followers' inputs, the IndexedDB store and
 * persistent-storage helpers, and the comlink wrapper that runs it all in a dedicated Web Worker.
 */
export type { IndexedDbStorageOptions } from "../src/storage/indexeddb-storage.ts";
export { IndexedDbStorage, indexedDbStorage } from "../src/storage/indexeddb-storage.ts";
export type { SessionWorkerClient } from "./client.ts";
export { connectSessionWorker } from "./client.ts";
export { exposeSessionWorker } from "./expose.ts";
export type { BrowserSessionHostOptions } from "./host-options.ts";
export { DurableInbox } from "./inbox.ts";
export type { Leadership, LeadershipOptions } from "./leadership.ts";
export { requestLeadership } from "./leadership.ts";
export type { PersistenceReport } from "./persistent-storage.ts";
export { requestPersistentStorage } from "./persistent-storage.ts";
export type { SessionWorkerApi } from "./protocol.ts";
export { installErrorTransfer } from "./protocol.ts";
export { BrowserSessionHost } from "./session-host.ts";
