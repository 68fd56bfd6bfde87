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
}

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  404: "Not Found",
  409: "Conflict",
  410: "Gone",
  413: "Content Too Large",
  415: "Unsupported Media Type",
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
): Response {
  const body: Problem = {
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
      return 400;
    case "session-not-found":
      return 404;
    case "record-too-large":
      return 413;
    case "stale-owner":
      return 409;
    case "history-truncated":
      return 410;
    case "quota-exceeded":
      return 507;
    case "session-stopped":
    case "session-closed":
    case "storage-failed":
    case "storage-closed":
      return 503;
    default:
      return 500;
  }
}

/** Any thrown value as a problem response; unexpected errors say "internal" and keep their message out. */
export function problemFromError(error: unknown): Response {
  const err = ensureError(error);
  if (err instanceof KernelError) {
    const issues = err instanceof InvalidArgumentError ? err.issues : undefined;
    return problemResponse(statusOf(err.code), err.code, err.message, issues);
  }
  return problemResponse(500, "internal", "internal error");
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
