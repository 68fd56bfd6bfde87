/**
 * durable-agent/edge: the Durable Object host. One Durable Object per session (`defineSessionObject`)
 * over the DO SQLite store, alarms for wake-ups, and the Hono router (`createEdgeApp`) that exposes
 * sessions over HTTP + Server-Sent Events.
 */
export type { DurableObjectNamespaceLike, EdgeAppOptions } from "./app.ts";
export { createEdgeApp } from "./app.ts";
export type { Authorize, AuthorizeInput, EdgeAction, JwtAuthorizerOptions, Principal } from "./auth.ts";
export {
  anyOf,
  bearerToken,
  EDGE_ACTIONS,
  forbidden,
  jwtAuthorizer,
  matchesSession,
  mintStreamToken,
  rootToken,
  unauthorized,
  verifyStreamToken,
} from "./auth.ts";
export type { DurableObjectStorageLike } from "./do-sqlite-sql.ts";
export { DO_SQLITE_MAX_ROW_BYTES } from "./do-sqlite-sql.ts";
export type { DurableObjectSqliteStorageOptions } from "./do-sqlite-storage.ts";
export { DO_SQLITE_MAX_EXPORT_CHARS, DurableObjectSqliteStorage } from "./do-sqlite-storage.ts";
export type { MemoryRateLimitOptions, RateDecision, RateLimit, SessionLimits } from "./limits.ts";
export { DEFAULT_SESSION_LIMITS, memoryRateLimit } from "./limits.ts";
export type { Problem } from "./problem.ts";
export { problemResponse } from "./problem.ts";
export type { InternalRoute, SessionStub } from "./protocol.ts";
export { CancelBodySchema, IdSchema, SubmitBodySchema } from "./protocol.ts";
export type {
  DurableObjectBase,
  DurableObjectStateLike,
  SessionObject,
  SessionObjectClass,
  SessionObjectOptions,
} from "./session-object.ts";
export { defineSessionObject } from "./session-object.ts";
