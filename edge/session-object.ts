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
import {
  InvalidArgumentError,
  isSubmissionFinished,
  type OpenSessionOptions,
  OwnedElsewhereError,
  openSession,
  parseSubmitInput,
  type RecoveryPlan,
  type Registry,
  type Session,
  SessionClosedError,
  SessionNotFoundError,
  type Submission,
  takePlacedCalls,
  type WakeInfo,
} from "../src/index.ts";
import { CREATED_HEADER, type DirectoryPage, type DirectoryStub, SessionDirectory } from "./directory.ts";
import type { DurableObjectStorageLike } from "./do-sqlite-sql.ts";
import { DurableObjectSqliteStorage, type DurableObjectSqliteStorageOptions } from "./do-sqlite-storage.ts";
import { DEFAULT_SESSION_LIMITS, Gauge, type SessionLimits, tooManyRequests } from "./limits.ts";
import { problemFromError, problemResponse } from "./problem.ts";
import {
  type InternalRoute,
  parseCancelBody,
  parseSessionCall,
  parseSignalBody,
  parseStreamRequest,
  REQUEST_ID_HEADER,
  type SessionStub,
} from "./protocol.ts";
import { type ReplicaRoute, SessionReplica, sqliteOwnership } from "./replica-object.ts";
import { commitEventStream } from "./sse.ts";

/** The parts of `DurableObjectState` the host uses (structural: no Cloudflare types needed). */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike & {
    setAlarm(scheduledTime: number): Promise<void>;
    deleteAlarm(): Promise<void>;
  };
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

export interface SessionObjectOptions<Env> {
  /** Task kinds, tools and model of the sessions this object hosts; called once per opened session. */
  readonly registry: (env: Env) => Registry;
  /** Runs once when a session is created by its first submission, before the submission (seed documents). */
  readonly onCreate?: (session: Session, env: Env) => Promise<void>;
  /**
   * How far ahead the watchdog alarm is kept while phases run (default 30 s): after an eviction mid-phase
   * the session resumes this long after its last commit at the latest.
   */
  readonly watchdogMs?: (env: Env) => number;
  /** How long one alarm invocation keeps driving work before it yields (default 60 s). */
  readonly alarmBudgetMs?: number;
  /**
   * Restart limit for task kinds and tools that set none (default 3): how many times a phase cut off by an
   * eviction or crash is re-entered before the task gives up (a tool call then asks `confirm`).
   */
  readonly maxRestarts?: (env: Env) => number | undefined;
  /** Caps on one session: open streams, waiting requests, unfinished Submissions (see `SessionLimits`). */
  readonly limits?: SessionLimits;
  /**
   * How long a linked browser tab leads the session without a push or renewal (default 15 s): after that,
   * this object takes the session over with a new epoch and resumes it.
   */
  readonly leaseMs?: (env: Env) => number;
  /**
   * Each session's working set and retention (`openSession`'s `retainSettled`, `entryTail`, `retention`,
   * `liveWaits`, `maxEarlySignals`):
   * what stays in memory, and what finished work may leave storage (DESIGN §9). Default: the kernel's.
   */
  readonly session?: (
    env: Env,
  ) => Pick<
    OpenSessionOptions,
    "retainSettled" | "entryTail" | "retention" | "liveWaits" | "maxEarlySignals"
  >;
  /**
   * The object's store: how much change log it keeps (`retainChanges`, `retainChangeBytes`; default
   * 10,000 commits, 32 MiB) — streams, devtools and linked tabs catch up from it — and how large a session
   * it moves whole to a tab the log no longer reaches (`maxExportChars`, `GET …/replica/snapshot`).
   */
  readonly store?: (
    env: Env,
  ) => Pick<DurableObjectSqliteStorageOptions, "retainChanges" | "retainChangeBytes" | "maxExportChars">;
}

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

const untilAborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));

/**
 * Waits at most `ms` for `wait(signal)`; on time-out the signal aborts, so the wait releases what it holds
 * (a subscription) instead of lingering after the request has been answered. Undefined on time-out.
 */
