/**
 * A Session: the unit of storage and commit ordering. Open one for writing (taking ownership with a new
 * epoch) or read-only (query and observe; no writes).
 */
import type { Clock, IdSource, Timers } from "../clock.ts";
import { afterThisTick, randomIds, systemClock, systemTimers } from "../clock.ts";
import {
  InvalidArgumentError,
  type KernelError,
  ReadOnlyError,
  SessionClosedError,
  SessionNotFoundError,
  SessionStoppedError,
} from "../errors.ts";
import type { CommitRecord, Conversation, Entry, Json, Submission, Task } from "../records/schemas.ts";
import { CommitRecordSchema, EntrySchema, isSubmissionFinished, isTerminal } from "../records/schemas.ts";
import { validateRecord } from "../records/validate.ts";
import type { Registry } from "../registry.ts";
import { createRegistry } from "../registry.ts";
import type { Storage } from "../storage/storage.ts";
import type { RecoveryAction } from "../tasks/recovery.ts";
import { planRecovery } from "../tasks/recovery.ts";
import type { WakeInfo } from "../tasks/scheduler.ts";
import { Scheduler } from "../tasks/scheduler.ts";
import { createTask, requestCancel } from "../tasks/transitions.ts";
import type { BuildCommit, CommitOptions, CommitResult } from "./commit-pipeline.ts";
import { CommitPipeline } from "./commit-pipeline.ts";
import type { SealedCommit } from "./draft.ts";
import { loadSessionState } from "./load.ts";
import type { SessionState } from "./state.ts";
import { reduceSession } from "./state.ts";
import type { SubmitInput } from "./submit.ts";
import { acceptSubmission, observeUntil, parseSubmitInput } from "./submit.ts";
import type { ChangeListener, SubscribeOptions, Unsubscribe } from "./subscriptions.ts";
import { Subscriptions } from "./subscriptions.ts";
import type { SessionView, ViewOptions } from "./view.ts";
import { buildView } from "./view.ts";

export interface OpenSessionOptions {
  readonly id: string;
  readonly storage: Storage;
  readonly registry?: Registry;
  /** `write` (default) takes ownership with a new epoch; `read` only queries and observes. */
  readonly mode?: "write" | "read";
  readonly clock?: Clock;
  readonly timers?: Timers;
  readonly ids?: IdSource;
  /** How long deferred (loss-tolerant) changes may wait before they are committed. Default 50 ms. */
  readonly deferredFlushMs?: number;
  /**
   * How many latest entries per conversation are loaded on open (default 200). Entries committed while the
   * session runs stay in memory up to five times that, so a long model turn reads its context without
   * touching storage; older ones are read from storage on demand.
   */
  readonly entryTail?: number;
  /** Called after every commit with `{ runnableNow, nextWakeAt }`: hosts turn it into timers or alarms. */
  readonly onWake?: (wake: WakeInfo) => void;
  /** Restart limit for task kinds that do not set their own `maxRestarts`. Default 3. */
  readonly maxRestarts?: number;
}

/** `open` while usable; `stopped` after a storage failure (reopen to see what was saved); `closed` by the host. */
export type SessionStatus = "open" | "stopped" | "closed";

/** Options of the observe-only waits. */
export interface WaitOptions {
  /** Stops waiting (and releases the subscription behind it); the promise rejects with the reason. */
  readonly signal?: AbortSignal;
}

const CHANGE_PAGE = 500;

/**
 * Opens a session.
 *
 * @example
 * const session = await openSession({ id: "support-42", storage: memoryStorage() });
 * const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "Hello" });
 */
export async function openSession(options: OpenSessionOptions): Promise<Session> {
  if (typeof options.id !== "string" || options.id.length === 0 || options.id.length > 256) {
    throw new InvalidArgumentError("session id must be a non-empty string of at most 256 characters", [
      { path: "id", message: "invalid session id" },
    ]);
  }
  const mode = options.mode ?? "write";
  const clock = options.clock ?? systemClock;
  const entryTail = options.entryTail ?? 200;
  const registry = options.registry ?? createRegistry();
  const stored = await options.storage.open(options.id, { mode, at: clock.now(), entryTail });
  if (!stored) throw new SessionNotFoundError(options.id);
  const state = loadSessionState(stored, registry, entryTail);
  return new Session(state, mode, options.storage, registry, clock, options);
}

