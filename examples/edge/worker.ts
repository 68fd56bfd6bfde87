/**
 * The five-email scenario on the edge: one Durable Object per session (`AgentSession`), the Hono router
 * as the Worker's fetch handler, and `MailBox`, a stand-in mail provider in its own Durable Object (its
 * log outlives the session's instances, like a real provider; sends are idempotent by operation id and
 * can be looked up by it). `npm run dev:edge` runs it on local workerd; see the README to deploy it.
 *
 * Vars: `API_TOKEN` (secret, required: the root token), `JWT_SECRET` (secret, optional: accept HS256 user tokens
 * scoped by their `sessions` and `actions` claims), `RATE_LIMIT_PER_MINUTE`, `WATCHDOG_MS`, `MAIL_DELAY_MS`,
 * `CORS_ORIGINS`, `PLAN_APPROVAL` (`ask`: new sessions get a draft plan the campaign waits on a person to
 * approve, `POST /sessions/:id/signals/plan-approval:plan`), `PLAN_APPROVAL_DEADLINE_MS` (a draft not
 * approved by then is dropped, on the object's alarm), `SIGNAL_CALLBACK_SECRET` (callback URLs for
 * third parties), and optionally `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL` to use a real model
 * instead of the scripted one.
 */
import { DurableObject } from "cloudflare:workers";
import {
  anyOf,
  bearerToken,
  createEdgeApp,
  type DurableObjectNamespaceLike,
  defineSessionObject,
  jwtAuthorizer,
  memoryRateLimit,
  type RateLimit,
  rootToken,
} from "../../edge/index.ts";
import type { Json } from "../../src/index.ts";
import { openAiCompatibleModel } from "../../src/index.ts";
import { approvedPlan, asyncCampaignRegistry, campaignModel, draftPlan } from "../five-emails/app.ts";
import type { Receipt } from "../five-emails/mail-service.ts";

export interface Env {
  readonly SESSIONS: DurableObjectNamespaceLike;
  readonly MAIL: DurableObjectNamespaceLike<{ fetch(request: Request): Promise<Response> }>;
  readonly API_TOKEN?: string;
  readonly JWT_SECRET?: string;
  readonly RATE_LIMIT_PER_MINUTE?: string;
  readonly WATCHDOG_MS?: string;
  readonly MAIL_DELAY_MS?: string;
  readonly OPENAI_BASE_URL?: string;
  readonly OPENAI_API_KEY?: string;
  readonly OPENAI_MODEL?: string;
  /** Comma-separated browser origins allowed to call the API (e.g. the devtools page). */
  readonly CORS_ORIGINS?: string;
  readonly PLAN_APPROVAL?: string;
  readonly PLAN_APPROVAL_DEADLINE_MS?: string;
  readonly SIGNAL_CALLBACK_SECRET?: string;
  /** How long a linked browser tab leads a session without a push before this edge takes it over. */
  readonly LEASE_MS?: string;
  /** Keep at most this many finished Submissions (with their task trees) in storage; unset: keep all. */
  readonly KEEP_SETTLED?: string;
  /** How many commits the change log keeps (default 10,000; pruned every 256 commits). */
  readonly RETAIN_CHANGES?: string;
  /** The most characters of rows a snapshot moves to a tab the change log no longer reaches (16 Mi). */
  readonly MAX_SNAPSHOT_CHARS?: string;
}

/** `{ [name]: n }` for a whole number in `text`; NaN (refused by the store) for anything else; {} when unset. */
function wholeNumber<K extends string>(name: K, text: string | undefined): Partial<Record<K, number>> {
  if (text === undefined || text === "") return {};
  return { [name]: /^\d+$/.test(text) ? Number(text) : Number.NaN } as Record<K, number>;
}

const mailbox = (env: Env) => env.MAIL.get(env.MAIL.idFromName("mailbox"));

function modelFor(env: Env) {
  if (!env.OPENAI_BASE_URL) return campaignModel();
  return openAiCompatibleModel({
    baseUrl: env.OPENAI_BASE_URL,
    apiKey: env.OPENAI_API_KEY ?? "",
    model: env.OPENAI_MODEL ?? "gpt-4.1-mini",
  });
}

/** The session object: the campaign agent, with the approved plan seeded when a session is created. */
export class AgentSession extends defineSessionObject<Env>(DurableObject, {
  registry: (env) =>
    asyncCampaignRegistry(
      {
        send: async (message) => {
          const response = await mailbox(env).fetch(
            new Request("https://mail/send", { method: "POST", body: JSON.stringify(message) }),
          );
          if (!response.ok) throw new Error(`mail provider: HTTP ${response.status}`);
          return (await response.json()) as Receipt;
        },
        lookup: async (operationId) => {
          const response = await mailbox(env).fetch(
            new Request(`https://mail/lookup?op=${encodeURIComponent(operationId)}`),
          );
          if (response.status === 404) return undefined;
          if (!response.ok) throw new Error(`mail provider: HTTP ${response.status}`);
          return (await response.json()) as Receipt;
        },
      },
      modelFor(env),
    ),
  onCreate: async (session, env) => {
    const deadline = env.PLAN_APPROVAL_DEADLINE_MS;
    const plan =
      env.PLAN_APPROVAL === "ask"
        ? draftPlan(deadline === undefined ? undefined : session.clock.now() + Number(deadline))
        : approvedPlan();
    await session.commit((draft) => draft.setDocument("plan", "email-plan", plan as unknown as Json));
  },
  watchdogMs: (env) => Number(env.WATCHDOG_MS ?? 30_000),
  leaseMs: (env) => Number(env.LEASE_MS ?? 15_000),
  // Parsed strictly too: a mistyped value is refused (never read as "keep the log forever").
  store: (env) => ({
    ...wholeNumber("retainChanges", env.RETAIN_CHANGES),
    ...wholeNumber("maxExportChars", env.MAX_SNAPSHOT_CHARS),
  }),
  // Parsed strictly: a mistyped value is refused when a session opens (never read as "keep nothing").
  session: (env) =>
    env.KEEP_SETTLED === undefined || env.KEEP_SETTLED === ""
      ? {}
      : {
          retention: { keepSettled: /^\d+$/.test(env.KEEP_SETTLED) ? Number(env.KEEP_SETTLED) : Number.NaN },
        },
}) {}

