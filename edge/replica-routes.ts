/**
 * The router's replica routes: a browser tab linked to its edge session claims it, pushes its commits,
 * hands it back and catches up (DESIGN §6). Every body is validated here and again in the session object;
 * the tab's holder name is scoped to the caller's principal, so one principal can never push as (or fence)
 * another principal's tab by guessing its name.
 */
import type { Context, Env, Hono } from "hono";
import { z } from "zod";
import {
  ClaimRequestSchema,
  MAX_PUSH_COMMITS,
  PushRequestSchema,
  ReleaseRequestSchema,
} from "../src/index.ts";
import type { EdgeAction, Principal } from "./auth.ts";
import { parse, readJson } from "./http.ts";
import { CountSchema, type InternalRoute } from "./protocol.ts";

type Guard<C> = (c: C, action: EdgeAction) => Promise<{ principal: Principal; sessionId: string } | Response>;
type Forward<C> = (c: C, route: InternalRoute, body?: unknown) => Promise<Response>;

/** A tab's own name for itself, before it is scoped to its principal. */
const ClientHolder = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_.:-]+$/, "letters, digits and _ . : - only");

const ClaimBody = ClaimRequestSchema.extend({ holder: ClientHolder }).strict();
const PushBody = PushRequestSchema.extend({ holder: ClientHolder }).strict();
const ReleaseBody = ReleaseRequestSchema.extend({ holder: ClientHolder }).strict();
const ChangesQuery = z.object({
  after: CountSchema,
  limit: CountSchema.pipe(z.number().min(1).max(MAX_PUSH_COMMITS)).optional(),
});

/** The holder name the session object records: a digest of the principal, then the tab's own name. */
async function scopedHolder(principal: Principal, holder: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(principal.id));
  const hex = [...new Uint8Array(digest).slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `p${hex}~${holder}`;
}

export function mountReplicaRoutes<E extends Env>(
  app: Hono<E>,
  guard: Guard<Context<E>>,
  forward: Forward<Context<E>>,
): void {
  app.get("/sessions/:id/replica", async (c) => {
    const g = await guard(c, "read");
    if (g instanceof Response) return g;
    return forward(c, { op: "replica", sessionId: g.sessionId });
  });

  const writeRoute = (
    path: string,
    op: "replica-claim" | "replica-push" | "replica-release",
    schema: typeof ClaimBody | typeof PushBody | typeof ReleaseBody,
  ) =>
    app.post(path, async (c) => {
      const g = await guard(c, "replicate");
      if (g instanceof Response) return g;
      const body = await readJson(c.req.raw, false);
      if (body instanceof Response) return body;
      const input = parse("body", schema, body);
      if (input instanceof Response) return input;
      const holder = await scopedHolder(g.principal, input.holder);
      return forward(c, { op, sessionId: g.sessionId }, { ...input, holder });
    });
  writeRoute("/sessions/:id/replica/claim", "replica-claim", ClaimBody);
  writeRoute("/sessions/:id/replica/push", "replica-push", PushBody);
  writeRoute("/sessions/:id/replica/release", "replica-release", ReleaseBody);

  app.get("/sessions/:id/replica/changes", async (c) => {
    const g = await guard(c, "replicate");
    if (g instanceof Response) return g;
    const query = parse("query", ChangesQuery, c.req.query());
    if (query instanceof Response) return query;
    const limit = query.limit ?? MAX_PUSH_COMMITS;
    return forward(c, { op: "replica-changes", sessionId: g.sessionId, after: query.after, limit });
  });

  // The session whole at the edge's version: for a copy its change log no longer reaches.
  app.get("/sessions/:id/replica/snapshot", async (c) => {
    const g = await guard(c, "replicate");
    if (g instanceof Response) return g;
    return forward(c, { op: "replica-snapshot", sessionId: g.sessionId });
  });
}
