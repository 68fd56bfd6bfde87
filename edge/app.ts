/**
 * The Worker's router: a Hono app that authorizes every request for the session and action it touches,
 * validates every body and query with zod, bounds body size, wait time, stream duration and each caller's
 * request rate, and hands each session's calls to its own Durable Object (by name, so one session always
 * lands on one object wherever it lives).
 *
 * | route | action | what |
 * |---|---|---|
 * | `GET /sessions?after=id&limit=n` | read (each) | the sessions this edge holds that the caller may read, in id order |
 * | `POST /sessions/:id/submissions?wait=ms` `{ requestId, conversationId, input }` | submit | 202 + the Submission (the same requestId returns the same one); with `wait`, 200 once it has ended within that time |
 * | `GET /sessions/:id/submissions/:sid?wait=ms` | read | the Submission, optionally waiting for it to end |
 * | `GET /sessions/:id/requests/:requestId` | read | the Submission accepted for a client's requestId |
 * | `POST /sessions/:id/submissions/:sid/cancel` `{ reason? }` | cancel | requests cancellation; the Submission |
 * | `GET /sessions/:id/view?atLeast=v&wait=ms` | read | the session's current view (`version` inside, ETag); `&entries=n&submissions=n&tasks=active` trim it for display |
 * | `GET /sessions/:id/conversations/:cid/entries?before=seq&limit=n` | read | a page of a conversation's entries |
 * | `GET /sessions/:id/recovery` | admin | what resume() would do to each unfinished task (no side effects) |
 * | `GET /sessions/:id/events?since=v` (or `Last-Event-ID`) | read | committed changes as Server-Sent Events |
 * | `POST /sessions/:id/stream-token` | read | a short-lived read-only token for `…/events?access_token=` |
 * | `GET /sessions/:id/pending` | read | what the session waits for from outside: `{ version, pending, parked, fromStorage, next }` (a bounded page of waiting tasks, newest first, in memory and parked alike — `fromStorage` of the keys read from storage, `?before=<next>&limit=` for more) |
 * | `POST /sessions/:id/signals/:key` `{ requestId, payload }` | signal | 201 + the receipt (200 for a repeat); 400 bad payload, 404 unknown key, 409 resolved differently or not awaited |
 * | `GET /sessions/:id/early-signals?after=<v>&limit=<n>` | read | `{ version, count, earlySignals, next }`: a page of the signals kept that no wait has taken yet, oldest first (`next`: the `after` of the next page, null at the end) |
 * | `DELETE /sessions/:id/signals/:key` | drop-signal | drops the early signal kept for the key: 200 + `{ dropped }`; 404 when none is kept |
 * | `POST /sessions/:id/signals/:key/callback-url` | signal | the key's callback URL for a third party |
 * | `POST /hooks/:id/:key/:mac` payload | (the URL is the credential) | resolves that one key, like `…/signals/:key` |
 * | `GET /sessions/:id/replica` | read | who writes the session: the edge, or a linked tab and its lease |
 * | `POST /sessions/:id/replica/claim` `{ holder, version, epoch }` | replicate | a tab claims the session: the epoch to write with and the edge's head (409 while another tab's lease stands) |
 * | `POST /sessions/:id/replica/push` `{ holder, epoch, commits }` | replicate | the leading tab's next commits; renews its lease; the version the edge holds (409 once fenced) |
 * | `POST /sessions/:id/replica/release` `{ holder, epoch, version }` | replicate | the tab hands the session to the edge, which takes over at once (204) |
 * | `GET /sessions/:id/replica/changes?after=v&limit=n` | replicate | the edge's commits after `v` (a returning tab catching up) |
 * | `GET /sessions/:id/replica/snapshot` | replicate | the session whole at the edge's version (a copy the change log no longer reaches) |
 *
 * Errors are `application/problem+json` with a stable `code` and the request's `requestId` (also the
 * `x-request-id` header); only descriptions of the caller's own mistake are returned, anything else is
 * logged under that id.
 *
 * @example
 * export default createEdgeApp<Env>(); // env.SESSIONS: the session objects, env.API_TOKEN: the root token
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { cors } from "hono/cors";
import { z } from "zod";
import {
  type Authorize,
  bearerOf,
  type EdgeAction,
  mintStreamToken,
  type Principal,
  rootToken,
  unauthorized,
  verifyStreamToken,
} from "./auth.ts";
import { CREATED_HEADER } from "./directory.ts";
import { parse, readJson, strictParam, withRequestId } from "./http.ts";
import { memoryRateLimit, type RateLimit, tooManyRequests } from "./limits.ts";
import { problemFromError, problemResponse } from "./problem.ts";
import {
  CancelBodySchema,
  CountSchema,
  DocumentIdSchema,
  IdSchema,
  type InternalRoute,
  RequestIdSchema,
  type SessionStub,
  SubmitBodySchema,
  streamRequest,
  TasksFilterSchema,
} from "./protocol.ts";
import { mountReplicaRoutes } from "./replica-routes.ts";
import { directoryOf, mountSessionList, noteSession, type SessionListOptions } from "./session-list.ts";
import { mountSignalRoutes } from "./signal-routes.ts";

/**
 * The parts of a `DurableObjectNamespace` binding the router uses: its stubs' RPC method `route` (`Stub`
 * names another object's stub, for an app's own namespaces).
 */
