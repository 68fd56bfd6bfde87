/**
 * HTTP errors as `application/problem+json` (RFC 9457): `{ type, title, status, detail, code, errors? }`,
 * with `code` the kernel's stable error code and `errors` naming each bad field.
 */
import type { z } from "zod";
import { describeIssues, ensureError, InvalidArgumentError, KernelError } from "../src/index.ts";

/** One problem document. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  /** A kernel error code (`invalid-argument`, `session-not-found`, …) or an HTTP-level one (`unauthorized`). */
  readonly code: string;
  /** For invalid input: each bad field (`body.requestId`, `query.wait`, …) and what is wrong with it. */
  readonly errors?: readonly { path: string; message: string }[];
  /** The request's id (also the `x-request-id` header): what the server logged the details under. */
  readonly requestId?: string;
}

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  410: "Gone",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
  507: "Insufficient Storage",
};

/** A problem+json response. */
export function problemResponse(
  status: number,
  code: string,
  detail: string,
  errors?: readonly { path: string; message: string }[],
  headers: Record<string, string> = {},
  /** Fields of this kind of problem, beside the standard ones (a snapshot's size and bound). */
  fields: Record<string, number> = {},
): Response {
  const body: Problem = {
    ...fields,
    type: `https://durable-agent.dev/problems/${code}`,
    title: TITLES[status] ?? "Error",
    status,
    detail,
    code,
    ...(errors !== undefined && errors.length > 0 && { errors }),
  };
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/problem+json", ...headers },
  });
}

/** The status a kernel error code maps to. */
function statusOf(code: string): number {
  switch (code) {
    case "invalid-argument":
    case "invalid-record":
    case "refused-write":
      return 400;
    case "invalid-task-event":
      return 409;
    case "session-not-found":
    case "unknown-signal":
    case "wait-not-found":
      return 404;
    case "signal-conflict":
    case "signal-not-awaited":
    case "owned-elsewhere":
    case "replication-diverged":
    case "environment-mismatch":
    case "duplicate-request":
      return 409;
    case "record-too-large":
      return 413;
    case "stale-owner":
      return 409;
    case "history-truncated":
      return 410;
    case "quota-exceeded":
      return 507;
    case "early-signals-full":
      return 429;
    case "session-stopped":
    case "session-closed":
    case "storage-failed":
    case "storage-closed":
      return 503;
    default:
      return 500;
  }
}

/**
 * What a client is told for errors whose own message may carry internals (row names, storage or parser
 * text): a fixed sentence per code. The full error goes to the log, under the request's id.
 */
const PUBLIC_DETAIL: Record<string, string> = {
  "invalid-record": "the request holds data that cannot be stored",
  "record-too-large": "the request's data is too large to store",
  "duplicate-request":
    "this requestId was accepted before and that Submission cannot be returned (it may have been removed by retention); it is not run again",
  "stale-owner": "the session moved to another instance while the request ran; retry it",
  "storage-failed": "the session's storage failed; retry later",
  "storage-closed": "the session's storage is closed; retry later",
  "quota-exceeded": "the session's storage is full",
  "session-stopped": "the session stopped after a storage failure; retry later",
  "session-closed": "the session is closing; retry",
  "corrupt-record": "a stored record of the session failed to load",
  "blocked-record": "the request touches a record that failed to load",
  internal: "internal error",
};

/** Errors whose message is the kernel's own description of the caller's mistake: safe to return. */
const CALLER_ERRORS: ReadonlySet<string> = new Set([
  "invalid-argument",
  "session-not-found",
  "history-truncated",
  "invalid-task-event",
  "refused-write",
  "read-only",
  "unknown-signal",
  "signal-conflict",
  "signal-not-awaited",
  "wait-not-found",
  "early-signals-full",
  "owned-elsewhere",
  "replication-diverged",
  "environment-mismatch",
]);

/** Where errors a client is not shown go by default. */
const logError = (error: Error) => console.error("durable-agent:", error);

/**
 * Any thrown value as a problem response. Only messages that describe the caller's own mistake are
 * returned; anything else gets a fixed sentence for its code and is logged in full (`log`).
 */
export function problemFromError(error: unknown, log: (error: Error) => void = logError): Response {
  const shown = publicError(error, log);
  return problemResponse(statusOf(shown.code), shown.code, shown.message, shown.issues);
}

/**
 * What a client may see of an error (a problem response, an event stream's `error` event): its name and
 * code, and its message only when it describes the caller's own mistake; anything else gets a fixed
 * sentence for its code and is logged in full (`log`).
 */
export function publicError(
  error: unknown,
  log: (error: Error) => void = logError,
): { name: string; code: string; message: string; issues?: readonly { path: string; message: string }[] } {
  const err = ensureError(error);
  const code = err instanceof KernelError ? err.code : "internal";
  if (CALLER_ERRORS.has(code)) {
    const issues = err instanceof InvalidArgumentError ? err.issues : undefined;
    return { name: err.name, code, message: err.message, ...(issues && { issues }) };
  }
  log(err);
  return {
    name: err instanceof KernelError ? err.name : "Error",
    code,
    message: PUBLIC_DETAIL[code] ?? "internal error",
  };
}

/** A zod failure on one part of the request (`body`, `query`, `params`), naming every bad field. */
export function invalidInput(part: string, error: z.ZodError): Response {
  const errors = describeIssues(error).map((issue) => ({
    path: issue.path === "(root)" ? part : `${part}.${issue.path}`,
    message: issue.message,
  }));
  const detail = `invalid ${part}: ${errors
    .slice(0, 3)
    .map((e) => `${e.path}: ${e.message}`)
    .join("; ")}`;
  return problemResponse(400, "invalid-argument", detail, errors);
}
