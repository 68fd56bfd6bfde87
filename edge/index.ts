/**
 * durable-agent/edge: the Durable Object host. Today: the DO SQLite store (one `transactionSync` per
 * commit group); the Hono app and the per-session Durable Object build on it.
 */
export type { DurableObjectSqliteStorageOptions, DurableObjectStorageLike } from "./do-sqlite-storage.ts";
export { DurableObjectSqliteStorage } from "./do-sqlite-storage.ts";
