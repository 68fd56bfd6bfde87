/**
 * `GET /sessions?after=&limit=`: the sessions this edge holds that the caller may read, a page of the
 * directory at a time (see `directory.ts`), and the router's side of noting new sessions there.
 */
import type { Context, Hono } from "hono";
import { z } from "zod";
import { ensureError } from "../src/index.ts";
import { type Authorize, bearerOf, type Principal } from "./auth.ts";
import { DIRECTORY_NAME, type DirectoryStub } from "./directory.ts";
import { textDigest } from "./hooks.ts";
import { parse } from "./http.ts";
import { type RateLimit, tooManyRequests } from "./limits.ts";
import { CountSchema, IdSchema } from "./protocol.ts";

/** Sessions per page of `GET /sessions`: by default, and at most. */
const DEFAULT_LIST = 100;
const MAX_LIST = 500;

const ListQuery = z.object({
  after: IdSchema.optional(),
  limit: CountSchema.pipe(z.number().min(1).max(MAX_LIST, `must be at most ${MAX_LIST}`))
    .optional()
    .transform((limit) => limit ?? DEFAULT_LIST),
});

// biome-ignore lint/suspicious/noExplicitAny: any Hono env (the router's own)
type AnyContext = Context<any>;

export interface SessionListOptions<Env> {
  readonly directory: (env: Env) => DirectoryStub;
  readonly authorize: Authorize<Env>;
  readonly rateLimit: RateLimit<Env> | undefined;
  readonly log: (requestId: string, error: Error) => void;
}

/** The directory object of the sessions namespace. */
export function directoryOf(namespace: { idFromName(name: string): unknown; get(id: unknown): unknown }) {
  return namespace.get(namespace.idFromName(DIRECTORY_NAME)) as DirectoryStub;
}

/**
 * Notes a session the router saw created (its first accepted submission, a tab's first claim), after the
 * response: best effort, idempotent; a failure is logged, never the request's.
 */
export function noteSession<Env>(c: AnyContext, options: SessionListOptions<Env>, sessionId: string): void {
  const noting = options
    .directory(c.env as Env)
    .noteSession(sessionId, Date.now())
    .catch((error: unknown) => options.log(c.get("requestId") ?? "-", ensureError(error)));
  try {
    c.executionCtx.waitUntil(noting);
  } catch {
    // No execution context (a test calling the app directly): the note runs on its own.
  }
}

export function mountSessionList<Env>(app: Hono, options: SessionListOptions<Env>): void {
  app.get("/sessions", async (c) => {
    const token = bearerOf(c.req.header("authorization"));
    if (token instanceof Response) return token;
    const env = c.env as Env;
    const ask = (sessionId: string) =>
      options.authorize({ sessionId, action: "read", token, request: c.req.raw, env });
    // Who asks, before anything is read: a caller refused as no one (401) learns nothing; one refused only
    // for a session it does not hold (403) still gets the sessions it may read.
    const probe = await ask(DIRECTORY_NAME);
    if (probe instanceof Response && probe.status !== 403) return probe;
    // Counted before the directory is read and each of its sessions authorized (a page of up to 500). A caller
    // scoped to some sessions is no principal here yet: its bucket is its token's digest.
    if (options.rateLimit) {
      const principal: Principal =
        probe instanceof Response ? { id: `token:${await textDigest(token ?? "")}` } : probe;
      const rate = await options.rateLimit(principal, env);
      if (!rate.ok) return tooManyRequests("too many requests from this caller", rate.retryAfterMs);
    }
    const query = parse("query", ListQuery, c.req.query());
    if (query instanceof Response) return query;
    const page = await options.directory(env).listSessions(query.after, query.limit);
    const readable: { id: string; notedAt: number }[] = [];
    for (const session of page.sessions) {
      const granted = await ask(session.id);
      if (!(granted instanceof Response)) readable.push(session);
    }
    return c.json({ sessions: readable, next: page.next });
  });
}