export class Session {
  private readonly pipeline: CommitPipeline;
  private readonly subscriptions: Subscriptions;
  private readonly scheduler: Scheduler | undefined;
  private currentStatus: SessionStatus = "open";
  private stopError: KernelError | undefined;
  /** The restart limit resume() applies, so the recovery preview applies the same one. */
  private readonly maxRestarts: number | undefined;

  /** @internal Use {@link openSession}. */
  constructor(
    private readonly state: SessionState,
    /** `write` or `read`. */
    readonly mode: "write" | "read",
    private readonly storage: Storage,
    readonly registry: Registry,
    readonly clock: Clock,
    options: OpenSessionOptions,
  ) {
    const ids = options.ids ?? randomIds;
    this.ids = ids;
    this.maxRestarts = options.maxRestarts;
    this.pipeline = new CommitPipeline({
      sessionId: state.id,
      state,
      storage,
      registry,
      clock,
      timers: options.timers ?? systemTimers,
      deferredFlushMs: options.deferredFlushMs ?? 50,
      adopt: (sealed) => this.adopt(sealed),
      stop: (error) => this.stop(error),
    });
    this.subscriptions = new Subscriptions(
      () => this.state.version,
      (after) => this.readChanges(after, CHANGE_PAGE),
    );
    if (mode === "write") {
      this.scheduler = new Scheduler(
        {
          state,
          registry,
          clock,
          timers: options.timers ?? systemTimers,
          ids,
          commit: (build, commitOptions) => this.commit(build, commitOptions),
          readEntries: (conversationId, fromSeq) => this.readEntriesFrom(conversationId, fromSeq),
          block: (taskId, reason) => reduceSession(state, { type: "task-blocked", taskId, reason }),
          unblock: (taskId) => reduceSession(state, { type: "task-unblocked", taskId }),
        },
        {
          ...(options.onWake !== undefined && { onWake: options.onWake }),
          ...(options.maxRestarts !== undefined && { maxRestarts: options.maxRestarts }),
        },
      );
    }
  }

  /** The id source this session uses for new records. */
  readonly ids: IdSource;

  get id(): string {
    return this.state.id;
  }
  /** The version of the last commit this session adopted. */
  get version(): number {
    return this.state.version;
  }
  /** The owner epoch this session writes with (read-only sessions: the epoch they loaded). */
  get epoch(): number {
    return this.state.epoch;
  }
  get status(): SessionStatus {
    return this.currentStatus;
  }
  /** Why the session stopped, when it did. */
  get stoppedBecause(): KernelError | undefined {
    return this.stopError;
  }

  /**
   * Commits whatever `build` stages on the draft, atomically. The promise resolves after storage confirmed
   * the commit and the change was adopted and published.
   */
  commit<T>(build: BuildCommit<T>, options?: CommitOptions): Promise<CommitResult<T>> {
    const unusable = this.unusable("commit");
    if (unusable) return Promise.reject(unusable);
    return this.pipeline.commit(build, options);
  }

  /**
   * Accepts an input durably. A retry with the same `requestId` returns the original Submission and
   * creates no new work.
   */
  async submit(input: SubmitInput): Promise<Submission> {
    const unusable = this.unusable("submit");
    if (unusable) throw unusable;
    const parsed = parseSubmitInput(input);
    const existing = this.state.submissionByRequest(parsed.requestId);
    if (existing) return existing;
    const { value } = await this.pipeline.commit((draft) =>
      acceptSubmission(draft, parsed, this.registry, this.ids),
    );
    return this.state.submission(value.id) ?? value;
  }

  /** Creates a top-level task; it runs once the session is resumed. */
  async spawn(
    kind: string,
    input: Json,
    options: { id?: string; conversationId?: string } = {},
  ): Promise<Task> {
    const unusable = this.unusable("spawn");
    if (unusable) throw unusable;
    const id = options.id ?? this.ids.next("task");
    await this.pipeline.commit((draft) =>
      createTask(draft, this.registry, {
        id,
        kind,
        input,
        ...(options.conversationId !== undefined && { conversationId: options.conversationId }),
      }),
    );
    return this.state.task(id) as Task;
  }

  /**
   * Cancels a task and its owned children, durably: the intent is committed first, a running phase's
   * signal aborts, and the task ends `cancelled` once its children have.
   */
  async cancel(taskId: string, reason = "cancelled by request"): Promise<void> {
    const unusable = this.unusable("cancel");
    if (unusable) throw unusable;
    if (!this.state.task(taskId)) {
      throw new InvalidArgumentError(`task ${taskId} does not exist`, [
        { path: "taskId", message: "unknown task" },
      ]);
    }
    await this.pipeline.commit((draft) => requestCancel(draft, taskId, reason));
  }