async function waitAtMost<T>(ms: number, wait: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    return await wait(controller.signal);
  } catch (error) {
    if (controller.signal.aborted) return undefined;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** `submission` once it has ended, waiting at most `waitMs` for that; as it then stands if it has not. */
async function waitForEnd(session: Session, submission: Submission, waitMs: number): Promise<Submission> {
  if (waitMs === 0 || isSubmissionFinished(submission)) return submission;
  const ended = await waitAtMost(waitMs, (signal) => session.wait(submission.id, { signal }));
  return ended ?? session.submission(submission.id) ?? submission;
}

/** How long a client refused for a full session should wait before it asks again. */
const BUSY_RETRY_MS = 5_000;

class SessionHost<Env> {
  private readonly storage: DurableObjectSqliteStorage;
  private session: Session | undefined;
  /** The alarm time this instance last set (undefined: none set by this instance). */
  private alarmAt: number | undefined;
  private readonly watchdogMs: number;
  private readonly limits: Required<SessionLimits>;
  private readonly streams: Gauge;
  private readonly waiters: Gauge;
  /** The linked-session side: who leads, the replica routes, reads while a tab leads. */
  private readonly replica: SessionReplica;

  constructor(
    private readonly ctx: DurableObjectStateLike,
    private readonly env: Env,
    private readonly options: SessionObjectOptions<Env>,
  ) {
    this.storage = new DurableObjectSqliteStorage(ctx.storage, options.store?.(env));
    this.watchdogMs = options.watchdogMs?.(env) ?? 30_000;
    this.limits = { ...DEFAULT_SESSION_LIMITS, ...options.limits };
    this.streams = new Gauge(this.limits.streams);
    this.waiters = new Gauge(this.limits.waiters);
    const leaseMs = options.leaseMs?.(env);
    this.replica = new SessionReplica({
      storage: this.storage,
      ownership: sqliteOwnership(ctx.storage),
      registry: () => options.registry(env),
      ...(leaseMs !== undefined && { leaseMs }),
      stopWriter: async () => {
        const writer = this.session;
        this.session = undefined;
        await writer?.close();
      },
      startWriter: async (sessionId) => void (await this.ensure(sessionId, false)),
      setAlarm: (at) => {
        this.alarmAt = at;
        void this.ctx.storage.setAlarm(at).catch(reportAlarmError);
      },
    });
  }

  async route(call: unknown, body: unknown, requestId = "-"): Promise<Response> {
    try {
      const route = parseSessionCall(call);
      if (!route) return problemResponse(404, "not-found", "no such route");
      if ("waitMs" in route && route.waitMs > 0)
        return await this.whileWaiting(() => this.handleRead(route, body));
      return await this.handleRead(route, body);
    } catch (error) {
      return problemFromError(error, (e) => console.error(`durable-agent [${requestId}]:`, e));
    }
  }

  /** A request that may wait (`?wait=`) holds one of the session's waiter slots while it runs. */
  private async whileWaiting(handle: () => Promise<Response>): Promise<Response> {
    const release = this.waiters.acquire();
    if (!release) return tooManyRequests("too many requests are waiting on this session", BUSY_RETRY_MS);
    try {
      return await handle();
    } finally {
      release();
    }
  }

  /**
   * A read that was waiting on the replica when this object took the session over (the replica's reader
   * closes then) is answered again from the writer, instead of failing or missing what comes next.
   */
  private async handleRead(route: InternalRoute, body: unknown): Promise<Response> {
    try {
      return await this.handle(route, body);
    } catch (error) {
      // Only reads (calls without a body) are asked again.
      if (!(error instanceof SessionClosedError) || body !== undefined) throw error;
      return this.handle(route, body);
    }
  }

  async alarm(): Promise<void> {
    this.alarmAt = undefined; // a fired alarm is gone; whatever is still due is scheduled again below
    const sessionId = this.storage.sessionIds()[0];
    if (sessionId === undefined) return;
    // While a linked tab leads, the alarm watches its lease (and takes over once it has run out).
    if (!(await this.replica.onAlarm(sessionId))) return;
    const session = await this.ensure(sessionId, false);
    if (!session) return;
    this.schedule(session.wakeInfo());
    // Keep this invocation alive while work runs; the watchdog alarm covers an eviction meanwhile.
    await waitAtMost(this.options.alarmBudgetMs ?? 60_000, (signal) =>
      Promise.race([session.whenIdle(), untilAborted(signal)]),
    );
  }

  private async handle(route: InternalRoute, body: unknown): Promise<Response> {
    switch (route.op) {
      case "submit": {
        // Validated in full before anything exists: a request that fails creates no session.
        const input = parseSubmitInput(body);
        await this.replica.assertWritable(route.sessionId);
        const known =
          this.session?.status === "open"
            ? await this.session.readSubmissionForRequest(input.requestId)
            : undefined;
        if (
          !known &&
          this.session?.status === "open" &&
          this.session.unfinishedSubmissions() >= this.limits.queuedSubmissions
        )
          return tooManyRequests("too many unfinished submissions in this session", BUSY_RETRY_MS);
        const created = !this.storage.sessionIds().includes(route.sessionId);
        const session = await this.ensure(route.sessionId, true);
        if (!session) throw new SessionNotFoundError(route.sessionId);
        let accepted: Submission;
        try {
          accepted = await session.submit(input);
        } catch (error) {
          if (created) await this.forget(session); // the session this request created is removed with it
          throw error;
        }
        const submission = await waitForEnd(session, accepted, route.waitMs);
        // 200 when the client asked to wait and the work has ended; otherwise it is accepted and running.
        // A session this call created is marked for the router (it notes it in the directory).
        return Response.json(submission, {
          status: isSubmissionFinished(submission) ? 200 : 202,
          ...(created && { headers: { [CREATED_HEADER]: "1" } }),
        });
      }
      case "request": {
        const session = await this.required(route.sessionId);
        const submission = await session.readSubmissionForRequest(route.requestId);
        if (!submission)
          return problemResponse(
            404,
            "submission-not-found",
            `no submission for requestId ${route.requestId}`,
          );
        return Response.json(submission);
      }
      case "submissions": {
        const session = await this.required(route.sessionId);
        const page = await session.readSubmissions({
          limit: route.limit,
          ...(route.before !== undefined && { before: route.before }),
        });
        return Response.json(page);
      }
      case "tree": {
        const session = await this.required(route.sessionId);
        return Response.json(await session.readTaskTree(route.root));
      }
      case "submission": {
        const session = await this.required(route.sessionId);
        const submission = await session.readSubmission(route.submissionId);
        if (!submission) return unknownSubmission(route.submissionId);
        return Response.json(await waitForEnd(session, submission, route.waitMs));
      }
      case "cancel": {
        const { reason } = parseCancelBody(body);
        const session = await this.writable(route.sessionId);
        if (!(await session.readSubmission(route.submissionId))) return unknownSubmission(route.submissionId);
        return Response.json(await session.cancelSubmission(route.submissionId, reason));
      }
      case "view": {
        const session = await this.required(route.sessionId);
        if (route.atLeast > session.version && route.waitMs > 0)
          await waitAtMost(route.waitMs, (signal) => session.waitForVersion(route.atLeast, { signal }));
        const trim = {
          ...(route.entries !== undefined && { entries: route.entries }),
          ...(route.submissions !== undefined && { submissions: route.submissions }),
          ...(route.tasks !== undefined && { tasks: route.tasks }),
          ...(route.documents !== undefined && { documents: route.documents }),
          ...(route.documentsAfter !== undefined && { documentsAfter: route.documentsAfter }),
        };
        // A weak validator: one version is one committed state, but the body also shows what memory holds
        // (a parked wait read back without a commit, waits parked while this object ran) and the trims asked.
        return Response.json(session.view(trim), { headers: { etag: `W/"v${session.version}"` } });
      }
      case "entries": {
        const session = await this.required(route.sessionId);
        const conversation = session.conversation(route.conversationId);
        if (!conversation) {
          return problemResponse(
            404,
            "conversation-not-found",
            `conversation ${route.conversationId} does not exist`,
          );
        }
        const before = Math.min(route.before ?? conversation.entryCount, conversation.entryCount);
        const from = Math.max(0, before - route.limit);
        const entries = await session.readEntries(route.conversationId, from, before);
        return Response.json({ conversationId: route.conversationId, entries, next: from > 0 ? from : null });
      }
      case "recovery":
        return Response.json(await this.previewRecovery(route.sessionId));
      case "pending": {
        const session = await this.required(route.sessionId);
        // Waits in memory and parked ones in storage, newest first, a bounded page at a time (`next`).
        const page = {
          limit: route.limit,
          ...(route.before !== undefined && { before: route.before }),
          ...(route.prefix !== undefined && { prefix: route.prefix }),
        };
        const { waits, next, stored } = await session.readPending(page);
        return Response.json({
          version: session.version,
          pending: waits,
          parked: session.parkedInStorage,
          fromStorage: stored,
          next: next ?? null,
        });
      }
      case "signal": {
        const { requestId, payload } = parseSignalBody(body);
        try {
          const session = await this.writable(route.sessionId);
          const receipt = await session.signal(route.key, payload, { requestId });
          return Response.json(receipt, { status: receipt.duplicate ? 200 : 201 });
        } catch (error) {
          return retryLater(error); // a tab took the session over before or while it was delivered
        }
      }
      case "early-signals": {
        const session = await this.required(route.sessionId);
        const kept = session.earlySignals();
        const after = route.after ?? 0;
        const page = kept.filter((signal) => signal.version > after).slice(0, route.limit);
        const last = page.at(-1);
        const more = last !== undefined && kept.at(-1) !== last;
        return Response.json({
          version: session.version,
          count: kept.length,
          earlySignals: page,
          next: more ? last.version : null,
        });
      }
      case "drop-signal": {
        const session = await this.writable(route.sessionId);
        const dropped = await session.dropEarlySignal(route.key);
        if (dropped) return Response.json({ dropped });
        return problemResponse(
          404,
          "no-early-signal",
          `no signal no wait has taken is kept for "${route.key}"`,
        );
      }
      case "events": {
        const session = await this.required(route.sessionId);
        if (route.since > session.version) {
          throw new InvalidArgumentError(
            `since ${route.since} is ahead of the session (${session.version})`,
            [
              {
                path: route.sinceFromHeader ? "headers.last-event-id" : "query.since",
                message: `must be at most ${session.version}`,
              },
            ],
          );
        }
        const release = this.streams.acquire();
        if (!release) return tooManyRequests("too many open event streams on this session", BUSY_RETRY_MS);
        return commitEventStream(new Request("https://session.internal/events"), session, {
          since: route.since,
          maxStreamMs: route.maxStreamMs,
          onClose: release,
          previews: route.previews === true,
        });
      }
      case "replica":
      case "replica-claim":
      case "replica-push":
      case "replica-release":
      case "replica-changes":
      case "replica-snapshot":
        // A catch-up of a session this object never held is told so (its change log would read as empty).
        if (route.op === "replica-changes" && !this.storage.sessionIds().includes(route.sessionId))
          throw new SessionNotFoundError(route.sessionId);
        // A claim stops this object's writer: nothing else runs meanwhile (a request that slipped in
        // between could open a writer of its own).
        return route.op === "replica-claim"
          ? this.ctx.blockConcurrencyWhile(() => this.replica.handle(route as ReplicaRoute, body))
          : this.replica.handle(route as ReplicaRoute, body);
    }
  }

  /**
   * What resume() would do to each unfinished task. A session this instance runs answers for "if it died
   * now"; one that is not running (evicted, its alarm not yet fired) is opened read-only for the answer, so
   * asking neither takes ownership nor resumes anything.
   */
  private async previewRecovery(sessionId: string): Promise<RecoveryPlan> {
    if (this.session?.status === "open") {
      if (this.session.id !== sessionId) throw new SessionNotFoundError(sessionId);
      return this.session.previewRecovery();
    }
    if (!this.storage.sessionIds().includes(sessionId)) throw new SessionNotFoundError(sessionId);
    const reader = await openSession({
      id: sessionId,
      storage: this.storage,
      registry: this.options.registry(this.env),
      mode: "read",
      ...this.restartLimit(),
      ...this.options.session?.(this.env),
    });
    try {
      return reader.previewRecovery();
    } finally {
      await reader.close();
    }
  }

  private restartLimit(): { maxRestarts?: number } {
    const limit = this.options.maxRestarts?.(this.env);
    return limit === undefined ? {} : { maxRestarts: limit };
  }

  /** The session to write: refused (409, naming who leads) while a linked tab leads it. */
  private async writable(sessionId: string): Promise<Session> {
    await this.replica.assertWritable(sessionId);
    const session = await this.ensure(sessionId, false);
    if (!session) throw new SessionNotFoundError(sessionId);
    return session;
  }

  /** Closes and deletes a session that a failed request created, so nothing of it remains. */
  private async forget(session: Session): Promise<void> {
    await session.close();
    if (this.session === session) this.session = undefined;
    this.storage.deleteAll();
    this.alarmAt = undefined;
    await this.ctx.storage.deleteAlarm().catch(reportAlarmError);
  }

  /** The session to read: this object's writer, or while a linked tab leads, the replica it pushes. */
  private async required(sessionId: string): Promise<Session> {
    if (this.storage.sessionIds().includes(sessionId) && (await this.replica.ledElsewhere(sessionId)))
      return this.replica.reader(sessionId);
    const session = await this.ensure(sessionId, false);
    if (!session) throw new SessionNotFoundError(sessionId);
    return session;
  }

  /**
   * The open writer session, opening it (new epoch) and resuming its unfinished work if this instance has
   * not yet. Only a submission creates a session: reads of an unknown one store nothing.
   */
  private async ensure(sessionId: string, create: boolean): Promise<Session | undefined> {
    const current = this.session;
    if (current?.status === "open") return current.id === sessionId ? current : undefined;
    return this.ctx.blockConcurrencyWhile(async () => {
      if (this.session?.status === "open") return this.session.id === sessionId ? this.session : undefined;
      const stored = this.storage.sessionIds();
      if (stored.length > 0 && !stored.includes(sessionId)) return undefined;
      const isNew = stored.length === 0;
      if (isNew && !create) return undefined;
      await this.session?.close(); // a stopped session (storage failure) is reopened from what was saved
      const session = await openSession({
        id: sessionId,
        storage: this.storage,
        registry: this.options.registry(this.env),
        host: "edge",
        onWake: (wake) => this.schedule(wake),
        ...this.restartLimit(),
        ...this.options.session?.(this.env),
      });
      if (isNew) {
        try {
          await this.options.onCreate?.(session, this.env);
        } catch (error) {
          await session.close();
          this.storage.deleteAll(); // a session whose creation failed leaves nothing behind
          throw error;
        }
      }
      await session.resume();
      await takePlacedCalls(session, "edge"); // calls of edge-only tools that waited for the edge
      this.session = session;
      return session;
    });
  }

  /** Points the alarm at the next moment the session needs this object awake. */
  private schedule(wake: WakeInfo): void {
    const now = Date.now();
    const watchdog = wake.runnableNow ? now + this.watchdogMs : undefined;
    const next = wake.nextWakeAt;
    const target =
      watchdog === undefined || next === undefined ? (watchdog ?? next) : Math.min(watchdog, next);
    const current = this.alarmAt;
    if (target === undefined) {
      if (current === undefined) return;
      this.alarmAt = undefined;
      void this.ctx.storage.deleteAlarm().catch(reportAlarmError);
      return;
    }
    // An alarm due no later than needed is kept, unless a running phase would outlive its watchdog margin:
    // moving it on every commit would cost one storage write per commit.
    const earliestUseful = watchdog === undefined ? 0 : Math.min(target, now + this.watchdogMs / 2);
    if (current !== undefined && current <= target && current >= earliestUseful) return;
    this.alarmAt = target;
    void this.ctx.storage.setAlarm(target).catch(reportAlarmError);
  }
}

function reportAlarmError(error: unknown): void {
  console.error("durable-agent: could not set the session alarm", error);
}

function unknownSubmission(submissionId: string): Response {
  return problemResponse(404, "submission-not-found", `submission ${submissionId} does not exist`);
}

/**
 * A signal for a session a browser tab leads (a linked session): 503 with `Retry-After`, until the tab's
 * lease runs out or it hands the session back — a payment provider or CI job retries a 5xx, where a 409
 * would read as final and the event would be lost. Any other error is thrown on.
 */
function retryLater(error: unknown): Response {
  if (!(error instanceof OwnedElsewhereError)) throw error;
  const seconds = error.until === null ? 30 : Math.ceil((error.until - Date.now()) / 1000);
  const retryAfter = String(Math.min(Math.max(seconds, 1), 300));
  const detail = "a browser tab writes this session now; retry after the time Retry-After gives";
  return problemResponse(503, "owned-elsewhere", detail, undefined, { "retry-after": retryAfter });
}
