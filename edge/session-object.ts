/**
 * The Durable Object that hosts one Session. The platform serializes its requests and gives it a SQLite
 * database, so every commit of the session is one `transactionSync`; each new instance opens the session
 * with a new owner epoch, so an evicted-but-still-running instance can never commit again.
 *
 * Wake-ups: after every commit the object points its alarm at the kernel's next wake time, and while
 * phases run it keeps a watchdog alarm a little ahead, so an instance evicted or restarted mid-phase is
 * brought back by the alarm, which reopens the session and resumes it. Alarms are at-least-once: the
 * handler only resumes (idempotent) and re-derives the next alarm, so a duplicate or late one is harmless.
 *
 * The router calls it over Durable Object RPC (`stub.route(call, body, requestId)`), which the platform
 * offers only to classes extending its `DurableObject`: pass that class in.
 *
 * @example
 * import { DurableObject } from "cloudflare:workers";
 * export class AgentSession extends defineSessionObject<Env>(DurableObject, {
 *   registry: (env) => createRegistry({ ...agent }),
 * }) {}
 */
import { type DirectoryPage, type DirectoryStub, SessionDirectory } from "./directory.ts";
import { SessionHost } from "./object-host.ts";
import type { DurableObjectStateLike, SessionObjectOptions } from "./object-options.ts";
import { problemResponse } from "./problem.ts";
import { type InternalRoute, parseStreamRequest, REQUEST_ID_HEADER, type SessionStub } from "./protocol.ts";

export type { DurableObjectStateLike, SessionObjectOptions } from "./object-options.ts";

/** A Durable Object class hosting one session (see {@link defineSessionObject}). */
export interface SessionObject extends SessionStub, DirectoryStub {
  alarm(): Promise<void>;
}

/** The platform's `DurableObject` class (`import { DurableObject } from "cloudflare:workers"`), structurally. */
// biome-ignore lint/suspicious/noExplicitAny: a class to extend (TypeScript's mixin rule wants any[] here)
export type DurableObjectBase = abstract new (...args: any[]) => object;
// biome-ignore lint/suspicious/noExplicitAny: as above
type Extendable = new (...args: any[]) => object;

export type SessionObjectClass<Env> = new (ctx: DurableObjectStateLike, env: Env) => SessionObject;

/**
 * Defines the Durable Object class for an app's sessions, on the platform's `DurableObject` (RPC needs
 * it). Export it under the name wrangler.jsonc binds.
 */
export function defineSessionObject<Env>(
  base: DurableObjectBase,
  options: SessionObjectOptions<Env>,
): SessionObjectClass<Env> {
  if (typeof base !== "function") {
    throw new TypeError(
      'defineSessionObject(base, options): pass the platform\'s DurableObject class first (import { DurableObject } from "cloudflare:workers")',
    );
  }
  // The platform's class is abstract only to TypeScript: at run time it is extended like any other.
  return class extends (base as Extendable) implements SessionObject {
    readonly host: SessionHost<Env>;
    private readonly directory: SessionDirectory;
    constructor(ctx: DurableObjectStateLike, env: Env) {
      super(ctx, env);
      this.host = new SessionHost(ctx, env, options);
      this.directory = new SessionDirectory(ctx.storage);
    }
    route(call: InternalRoute, body?: unknown, requestId?: string): Promise<Response> {
      return this.host.route(call, body, requestId);
    }
    /**
     * The event stream (see `SessionStub`): the call comes in a header, trusted as the router's. Never hand
     * this stub a client's own request: the router authorizes each stream before it builds this one.
     */
    fetch(request: Request): Promise<Response> {
      const call = parseStreamRequest(request);
      if (!call) return Promise.resolve(problemResponse(404, "not-found", "no such route"));
      return this.host.route(call, undefined, request.headers.get(REQUEST_ID_HEADER) ?? undefined);
    }
    alarm(): Promise<void> {
      return this.host.alarm();
    }
    /** Directory only (the object named `__directory__`): notes a session the router saw created. */
    async noteSession(sessionId: string, at: number): Promise<void> {
      this.directory.note(sessionId, at);
    }
    /** Directory only: a page of the sessions noted, in id order. */
    async listSessions(after: string | undefined, limit: number): Promise<DirectoryPage> {
      return this.directory.list(after, limit);
    }
  };
}