  /** Cancels a Submission's task tree (or the Submission itself when it has no task). */
  async cancelSubmission(submissionId: string, reason = "cancelled by request"): Promise<Submission> {
    const unusable = this.unusable("cancel");
    if (unusable) throw unusable;
    if (!this.state.submission(submissionId)) {
      throw new InvalidArgumentError(`submission ${submissionId} does not exist`, [
        { path: "submissionId", message: "unknown submission" },
      ]);
    }
    await this.pipeline.commit((draft) => {
      const current = draft.submission(submissionId);
      if (!current || isSubmissionFinished(current)) return;
      if (current.taskId !== undefined && draft.task(current.taskId))
        requestCancel(draft, current.taskId, reason);
      else draft.putSubmission({ ...current, status: "cancelled", updatedAt: draft.at });
    });
    return this.state.submission(submissionId) as Submission;
  }

  /** Starts driving unfinished work: recovers it (DESIGN §4), then runs ready phases. */
  async resume(): Promise<void> {
    const unusable = this.unusable("resume");
    if (unusable) throw unusable;
    await this.scheduler?.resume();
  }

  /**
   * Resolves when the Submission has ended (succeeded, failed or cancelled). Only observes: safe to call
   * from any number of clients, and again after reconnecting.
   */
  wait(submissionId: string, options?: WaitOptions): Promise<Submission> {
    const find = () => this.state.submission(submissionId);
    return this.untilEnded(`submission ${submissionId}`, find, isSubmissionFinished, options);
  }

  /** Resolves with the task's record once it is terminal. Only observes. */
  waitForTask(taskId: string, options?: WaitOptions): Promise<Task> {
    return this.untilEnded(`task ${taskId}`, () => this.state.task(taskId), isTerminal, options);
  }

  /** Resolves with a record once `ended` holds for it; rejects at once if `what` does not exist. */
  private untilEnded<T>(
    what: string,
    find: () => T | undefined,
    ended: (record: T) => boolean,
    options?: WaitOptions,
  ): Promise<T> {
    const check = () => {
      const record = find();
      if (!record) throw new InvalidArgumentError(`${what} does not exist`);
      return ended(record) ? record : undefined;
    };
    return observeUntil(this, check, options?.signal);
  }

  /** Resolves once the session has adopted `version` (a read-your-writes wait for remote clients). */
  waitForVersion(version: number, options?: WaitOptions): Promise<void> {
    return observeUntil(this, () => (this.state.version >= version ? true : undefined), options?.signal).then(
      () => undefined,
    );
  }

  /** Resolves once no phase is running and no scheduled work is pending (timed sleeps may remain). */
  whenIdle(): Promise<void> {
    return this.scheduler?.whenIdle() ?? Promise.resolve();
  }

  /**
   * What a process opening the session now would do to each unfinished task on `resume()` (every running
   * phase counts as cut off), without doing it: recovery previews in devtools and the edge API.
   */
  previewRecovery(): RecoveryAction[] {
    return planRecovery(
      this.state.tasks.values(),
      this.state,
      this.registry,
      this.clock.now(),
      this.maxRestarts,
    );
  }

  /** Whether work is runnable now and when the next timed wake-up is. */
  wakeInfo(): WakeInfo {
    return this.scheduler?.wakeInfo() ?? { runnableNow: false, nextWakeAt: undefined };
  }

  /** Registers a task kind (or a new version); tasks blocked for want of it are scheduled. */
  registerTask(definition: Parameters<Registry["registerTask"]>[0]): void {
    this.registry.registerTask(definition);
  }

  /** One Submission as of the current version, or undefined when there is none with this id. */
  submission(submissionId: string): Submission | undefined {
    return this.state.submission(submissionId);
  }

  /** The Submission accepted for a client's `requestId`, if any. */
  submissionForRequest(requestId: string): Submission | undefined {
    return this.state.submissionByRequest(requestId);
  }

  /** A snapshot of the session at its current version; `options` trim it for display. */
  view(options?: ViewOptions): SessionView {
    return buildView(this.state, options);
  }

  /** One conversation's record (its `entryCount` is the seq its next entry gets), if it exists. */
  conversation(conversationId: string): Conversation | undefined {
    return this.state.conversation(conversationId);
  }

