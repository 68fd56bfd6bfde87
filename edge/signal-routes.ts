/**
 * The router's routes of waits on the outside world (DESIGN §4): the pending waits, a signal for a key, the
 * early signals kept and their drop, a key's callback URL, and the callback itself — where the URL is the
 * credential, so it resolves that one key of that one session and reveals nothing else.
 */
import type { Context, Env, Hono } from "hono";
import { z } from "zod";
import { JsonSchema } from "../src/index.ts";
import type { EdgeAction, Principal } from "./auth.ts";
import { callbackRequestId, signalCallbackPath, verifySignalCallback } from "./hooks.ts";
import { parse, readJson, readJsonText, strictParam } from "./http.ts";
import { type RateLimit, tooManyRequests } from "./limits.ts";
import { problemResponse } from "./problem.ts";
import {
  CountSchema,
  IdSchema,
  type InternalRoute,
  RequestIdSchema,
  SignalBodySchema,
  SignalKeySchema,
} from "./protocol.ts";

type Guard<C> = (c: C, action: EdgeAction) => Promise<{ principal: Principal; sessionId: string } | Response>;
type Forward<C> = (c: C, route: InternalRoute, body?: unknown) => Promise<Response>;

export interface SignalRouteOptions<E extends Env> {
  /** The router's page query (`before`, `limit`), which the pending and early-signal pages extend. */
  readonly PageQuery: z.ZodObject<{ before: z.ZodOptional<typeof CountSchema>; limit: z.ZodType<number> }>;
  readonly callbackSecret: (env: E["Bindings"]) => string | undefined;
  readonly rateLimit: RateLimit<E["Bindings"]> | undefined;
}

export function mountSignalRoutes<E extends Env>(
  app: Hono<E>,
  guard: Guard<Context<E>>,
  forward: Forward<Context<E>>,
  options: SignalRouteOptions<E>,
): void {
  const { callbackSecret, rateLimit } = options;
  // A page of parked waits goes on from the `next` of the previous one (`<version>/<id>`).
  const PendingQuery = options.PageQuery.extend({
    before: z
      .string()
      .max(600)
      .regex(/^\d+\/[\s\S]+$/, "must be the next of an earlier page")
      .refine((before) => Number.isSafeInteger(Number(before.slice(0, before.indexOf("/")))), {
        message: "must be the next of an earlier page",
      })
      .optional(),
    // Only keys that start with it (`run-on:` for an executor: those waits are never parked).
    prefix: SignalKeySchema.optional(),
  });

  // A page of early signals goes on after the version of the last one listed.
  const EarlyQuery = options.PageQuery.extend({ after: CountSchema.optional() }).omit({ before: true });

  app.get("/sessions/:id/pending", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const page = parse("query", PendingQuery, {
      before: c.req.query("before"),
      limit: c.req.query("limit"),
      prefix: c.req.query("prefix"),
    });
    if (page instanceof Response) return page;
    return forward(c, { op: "pending", sessionId: g.sessionId, ...page });
  });

  app.post("/sessions/:id/signals/:key", async (c) => {
    const g = await guard(c, "signal");
    if (g instanceof Response) return g;
    const key = strictParam(c.req.raw, 1, "params.key", SignalKeySchema);
    if (key instanceof Response) return key;
    const body = await readJson(c.req.raw, false);
    if (body instanceof Response) return body;
    const input = parse("body", SignalBodySchema, body);
    if (input instanceof Response) return input;
    return forward(c, { op: "signal", sessionId: g.sessionId, key }, input);
  });

  app.get("/sessions/:id/early-signals", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    const page = parse("query", EarlyQuery, { after: c.req.query("after"), limit: c.req.query("limit") });
    if (page instanceof Response) return page;
    return forward(c, { op: "early-signals", sessionId: g.sessionId, ...page });
  });

  app.delete("/sessions/:id/signals/:key", async (c) => {
    const g = await guard(c, "drop-signal");
    if (g instanceof Response) return g;
    const key = strictParam(c.req.raw, 1, "params.key", SignalKeySchema);
    if (key instanceof Response) return key;
    return forward(c, { op: "drop-signal", sessionId: g.sessionId, key });
  });

  app.post("/sessions/:id/signals/:key/callback-url", async (c) => {
    const g = await guard(c, "signal");
    if (g instanceof Response) return g;
    const key = strictParam(c.req.raw, 2, "params.key", SignalKeySchema);
    if (key instanceof Response) return key;
    const secret = callbackSecret(c.env);
    if (!secret) return problemResponse(503, "unconfigured", "the server has no signal callback secret");
    return c.json({ key, path: await signalCallbackPath(secret, g.sessionId, key) });
  });

  // The URL is the credential: its mac must match this session and key, or nothing is revealed.
  app.post("/hooks/:id/:key/:mac", async (c) => {
    const secret = callbackSecret(c.env);
    const sessionId = parse("params.id", IdSchema, c.req.param("id"));
    const key = strictParam(c.req.raw, 2, "params.key", SignalKeySchema);
    if (!secret || sessionId instanceof Response || key instanceof Response) return noSuchHook();
    if (!(await verifySignalCallback(secret, sessionId, key, c.req.param("mac")))) return noSuchHook();
    const rate = await rateLimit?.({ id: `hook:${sessionId}` }, c.env);
    if (rate && !rate.ok) return tooManyRequests("too many callbacks for this session", rate.retryAfterMs);
    const body = await readJsonText(c.req.raw, false);
    if (body instanceof Response) return body;
    const payload = parse("body", JsonSchema, body.value);
    if (payload instanceof Response) return payload;
    const header = c.req.header("idempotency-key");
    const requestId =
      header === undefined
        ? await callbackRequestId(body.text)
        : parse("headers.idempotency-key", RequestIdSchema, header);
    if (requestId instanceof Response) return requestId;
    return forward(c, { op: "signal", sessionId, key }, { requestId, payload });
  });
}

/** A callback URL that is not one: the same answer whatever was wrong with it. */
function noSuchHook(): Response {
  return problemResponse(404, "not-found", "no such callback");
}