export interface DurableObjectNamespaceLike<Stub = SessionStub> {
  idFromName(name: string): unknown;
  get(id: unknown): Stub;
}

export interface EdgeAppOptions<Env> {
  /** The session objects (default: the `SESSIONS` binding). */
  readonly sessions?: (env: Env) => DurableObjectNamespaceLike;
  /**
   * Who may do what to which session (default: the root token, `env.API_TOKEN`, which may do anything).
   * See `jwtAuthorizer` for per-user, per-session tokens.
   */
  readonly authorize?: Authorize<Env>;
  /** The root token when `authorize` is not given (default: the `API_TOKEN` secret). */
  readonly token?: (env: Env) => string | undefined;
  /** Each principal's request rate (default 600 a minute, per isolate); `false` turns it off. */
  readonly rateLimit?: RateLimit<Env> | false;
  /** Signs stream tokens (default `env.STREAM_TOKEN_SECRET`, else `env.API_TOKEN`). */
  readonly streamTokenSecret?: (env: Env) => string | undefined;
  /** How long a stream token may be used to (re)connect (default 5 min). */
  readonly streamTokenTtlMs?: number;
  /** Largest accepted request body in bytes (default 64 KiB). */
  readonly maxBodyBytes?: number;
  /** Largest accepted replica push in bytes (default 4 MiB: one commit may carry a large document). */
  readonly maxPushBytes?: number;
  /** Longest `?wait=` a client may ask for (default 25 s). */
  readonly maxWaitMs?: number;
  /** How long one event stream stays open before the client must reconnect (default 5 min). */
  readonly maxStreamMs?: number;
  /** Signs signal callback URLs (default `env.SIGNAL_CALLBACK_SECRET`); without one, callbacks are off. */
  readonly callbackSecret?: (env: Env) => string | undefined;
  /** Browser origins allowed to call the API (the devtools page, a web app); default none. */
  readonly corsOrigins?: (env: Env) => readonly string[] | undefined;
  /** Where errors that are not the caller's are logged (default `console.error`), with the request id. */
  readonly log?: (requestId: string, error: Error) => void;
}

type AppEnv<Env> = { Bindings: Env; Variables: { requestId: string } };

/** A request that passed its guard: who it acts for, on which session. */
interface Guarded {
  readonly principal: Principal;
  readonly sessionId: string;
}