  /**
   * Delivers every committed change with version > `fromVersion`, in order, without gaps or duplicates:
   * first the missing ones from the change log, then live ones as they are committed.
   */
  subscribe(fromVersion: number, listener: ChangeListener, options?: SubscribeOptions): Unsubscribe {
    if (this.currentStatus !== "open") {
      // Nothing more will be committed through this session: say so rather than wait forever.
      const ended =
        this.currentStatus === "closed"
          ? new SessionClosedError(this.id)
          : new SessionStoppedError(this.id, { cause: this.stopError });
      afterThisTick(() => options?.onError?.(ended));
      return () => undefined;
    }
    return this.subscriptions.subscribe(fromVersion, listener, options);
  }

  /** Entries `fromSeq` ≤ seq < `toSeq` of a conversation, read from storage and validated. */
  async readEntries(conversationId: string, fromSeq: number, toSeq?: number): Promise<Entry[]> {
    const end = toSeq ?? this.state.conversation(conversationId)?.entryCount ?? 0;
    const rows = await this.storage.readEntries(this.id, conversationId, fromSeq, end);
    return rows.map((row) => validateRecord(EntrySchema, row.value, row.key));
  }

  /** Entries from `fromSeq` to the end of a conversation: from memory when it holds them, else from storage. */
  private async readEntriesFrom(conversationId: string, fromSeq: number): Promise<Entry[]> {
    const held = this.state.conversations.get(conversationId);
    if (!held) return [];
    const first = held.entries[0]?.seq ?? held.record.entryCount;
    if (fromSeq >= first) return held.entries.filter((e) => e.seq >= fromSeq);
    const older = await this.readEntries(conversationId, fromSeq, first);
    return [...older, ...held.entries];
  }

  /** Committed changes after `afterVersion` from the change log, validated, oldest first. */
  async readChanges(
    afterVersion: number,
    limit = CHANGE_PAGE,
  ): Promise<{ changes: CommitRecord[]; oldestRetained: number }> {
    const { changes, oldestRetained } = await this.storage.readChanges(this.id, afterVersion, limit);
    return {
      changes: changes.map((row) => validateRecord(CommitRecordSchema, row.value, row.key)),
      oldestRetained,
    };
  }

  /**
   * Read-only sessions: adopts the changes other writers committed since this session's version.
   * Returns how many changes were adopted.
   */
  async refresh(): Promise<number> {
    const unusable = this.currentStatus === "open" ? undefined : this.unusable("refresh");
    if (unusable) throw unusable;
    if (this.mode !== "read") return 0;
    let adopted = 0;
    for (;;) {
      const { changes } = await this.readChanges(this.state.version);
      const next = changes.filter((c) => c.version > this.state.version);
      if (next.length === 0) return adopted;
      for (const change of next) {
        if (change.version !== this.state.version + 1) return adopted;
        this.adopt({ commit: change, documentValues: new Map<string, Json>() });
        adopted++;
      }
    }
  }

  /** Commits pending deferred changes now. */
  flush(): Promise<void> {
    return this.pipeline.flush();
  }

  /** Stops using the session: commits pending deferred changes, then ends subscriptions. Unfinished work stays stored. */
  async close(): Promise<void> {
    if (this.currentStatus !== "open") return;
    this.scheduler?.close();
    if (this.mode === "write") await this.pipeline.flush().catch(() => undefined);
    this.currentStatus = "closed";
    const closed = new SessionClosedError(this.id);
    this.pipeline.fail(closed);
    this.subscriptions.end();
  }

  private adopt(sealed: SealedCommit): void {
    reduceSession(this.state, {
      type: "committed",
      commit: sealed.commit,
      documentValues: sealed.documentValues,
    });
    this.subscriptions.publish(sealed.commit);
    this.scheduler?.onCommitted(sealed.commit);
  }

  private stop(error: KernelError): void {
    this.scheduler?.close("the session stopped after a storage failure");
    this.currentStatus = "stopped";
    this.stopError = error;
    this.subscriptions.end(new SessionStoppedError(this.id, { cause: error }));
  }

  private unusable(what: string): KernelError | undefined {
    if (this.currentStatus === "closed") return new SessionClosedError(this.id);
    if (this.currentStatus === "stopped") return new SessionStoppedError(this.id, { cause: this.stopError });
    if (this.mode === "read") return new ReadOnlyError(this.id, what);
    return undefined;
  }
}
