/**
 * The Worker's router: a Hono app that authenticates every request, validates every body and query with
 * zod, bounds body size, wait time and stream duration, and hands each session's calls to its own Durable
 * Object (by name, so one session always lands on one object wherever it lives).
 *
 * | route | what |
 * |---|---|
 * | `POST /sessions/:id/submissions?wait=ms` `{ requestId, conversationId, input }` | 202 + the Submission (the same requestId returns the same one); with `wait`, 200 once it has ended within that time |
 * | `GET /sessions/:id/submissions/:sid?wait=ms` | the Submission, optionally waiting for it to end |
 * | `POST /sessions/:id/submissions/:sid/cancel` `{ reason? }` | requests cancellation; the Submission |
 * | `GET /sessions/:id/view?atLeast=v&wait=ms` | the session's current view (`version` inside, ETag); `&entries=n&submissions=n&tasks=active` trim it for display |
 * | `GET /sessions/:id/conversations/:cid/entries?before=seq&limit=n` | a page of a conversation's entries, newest last; `next` is the `before` of the page before it |
 * | `GET /sessions/:id/recovery` | what resume() would do to each unfinished task (no side effects) |
 * | `GET /sessions/:id/events?since=v` (or `Last-Event-ID`) | committed changes as Server-Sent Events |
 *
 * Errors are `application/problem+json` naming the bad field. Unauthenticated requests get 401 before any
 * session is touched.
 *
 * @example
 * export default createEdgeApp<Env>(); // env.SESSIONS: the session objects, env.API_TOKEN: the bearer token
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { cors } from "hono/cors";
import { timingSafeEqual } from "hono/utils/buffer";
import { z } from "zod";
import { invalidInput, problemFromError, problemResponse } from "./problem.ts";
import {
  CancelBodySchema,
  CountSchema,
  IdSchema,
  type InternalRoute,
  internalRequest,
  SubmitBodySchema,
  TasksFilterSchema,
} from "./protocol.ts";

/** The parts of a `DurableObjectNamespace` binding the router uses. */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

export interface EdgeAppOptions<Env> {
  /** The session objects (default: the `SESSIONS` binding). */
  readonly sessions?: (env: Env) => DurableObjectNamespaceLike;
  /** The bearer token clients must send (default: the `API_TOKEN` secret). */
  readonly token?: (env: Env) => string | undefined;
  /** Largest accepted request body in bytes (default 64 KiB). */
  readonly maxBodyBytes?: number;
  /** Longest `?wait=` a client may ask for (default 25 s). */
  readonly maxWaitMs?: number;
  /** How long one event stream stays open before the client must reconnect (default 5 min). */
  readonly maxStreamMs?: number;
  /** Browser origins allowed to call the API (the devtools page, a web app); default none. */
  readonly corsOrigins?: (env: Env) => readonly string[] | undefined;
}

type AppEnv<Env> = { Bindings: Env };