/** Entries per page of `GET …/conversations/:cid/entries`: by default, and at most. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 500;

/** Creates the router. Routes mounted on the returned app later are not authorized by it: guard them too. */
export function createEdgeApp<Env extends object>(options: EdgeAppOptions<Env> = {}): Hono<AppEnv<Env>> {
  const sessions =
    options.sessions ?? ((env: Env) => (env as { SESSIONS: DurableObjectNamespaceLike }).SESSIONS);
  const authorize =
    options.authorize ??
    rootToken(options.token ?? ((env: Env) => (env as { API_TOKEN?: string }).API_TOKEN));
  const rateLimit =
    options.rateLimit === false
      ? undefined
      : (options.rateLimit ?? memoryRateLimit({ requests: 600, perMs: 60_000 }));
  const streamSecret =
    options.streamTokenSecret ??
    ((env: Env) => {
      const vars = env as { STREAM_TOKEN_SECRET?: string; API_TOKEN?: string };
      return vars.STREAM_TOKEN_SECRET ?? vars.API_TOKEN;
    });
  const streamTtlMs = options.streamTokenTtlMs ?? 300_000;
  const callbackSecret =
    options.callbackSecret ??
    ((env: Env) => (env as { SIGNAL_CALLBACK_SECRET?: string }).SIGNAL_CALLBACK_SECRET);
  const maxBodyBytes = options.maxBodyBytes ?? 64 * 1024;
  const maxPushBytes = options.maxPushBytes ?? 4 * 1024 * 1024;
  const maxWaitMs = options.maxWaitMs ?? 25_000;
  const maxStreamMs = options.maxStreamMs ?? 300_000;
  const log = options.log ?? ((requestId, error) => console.error(`durable-agent [${requestId}]:`, error));
  const Wait = CountSchema.pipe(z.number().max(maxWaitMs, `must be at most ${maxWaitMs}`));
  /** The `?wait=` of a request (0 when absent), or a 400 problem naming `query.wait`. */
  const waitQuery = (c: Context<AppEnv<Env>>) => parse("query.wait", Wait, c.req.query("wait") ?? "0");
  const ViewQuery = z.object({
    entries: CountSchema.optional(),
    submissions: CountSchema.optional(),
    tasks: TasksFilterSchema.optional(),
    documents: CountSchema.optional(),
    documentsAfter: DocumentIdSchema.optional(),
  });
  const PageQuery = z.object({
    before: CountSchema.optional(),
    limit: CountSchema.pipe(z.number().min(1).max(MAX_PAGE, `must be at most ${MAX_PAGE}`))
      .optional()
      .transform((limit) => limit ?? DEFAULT_PAGE),
  });

  const app = new Hono<AppEnv<Env>>();
  // Every answer names its request; problems carry the id in the body too, so a user can quote it.
  app.use("*", async (c, next) => {
    const requestId = crypto.randomUUID();
    c.set("requestId", requestId);
    await next();
    c.res = await withRequestId(c.res, requestId);
  });
  const corsOrigins = options.corsOrigins;
  if (corsOrigins) {
    // Before authorization: a preflight carries no token, and answering it reveals nothing.
    app.use(
      "*",
      cors({
        origin: (origin, c) => (corsOrigins(c.env)?.includes(origin) ? origin : null),
        allowHeaders: ["authorization", "content-type", "last-event-id"],
        allowMethods: ["GET", "POST", "DELETE"],
        exposeHeaders: ["etag", "x-request-id", "retry-after"],
        maxAge: 600,
      }),
    );
  }
  const limitBody = (maxSize: number) =>
    bodyLimit({
      maxSize,
      onError: () => problemResponse(413, "body-too-large", `the body is larger than ${maxSize} bytes`),
    });
  const bodyBound = limitBody(maxBodyBytes);
  const pushBound = limitBody(maxPushBytes);
  // A body without a length is read here to count it: a push's larger bound only once its caller is
  // authorized (in `guard`), so a stranger never has up to 4 MiB read and held for each request.
  const isPush = (c: Context<AppEnv<Env>>) => c.req.path.endsWith("/replica/push");
  app.use("*", (c, next) => (isPush(c) ? next() : bodyBound(c, next)));

  /**
   * Authorizes the request for `action` on its session (`params.id`, parsed exactly as it is routed), then
   * counts it against its principal's rate. Every route calls it first: nothing reaches a session object
   * before it passed.
   */
  const guard = async (
    c: Context<AppEnv<Env>>,
    action: EdgeAction,
    allowStreamToken = false,
  ): Promise<Guarded | Response> => {
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    if (sessionId instanceof Response) return sessionId;
    const bearer = bearerOf(c.req.header("authorization"));
    if (bearer instanceof Response) return bearer;
    const streamToken = allowStreamToken ? c.req.query("access_token") : undefined;
    let principal: Principal | Response;
    if (bearer === undefined && streamToken !== undefined) {
      const secret = streamSecret(c.env);
      const verified = secret ? await verifyStreamToken(secret, streamToken, sessionId) : undefined;
      principal = verified ?? unauthorized("invalid or expired stream token");
    } else {
      principal = await authorize({ sessionId, action, token: bearer, request: c.req.raw, env: c.env });
    }
    if (principal instanceof Response) return principal;
    const rate = await rateLimit?.(principal, c.env);
    if (rate && !rate.ok) return tooManyRequests("too many requests from this caller", rate.retryAfterMs);
    const tooLarge = isPush(c) ? await pushBound(c, async () => undefined) : undefined;
    if (tooLarge) return tooLarge;
    return { principal, sessionId };
  };

  const listing: SessionListOptions<Env> = {
    directory: (env) => directoryOf(sessions(env)),
    authorize,
    rateLimit,
    log,
  };
  mountSessionList(app as unknown as Hono, listing);

  const forward = async (c: Context<AppEnv<Env>>, route: InternalRoute, body?: unknown) => {
    const namespace = sessions(c.env);
    const stub = namespace.get(namespace.idFromName(route.sessionId));
    if (route.op === "events") return stub.fetch(streamRequest(route, c.get("requestId")));
    const response = await stub.route(route, body, c.get("requestId"));
    // A session this call created (a first submission, a tab's claim) is listed from now on.
    const created = response.headers.has(CREATED_HEADER);
    if (response.ok && (created || route.op === "replica-claim")) noteSession(c, listing, route.sessionId);
    if (!created) return response;
    const answer = new Response(response.body, response);
    answer.headers.delete(CREATED_HEADER);
    return answer;
  };

  app.post("/sessions/:id/submissions", async (c) => {
    const g = await guard(c, "submit");
    if (g instanceof Response) return g;
    const body = await readJson(c.req.raw, false);
    if (body instanceof Response) return body;
    const input = parse("body", SubmitBodySchema, body);
    if (input instanceof Response) return input;
    const waitMs = waitQuery(c);
    if (waitMs instanceof Response) return waitMs;
    return forward(c, { op: "submit", sessionId: g.sessionId, waitMs }, input);
  });

  // Submissions newest first, a page at a time (`before`: the `next` of the previous page), from storage.
  app.get("/sessions/:id/submissions", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const page = parse("query", PageQuery, { before: c.req.query("before"), limit: c.req.query("limit") });
    if (page instanceof Response) return page;
    return forward(c, { op: "submissions", sessionId: g.sessionId, ...page });
  });

  // Every task of the tree under `?root=` as storage holds it (also a tree that left the working set).
  app.get("/sessions/:id/tree", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const root = parse("query.root", DocumentIdSchema, c.req.query("root"));
    if (root instanceof Response) return root;
    return forward(c, { op: "tree", sessionId: g.sessionId, root });
  });

  app.get("/sessions/:id/submissions/:sid", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const submissionId = parse("params.sid", IdSchema, c.req.param("sid"));
    if (submissionId instanceof Response) return submissionId;
    const waitMs = waitQuery(c);
    if (waitMs instanceof Response) return waitMs;
    return forward(c, { op: "submission", sessionId: g.sessionId, submissionId, waitMs });
  });

  app.get("/sessions/:id/requests/:rid", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const requestId = strictParam(c.req.raw, 1, "params.rid", RequestIdSchema);
    if (requestId instanceof Response) return requestId;
    return forward(c, { op: "request", sessionId: g.sessionId, requestId });
  });

  app.post("/sessions/:id/submissions/:sid/cancel", async (c) => {
    const g = await guard(c, "cancel");
    if (g instanceof Response) return g;
    const submissionId = parse("params.sid", IdSchema, c.req.param("sid"));
    if (submissionId instanceof Response) return submissionId;
    const body = await readJson(c.req.raw, true);
    if (body instanceof Response) return body;
    const input = parse("body", CancelBodySchema, body ?? {});
    if (input instanceof Response) return input;
    return forward(c, { op: "cancel", sessionId: g.sessionId, submissionId }, input);
  });

  app.get("/sessions/:id/view", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const atLeast = parse("query.atLeast", CountSchema, c.req.query("atLeast") ?? "0");
    if (atLeast instanceof Response) return atLeast;
    const waitMs = waitQuery(c);
    if (waitMs instanceof Response) return waitMs;
    const trim = parse("query", ViewQuery, {
      entries: c.req.query("entries"),
      submissions: c.req.query("submissions"),
      tasks: c.req.query("tasks"),
      documents: c.req.query("documents"),
      documentsAfter: c.req.query("documentsAfter"),
    });
    if (trim instanceof Response) return trim;
    return forward(c, { op: "view", sessionId: g.sessionId, atLeast, waitMs, ...trim });
  });

  app.get("/sessions/:id/conversations/:cid/entries", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const conversationId = parse("params.cid", IdSchema, c.req.param("cid"));
    if (conversationId instanceof Response) return conversationId;
    const page = parse("query", PageQuery, { before: c.req.query("before"), limit: c.req.query("limit") });
    if (page instanceof Response) return page;
    return forward(c, { op: "entries", sessionId: g.sessionId, conversationId, ...page });
  });

  app.get("/sessions/:id/recovery", async (c) => {
    const g = await guard(c, "admin");
    if (g instanceof Response) return g;
    return forward(c, { op: "recovery", sessionId: g.sessionId });
  });

  app.get("/sessions/:id/events", async (c) => {
    const g = await guard(c, "read", true);
    if (g instanceof Response) return g;
    // A reconnecting EventSource sends the last id it saw; it wins over the `since` of the original URL.
    const lastEventId = c.req.header("last-event-id");
    const since =
      lastEventId !== undefined
        ? parse("headers.last-event-id", CountSchema, lastEventId)
        : parse("query.since", CountSchema, c.req.query("since") ?? "0");
    if (since instanceof Response) return since;
    const previews = parse("query.previews", z.enum(["0", "1"]).optional(), c.req.query("previews"));
    if (previews instanceof Response) return previews;
    return forward(c, {
      op: "events",
      sessionId: g.sessionId,
      since,
      ...(lastEventId !== undefined && { sinceFromHeader: true }),
      maxStreamMs,
      ...(previews === "1" && { previews: true }),
    });
  });

  app.post("/sessions/:id/stream-token", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const secret = streamSecret(c.env);
    if (!secret)
      return problemResponse(503, "unconfigured", "the server has no stream token secret configured");
    const sessionId = g.sessionId;
    const minted = await mintStreamToken(secret, g.principal, sessionId, streamTtlMs, Date.now());
    const url = `/sessions/${sessionId}/events?access_token=${encodeURIComponent(minted.token)}`;
    return c.json({ ...minted, url });
  });

  mountSignalRoutes(app, guard, forward, { PageQuery, callbackSecret, rateLimit });
  mountReplicaRoutes(app, guard, forward);

  app.notFound(() => problemResponse(404, "not-found", "no such route"));
  app.onError((error, c) => problemFromError(error, (e) => log(c.get("requestId") ?? "-", e)));
  return app;
}