interface SqlState {
  storage: {
    sql: { exec(query: string, ...bindings: unknown[]): { toArray(): Record<string, unknown>[] } };
    transactionSync<T>(closure: () => T): T;
  };
}

/**
 * The mail provider stand-in: accepts a message once per idempotency key, one message at a time, each
 * after a short delay (a rate-limited provider: deliveries land one by one, so a run can be cut between).
 */
export class MailBox {
  private readonly sql: SqlState["storage"]["sql"];
  private queue: Promise<unknown> = Promise.resolve();
  constructor(
    private readonly ctx: SqlState,
    private readonly env: Env,
  ) {
    this.sql = ctx.storage.sql;
    this.sql.exec(
      "CREATE TABLE IF NOT EXISTS deliveries (n INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT UNIQUE NOT NULL, recipient TEXT NOT NULL)",
    );
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/send") {
      const { to, idempotencyKey } = (await request.json()) as { to: string; idempotencyKey: string };
      const accepted = this.queue.then(async () => {
        await new Promise((resolve) => setTimeout(resolve, Number(this.env.MAIL_DELAY_MS ?? 300)));
        return this.ctx.storage.transactionSync(() => {
          const known = this.find(idempotencyKey);
          if (known) return known;
          this.sql.exec("INSERT INTO deliveries (op, recipient) VALUES (?, ?)", idempotencyKey, to);
          return this.find(idempotencyKey);
        });
      });
      this.queue = accepted.catch(() => undefined);
      return Response.json(await accepted);
    }
    if (url.pathname === "/lookup") {
      const receipt = this.find(url.searchParams.get("op") ?? "");
      return receipt ? Response.json(receipt) : new Response("unknown operation", { status: 404 });
    }
    if (url.pathname === "/deliveries") {
      const rows = this.sql.exec("SELECT op, recipient FROM deliveries ORDER BY n").toArray();
      return Response.json(rows.map((row) => ({ to: row.recipient, operationId: row.op })));
    }
    return new Response("not found", { status: 404 });
  }

  private find(operationId: string): Receipt | undefined {
    const row = this.sql
      .exec("SELECT n, op, recipient FROM deliveries WHERE op = ?", operationId)
      .toArray()[0];
    return row === undefined
      ? undefined
      : { messageId: `msg-${String(row.n)}`, to: String(row.recipient), operationId: String(row.op) };
  }
}

const root = rootToken<Env>((env) => env.API_TOKEN);

/** Each caller's rate, from `RATE_LIMIT_PER_MINUTE` (default 600), in this isolate. */
const limiters = new Map<number, RateLimit<unknown>>();
const rateLimit: RateLimit<Env> = (principal, env) => {
  const perMinute = Number(env.RATE_LIMIT_PER_MINUTE ?? 600);
  let limiter = limiters.get(perMinute);
  if (!limiter) {
    limiter = memoryRateLimit({ requests: perMinute, perMs: 60_000 });
    limiters.set(perMinute, limiter);
  }
  return limiter(principal, env);
};

const app = createEdgeApp<Env>({
  // The root token may do anything; user tokens (HS256 JWTs signed with JWT_SECRET) only what they say.
  authorize: anyOf(root, jwtAuthorizer({ secret: (env) => env.JWT_SECRET })),
  rateLimit,
  corsOrigins: (env) => env.CORS_ORIGINS?.split(",").map((o) => o.trim()),
});
/** The mail provider stand-in's own API, for the root token only (an operator, or a linked tab's demo). */
const operator = (c: { req: { raw: Request }; env: Env }) =>
  root({ sessionId: "", action: "admin", token: bearerToken(c.req.raw), request: c.req.raw, env: c.env });
/** What the mail provider really delivered. */
app.get("/mail/deliveries", async (c) => {
  const granted = await operator(c);
  if (granted instanceof Response) return granted;
  return mailbox(c.env).fetch(new Request("https://mail/deliveries"));
});
/** Send and look up, as the session objects do: a browser tab leading a linked session uses the same provider. */
app.post("/mail/send", async (c) => {
  const granted = await operator(c);
  if (granted instanceof Response) return granted;
  const body = await c.req.json<{ to?: unknown; idempotencyKey?: unknown }>().catch(() => ({}) as never);
  if (typeof body.to !== "string" || typeof body.idempotencyKey !== "string")
    return c.json({ error: "expected { to, idempotencyKey }" }, 400);
  const message = { to: body.to, idempotencyKey: body.idempotencyKey };
  return mailbox(c.env).fetch(
    new Request("https://mail/send", { method: "POST", body: JSON.stringify(message) }),
  );
});
app.get("/mail/lookup", async (c) => {
  const granted = await operator(c);
  if (granted instanceof Response) return granted;
  return mailbox(c.env).fetch(
    new Request(`https://mail/lookup?op=${encodeURIComponent(c.req.query("op") ?? "")}`),
  );
});

export default app;