/** Entries per page of `GET …/conversations/:cid/entries`: by default, and at most. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 500;

/** Creates the router. Mount more routes on the returned app if needed (they are authenticated too). */
export function createEdgeApp<Env extends object>(options: EdgeAppOptions<Env> = {}): Hono<AppEnv<Env>> {
  const sessions =
    options.sessions ?? ((env: Env) => (env as { SESSIONS: DurableObjectNamespaceLike }).SESSIONS);
  const token = options.token ?? ((env: Env) => (env as { API_TOKEN?: string }).API_TOKEN);
  const maxBodyBytes = options.maxBodyBytes ?? 64 * 1024;
  const maxWaitMs = options.maxWaitMs ?? 25_000;
  const maxStreamMs = options.maxStreamMs ?? 300_000;
  const Wait = CountSchema.pipe(z.number().max(maxWaitMs, `must be at most ${maxWaitMs}`));
  /** The `?wait=` of a request (0 when absent), or a 400 problem naming `query.wait`. */
  const waitQuery = (c: Context<AppEnv<Env>>) => parse("query.wait", Wait, c.req.query("wait") ?? "0");
  const ViewQuery = z.object({
    entries: CountSchema.optional(),
    submissions: CountSchema.optional(),
    tasks: TasksFilterSchema.optional(),
  });
  const PageQuery = z.object({
    before: CountSchema.optional(),
    limit: CountSchema.pipe(z.number().min(1).max(MAX_PAGE, `must be at most ${MAX_PAGE}`))
      .optional()
      .transform((limit) => limit ?? DEFAULT_PAGE),
  });

  const app = new Hono<AppEnv<Env>>();
  const corsOrigins = options.corsOrigins;
  if (corsOrigins) {
    // Before authentication: a preflight carries no token, and answering it reveals nothing.
    app.use(
      "*",
      cors({
        origin: (origin, c) => (corsOrigins(c.env)?.includes(origin) ? origin : null),
        allowHeaders: ["authorization", "content-type", "last-event-id"],
        allowMethods: ["GET", "POST"],
        exposeHeaders: ["etag"],
        maxAge: 600,
      }),
    );
  }
  app.use("*", async (c, next) => {
    const expected = token(c.env);
    if (!expected) return problemResponse(503, "unconfigured", "the server has no API token configured");
    const match = /^Bearer ([\x21-\x7e]+)$/.exec(c.req.header("authorization") ?? "");
    if (!match?.[1] || !(await timingSafeEqual(expected, match[1])))
      return problemResponse(401, "unauthorized", "missing or wrong bearer token", undefined, {
        "www-authenticate": 'Bearer realm="durable-agent"',
      });
    return next();
  });
  app.use(
    "*",
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => problemResponse(413, "body-too-large", `the body is larger than ${maxBodyBytes} bytes`),
    }),
  );

  const forward = (c: Context<AppEnv<Env>>, route: InternalRoute, body?: unknown) => {
    const namespace = sessions(c.env);
    return namespace.get(namespace.idFromName(route.sessionId)).fetch(internalRequest(route, body));
  };

  app.post("/sessions/:id/submissions", async (c) => {
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    if (sessionId instanceof Response) return sessionId;
    const body = await readJson(c.req.raw, false);
    if (body instanceof Response) return body;
    const input = parse("body", SubmitBodySchema, body);
    if (input instanceof Response) return input;
    const waitMs = waitQuery(c);
    if (waitMs instanceof Response) return waitMs;
    return forward(c, { op: "submit", sessionId, waitMs }, input);
  });

  app.get("/sessions/:id/submissions/:sid", async (c) => {
    const ids = parseIds(c);
    if (ids instanceof Response) return ids;
    const waitMs = waitQuery(c);
    if (waitMs instanceof Response) return waitMs;
    return forward(c, { op: "submission", ...ids, waitMs });
  });

  app.post("/sessions/:id/submissions/:sid/cancel", async (c) => {
    const ids = parseIds(c);
    if (ids instanceof Response) return ids;
    const body = await readJson(c.req.raw, true);
    if (body instanceof Response) return body;
    const input = parse("body", CancelBodySchema, body ?? {});
    if (input instanceof Response) return input;
    return forward(c, { op: "cancel", ...ids }, input);
  });

  app.get("/sessions/:id/view", async (c) => {
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    if (sessionId instanceof Response) return sessionId;
    const atLeast = parse("query.atLeast", CountSchema, c.req.query("atLeast") ?? "0");
    if (atLeast instanceof Response) return atLeast;
    const waitMs = waitQuery(c);
    if (waitMs instanceof Response) return waitMs;
    const trim = parse("query", ViewQuery, {
      entries: c.req.query("entries"),
      submissions: c.req.query("submissions"),
      tasks: c.req.query("tasks"),
    });
    if (trim instanceof Response) return trim;
    return forward(c, { op: "view", sessionId, atLeast, waitMs, ...trim });
  });

  app.get("/sessions/:id/conversations/:cid/entries", async (c) => {
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    if (sessionId instanceof Response) return sessionId;
    const conversationId = parse("params.cid", IdSchema, c.req.param("cid"));
    if (conversationId instanceof Response) return conversationId;
    const page = parse("query", PageQuery, { before: c.req.query("before"), limit: c.req.query("limit") });
    if (page instanceof Response) return page;
    return forward(c, { op: "entries", sessionId, conversationId, ...page });
  });

  app.get("/sessions/:id/recovery", async (c) => {
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    if (sessionId instanceof Response) return sessionId;
    return forward(c, { op: "recovery", sessionId });
  });

  app.get("/sessions/:id/events", async (c) => {
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    if (sessionId instanceof Response) return sessionId;
    // A reconnecting EventSource sends the last id it saw; it wins over the `since` of the original URL.
    const lastEventId = c.req.header("last-event-id");
    const since =
      lastEventId !== undefined
        ? parse("headers.last-event-id", CountSchema, lastEventId)
        : parse("query.since", CountSchema, c.req.query("since") ?? "0");
    if (since instanceof Response) return since;
    return forward(c, { op: "events", sessionId, since, maxStreamMs });
  });

  app.notFound(() => problemResponse(404, "not-found", "no such route"));
  app.onError((error) => problemFromError(error));
  return app;
}

/** The parsed value, or a 400 problem naming `part` and each bad field. */
function parse<T extends z.ZodType>(part: string, schema: T, value: unknown): z.output<T> | Response {
  const result = schema.safeParse(value);
  return result.success ? result.data : invalidInput(part, result.error);
}

function parseIds(c: Context): { sessionId: string; submissionId: string } | Response {
  const sessionId = parse("params.id", IdSchema, c.req.param("id"));
  if (sessionId instanceof Response) return sessionId;
  const submissionId = parse("params.sid", IdSchema, c.req.param("sid"));
  if (submissionId instanceof Response) return submissionId;
  return { sessionId, submissionId };
}

/** The JSON body; `optional` allows an empty one (undefined). Bad JSON or a non-JSON type → a problem. */
async function readJson(request: Request, optional: boolean): Promise<unknown> {
  const type = request.headers.get("content-type");
  if (type !== null && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(type))
    return problemResponse(415, "unsupported-media-type", `expected application/json, got ${type}`);
  const text = await request.text();
  if (text.trim() === "") {
    return optional
      ? undefined
      : problemResponse(400, "invalid-argument", "the body is empty; expected a JSON object", [
          { path: "body", message: "required" },
        ]);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    return problemResponse(
      400,
      "invalid-argument",
      `the body is not valid JSON: ${(error as Error).message}`,
      [{ path: "body", message: "malformed JSON" }],
    );
  }
}
