/**
 * The session a Durable Object hosts (see `defineSessionObject`): its routes, validated and answered; its
 * alarm (wake-ups and the watchdog); the writer it opens with a new owner epoch; and the replica side while a
 * linked browser tab leads.
 */
import {
  isSubmissionFinished,
  OwnedElsewhereError,
  openSession,
  parseSubmitInput,
  type RecoveryPlan,
  type Session,
  SessionClosedError,
  SessionNotFoundError,
  type Submission,
  takePlacedCalls,
  type WakeInfo,
} from "../src/index.ts";
import { CREATED_HEADER } from "./directory.ts";
import { DurableObjectSqliteStorage } from "./do-sqlite-storage.ts";
import {
  BUSY_RETRY_MS,
  DEFAULT_SESSION_LIMITS,
  Gauge,
  type SessionLimits,
  tooManyRequests,
} from "./limits.ts";
import type { DurableObjectStateLike, SessionObjectOptions } from "./object-options.ts";
import { problemFromError, problemResponse } from "./problem.ts";
import { type InternalRoute, parseCancelBody, parseSessionCall, parseSignalBody } from "./protocol.ts";
import { type ReplicaRoute, SessionReplica, sqliteOwnership } from "./replica-object.ts";
import {
  answerRead,
  isReadRoute,
  unknownSubmission,
  untilAborted,
  waitAtMost,
  waitForEnd,
} from "./session-reads.ts";

/** One session in one Durable Object: its routes, its alarm, its writer and the linked-session side. */
export class SessionHost<Env> {
  private readonly storage: DurableObjectSqliteStorage;
  private session: Session | undefined;
  /** The alarm time this instance last set (undefined: none set by this instance). */
  private alarmAt: number | undefined;
  private readonly watchdogMs: number;
  private readonly limits: Required<SessionLimits>;
  private readonly streams: Gauge;
  private readonly waiters: Gauge;
  /** Submissions this object is accepting now (not yet counted by the session's unfinished ones). */
  private accepting = 0;
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
      // Only the read routes are asked again: a write (a drop has no body either) is answered as it ended.
      if (!(error instanceof SessionClosedError) || !isReadRoute(route)) throw error;
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
    if (isReadRoute(route)) return answerRead(await this.required(route.sessionId), route, this.streams);
    switch (route.op) {
      case "submit": {
        // Validated in full before anything exists: a request that fails creates no session.
        const input = parseSubmitInput(body);
        await this.replica.assertWritable(route.sessionId);
        const created = !this.storage.sessionIds().includes(route.sessionId);
        const session = await this.ensure(route.sessionId, true);
        if (!session) throw new SessionNotFoundError(route.sessionId);
        // Counted once the session is open (a first request after an eviction opens it just above), with the
        // submissions still being accepted; a retried requestId is answered however full the session is.
        const full = session.unfinishedSubmissions() + this.accepting >= this.limits.queuedSubmissions;
        if (!created && full && !(await session.readSubmissionForRequest(input.requestId)))
          return tooManyRequests("too many unfinished submissions in this session", BUSY_RETRY_MS);
        let accepted: Submission;
        this.accepting++;
        try {
          accepted = await session.submit(input);
        } catch (error) {
          if (created) await this.forget(session); // the session this request created is removed with it
          throw error;
        } finally {
          this.accepting--;
        }
        const submission = await waitForEnd(session, accepted, route.waitMs);
        // 200 when the client asked to wait and the work has ended; otherwise it is accepted and running.
        // A session this call created is marked for the router (it notes it in the directory).
        return Response.json(submission, {
          status: isSubmissionFinished(submission) ? 200 : 202,
          ...(created && { headers: { [CREATED_HEADER]: "1" } }),
        });
      }
      case "cancel": {
        const { reason } = parseCancelBody(body);
        const session = await this.writable(route.sessionId);
        if (!(await session.readSubmission(route.submissionId))) return unknownSubmission(route.submissionId);
        return Response.json(await session.cancelSubmission(route.submissionId, reason));
      }
      case "recovery":
        return Response.json(await this.previewRecovery(route.sessionId));
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
      case "replica":
      case "replica-claim":
      case "replica-push":
      case "replica-release":
      case "replica-changes":
      case "replica-snapshot":
        // A catch-up of a session this object never held is told so (its change log would read as empty),
        // as is a question of who writes one that neither this object nor a tab's claim holds.
        if (
          !this.storage.sessionIds().includes(route.sessionId) &&
          (route.op === "replica-changes" ||
            (route.op === "replica" && !(await this.replica.ledElsewhere(route.sessionId))))
        )
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
