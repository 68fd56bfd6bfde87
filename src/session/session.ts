/**
 * A Session: the unit of storage and commit ordering. Open one for writing (taking ownership with a new
 * epoch) or read-only (query and observe; no writes).
 */
import type { IdSource } from "../clock.ts";
import { afterThisTick, randomIds, systemClock, systemTimers } from "../clock.ts";
import {
  HistoryTruncatedError,
  type KernelError,
  ReadOnlyError,
  SessionClosedError,
  SessionStoppedError,
} from "../errors.ts";
import type { Json, Signal, Submission, Task } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import {
  deliverSignal,
  precheckSignal,
  type SignalHost,
  type SignalOptions,
  type SignalReceipt,
} from "../signals/deliver.ts";
import { dropEarlySignal } from "../signals/expiry.ts";
import type { Storage } from "../storage/storage.ts";
import { dispatch, type TaskEvent } from "../tasks/machine.ts";
import { planRecovery, type RecoveryPlan } from "../tasks/recovery.ts";
import type { Scheduler } from "../tasks/scheduler.ts";
import type { WakeInfo } from "../tasks/wake-info.ts";
import type { CommitResult, KernelCommit, KernelCommitOptions } from "./commit-pipeline.ts";
import { CommitPipeline, writerGuard } from "./commit-pipeline.ts";
import type { SealedCommit } from "./draft.ts";
import type { BuildCommit, BuildProgress, CommitOptions } from "./draft-types.ts";
import { CHANGE_PAGE } from "./history.ts";
import { registerKernelCommit } from "./kernel-access.ts";
import { DEFAULT_EARLY_SIGNALS, DEFAULT_LIVE_WAITS } from "./limits.ts";
import { observeUntil, untilStoredEnded, untilSubmissionEnded } from "./observe.ts";
import type { OpenSessionOptions, SessionStatus, WaitOptions } from "./options.ts";
import { type CollectResult, Retention } from "./retention.ts";
import { AppDraft, ProgressOnlyDraft } from "./role-drafts.ts";
import { sessionScheduler } from "./scheduler-host.ts";
import { SessionReads } from "./session-reads.ts";
import type { SessionState } from "./state.ts";
import { reduceSession } from "./state.ts";
import type { SubmitInput, SubmitOptions } from "./submit.ts";
import { submitOnce } from "./submit.ts";
import type { ChangeListener, SubscribeOptions, Unsubscribe } from "./subscriptions.ts";
import { Subscriptions } from "./subscriptions.ts";

export class Session extends SessionReads {
  private readonly pipeline: CommitPipeline;
  private readonly subscriptions: Subscriptions;
  private readonly scheduler: Scheduler | undefined;
  private readonly signalHost: SignalHost;
  private readonly retention: Retention | undefined;
  private currentStatus: SessionStatus = "open";
  private stopError: KernelError | undefined;
  /** The id source this session uses for new records. */
  readonly ids: IdSource;

  /** @internal Use {@link openSession}. */
  constructor(
    state: SessionState,
    /** `write` or `read`. */
    readonly mode: "write" | "read",
    private readonly storage: Storage,
    readonly registry: Registry,
    private readonly options: OpenSessionOptions,
  ) {
    super(state, storage);
    const clock = options.clock ?? systemClock;
    const timers = options.timers ?? systemTimers;
    this.ids = options.ids ?? randomIds;
    this.signalHost = {
      state,
      registry,
      commit: (build) => this.pipeline.commit(build),
      readSignal: (key) => this.readSignal(key),
      readTask: (taskId) => this.readTask(taskId),
      loadWait: (key) => this.parked.loadByKey(key),
      maxEarlySignals: options.maxEarlySignals ?? DEFAULT_EARLY_SIGNALS,
      now: () => clock.now(),
    };
    registerKernelCommit(this, (build, commitOptions) => this.kernelCommit(build, commitOptions));
    this.pipeline = new CommitPipeline({
      sessionId: state.id,
      state,
      storage,
      registry,
      clock,
      timers,
      deferredFlushMs: options.deferredFlushMs ?? 50,
      liveWaits: options.liveWaits ?? DEFAULT_LIVE_WAITS,
      readTask: (taskId) => this.readTask(taskId),
      ...(options.changeLogFloor && { changeLogFloor: options.changeLogFloor }),
      adopt: (sealed) => this.adopt(sealed),
      stop: (error) => this.stop(error),
    });
    this.subscriptions = new Subscriptions(
      () => this.state.version,
      (after) => this.history.readChanges(after, CHANGE_PAGE),
    );
    if (mode === "write") {
      this.scheduler = sessionScheduler(state, registry, options, {
        clock,
        timers,
        ids: this.ids,
        commit: (build, commitOptions) => this.kernelCommit(build, commitOptions),
        // Loss-tolerant: a lost progress commit is fine, and a stopped session just drops it.
        progress: (build) => void this.commit(build, { deferred: true }).catch(() => undefined),
        preview: (preview) => this.subscriptions.preview(preview),
        readEntries: (conversationId, fromSeq) => this.history.readEntriesFrom(conversationId, fromSeq),
        beforeEffect: (signal) =>
          options.effectGate ? options.effectGate(this.version, signal()) : Promise.resolve(),
        ...(options.host !== undefined && { hostKind: options.host }),
        loadDue: (now) => this.parked.loadDue(now),
        checkWait: (taskId, wait) => this.parked.checkWait(taskId, wait),
      });
      const policy = options.retention;
      if (policy) this.retention = new Retention({ state, storage, clock, policy, ...this.retentionHost() });
    }
  }
  protected override parkedLoaded(tasks: readonly Task[]): void {
    this.scheduler?.onLoaded(tasks);
  }

  get status(): SessionStatus {
    return this.currentStatus;
  }
  /** Why the session stopped, when it did. */
  get stoppedBecause(): KernelError | undefined {
    return this.stopError;
  }
  /** The clock this session stamps commits with. */
  get clock() {
    return this.options.clock ?? systemClock;
  }

  /**
   * Commits whatever `build` stages on the draft, atomically: entries, the app's documents, spawned tasks.
   * The promise resolves after storage confirmed the commit and the change was adopted and published. With
   * `{ deferred: true }` the build gets a {@link ProgressDraft} and may be batched or lost in a crash.
   */
  commit<T>(build: BuildCommit<T>): Promise<CommitResult<T>>;
  commit<T>(build: BuildProgress<T>, options: { readonly deferred: true }): Promise<CommitResult<T>>;
  commit<T>(build: BuildCommit<T>, options?: CommitOptions): Promise<CommitResult<T>>;
  commit<T>(build: BuildCommit<T> | BuildProgress<T>, options?: CommitOptions): Promise<CommitResult<T>> {
    if (options?.deferred) {
      const progress = build as BuildProgress<T>;
      return this.kernelCommit((draft) => progress(new ProgressOnlyDraft(draft)), { deferred: true });
    }
    const app = build as BuildCommit<T>;
    return this.kernelCommit((draft) => app(new AppDraft(draft, this.ids)));
  }

  /**
   * Accepts an input durably. A retry with the same `requestId` returns the original Submission and
   * creates no new work.
   */
  async submit(input: SubmitInput, options?: SubmitOptions): Promise<Submission> {
    this.assertUsable("submit");
    return submitOnce(this.pipeline, this.state, this.history, input, this.ids, options);
  }

  /**
   * Outside input for a key a task awaits (or will): the payload is validated against the key's
   * definition, then stored and handed to the waiting task in one commit. A repeat with the same payload
   * returns the first outcome; a different payload for a key that already has one is refused.
   */
  async signal(key: string, payload: unknown, options: SignalOptions): Promise<SignalReceipt> {
    this.assertUsable("signal");
    return deliverSignal(this.signalHost, key, payload, options);
  }

  /** What `signal()` would answer, without committing (read-only sessions too): a repeat's first outcome, or undefined. */
  async checkSignal(
    key: string,
    payload: unknown,
    options: SignalOptions,
  ): Promise<SignalReceipt | undefined> {
    return precheckSignal(this.signalHost, key, payload, options);
  }

  /**
   * Drops the early signal kept for `key` (one no wait has taken: see `earlySignals()`; with `version`, only
   * the one accepted then), in one commit, and returns it; undefined, committing nothing, when none is kept.
   * The key takes a new signal again.
   */
  async dropEarlySignal(key: string, options?: { version?: number }): Promise<Signal | undefined> {
    this.assertUsable("dropEarlySignal");
    return dropEarlySignal(this.signalHost, key, options?.version);
  }

  /** Creates a top-level task; it runs once the session is resumed. */
  async spawn(
    kind: string,
    input: Json,
    options: { id?: string; conversationId?: string } = {},
  ): Promise<Task> {
    const id = options.id ?? this.ids.next("task");
    const conversation =
      options.conversationId === undefined ? {} : { conversationId: options.conversationId };
    const task = { id, kind, input, ...conversation, ...(options.id !== undefined && { chosenId: true }) };
    await this.dispatchEvent({ type: "spawn", task }, "spawn");
    return this.state.task(id) as Task;
  }

  /**
   * Cancels a task and its owned children, durably: the intent is committed first, a running phase's
   * signal aborts, and the task ends `cancelled` once its children have.
   */
  async cancel(taskId: string, reason = "cancelled by request"): Promise<void> {
    if (this.mode === "write" && typeof taskId === "string") await this.parked.loadById(taskId);
    await this.dispatchEvent({ type: "cancel-requested", taskId, reason }, "cancel");
  }

  /** Cancels a Submission's task tree (or the Submission itself when it has no task). */
  async cancelSubmission(submissionId: string, reason = "cancelled by request"): Promise<Submission> {
    // One that left the working set has ended: cancelling it changes nothing.
    const evicted = this.state.submission(submissionId) ? undefined : await this.readSubmission(submissionId);
    if (evicted) return evicted;
    await this.dispatchEvent({ type: "submission-cancel-requested", submissionId, reason }, "cancel");
    return this.state.submission(submissionId) as Submission;
  }

  /** Starts driving unfinished work: recovers it (DESIGN §4), then runs ready phases. */
  async resume(): Promise<void> {
    this.assertUsable("resume");
    await this.scheduler?.resume();
    this.retention?.start();
  }

  /** Removes one batch of finished work the `retention` policy allows (DESIGN §9); without one, nothing. */
  collect(): Promise<CollectResult> {
    this.assertUsable("collect");
    return this.retention?.collect() ?? Promise.resolve({ removed: [], more: false });
  }

  /**
   * Resolves when the Submission has ended (succeeded, failed or cancelled). Only observes: safe to call
   * from any number of clients, and again after reconnecting.
   */
  wait(submissionId: string, options?: WaitOptions): Promise<Submission> {
    const find = () => this.state.submission(submissionId);
    const read = () => this.readSubmission(submissionId);
    return untilSubmissionEnded(this, submissionId, find, read, options?.signal);
  }

  /** Resolves with the task's record once it is terminal. Only observes. */
  async waitForTask(taskId: string, options?: WaitOptions): Promise<Task> {
    if (typeof taskId === "string") await this.parked.loadById(taskId);
    const find = () => this.state.task(taskId);
    const read = () => this.readTask(taskId);
    // A read-back parked wait is old: it may leave memory in the commit that ends it.
    return untilStoredEnded(this, `task ${taskId}`, find, read, isTerminal, options?.signal);
  }

  /** Resolves once the session has adopted `version` (a read-your-writes wait for remote clients). */
  waitForVersion(version: number, options?: WaitOptions): Promise<void> {
    const reached = () => (this.state.version >= version ? true : undefined);
    return observeUntil(this, reached, options?.signal).then(() => undefined);
  }

  /** Resolves once no phase is running and no scheduled work is pending (timed sleeps may remain). */
  whenIdle(): Promise<void> {
    return this.scheduler?.whenIdle() ?? Promise.resolve();
  }

  /**
   * What a process opening the session now would do on `resume()` (every running phase counts as cut
   * off), without doing it: the events it would dispatch, and the tasks it would leave alone.
   */
  previewRecovery(): RecoveryPlan {
    return planRecovery(this.state.tasks.values(), this.state, this.registry, {
      now: this.clock.now(),
      ...(this.options.maxRestarts !== undefined && { maxRestarts: this.options.maxRestarts }),
    });
  }

  /** Whether work is runnable now and when the next timed wake-up (a sleep or a wait's deadline) is. */
  wakeInfo(): WakeInfo {
    return this.scheduler?.wakeInfo() ?? { runnableNow: false, nextWakeAt: undefined };
  }

  /** Registers a task kind (or a new version); tasks blocked for want of it are scheduled. */
  registerTask(definition: Parameters<Registry["registerTask"]>[0]): void {
    this.registry.registerTask(definition);
  }

  /**
   * Delivers every committed change with version > `fromVersion`, in order, without gaps or duplicates:
   * first the missing ones from the change log, then live ones as they are committed.
   */
  subscribe(fromVersion: number, listener: ChangeListener, options?: SubscribeOptions): Unsubscribe {
    // Nothing more will be committed through a closed or stopped session: say so rather than wait forever.
    const ended = this.currentStatus === "open" ? undefined : this.unusable("subscribe");
    if (ended) {
      afterThisTick(() => options?.onError?.(ended));
      return () => undefined;
    }
    return this.subscriptions.subscribe(fromVersion, listener, options);
  }

  /**
   * Read-only sessions: adopts the changes other writers committed since this session's version.
   * Returns how many changes were adopted. Rejects with `HistoryTruncatedError` when the change log was
   * pruned past this session's version (it lagged too far behind its writer): this session cannot catch
   * up and its subscribers are ended with the same error — open the session again for a fresh view.
   */
  async refresh(): Promise<number> {
    const unusable = this.currentStatus === "open" ? undefined : this.unusable("refresh");
    if (unusable) throw unusable;
    if (this.mode !== "read") return 0;
    try {
      return await this.history.adoptNewChanges((commit) =>
        this.adopt({ commit, documentValues: new Map() }),
      );
    } catch (error) {
      if (error instanceof HistoryTruncatedError) this.subscriptions.end(error);
      throw error;
    }
  }

  /** Commits pending deferred changes now. */
  flush(): Promise<void> {
    return this.pipeline.flush();
  }

  /**
   * Stops using the session: commits pending deferred changes, writes the records still in the change log
   * only into their rows (so readers need not read the log's tail), then ends subscriptions. Unfinished work
   * stays stored.
   */
  async close(): Promise<void> {
    if (this.currentStatus !== "open") return;
    this.scheduler?.close();
    if (this.mode === "write") {
      await this.pipeline.flush().catch(() => undefined);
      // Best effort: the log already holds these commits, so a checkpoint that fails loses nothing.
      await this.storage.checkpoint?.(writerGuard(this.id, this.state)).catch(() => undefined);
    }
    this.currentStatus = "closed";
    const closed = new SessionClosedError(this.id);
    this.pipeline.fail(closed);
    this.subscriptions.end();
  }

  /** A commit on the kernel's own draft; the scheduler's and the task machine's way in. */
  private kernelCommit<T>(build: KernelCommit<T>, options?: KernelCommitOptions): Promise<CommitResult<T>> {
    const unusable = this.unusable("commit");
    if (unusable) return Promise.reject(unusable);
    return this.pipeline.commit(build, options);
  }

  /** Commits one task-machine event; the machine refuses (with a typed error) what does not apply. */
  private async dispatchEvent(event: TaskEvent, what: string): Promise<void> {
    this.assertUsable(what);
    await this.pipeline.commit((draft) => dispatch(draft, event));
  }

  private adopt(sealed: SealedCommit): void {
    reduceSession(this.state, {
      type: "committed",
      commit: sealed.commit,
      documentValues: sealed.documentValues,
    });
    this.subscriptions.publish(sealed.commit);
    this.scheduler?.onCommitted(sealed.commit);
    this.retention?.observe(sealed.commit);
  }

  private retentionHost() {
    return {
      commit: (build: KernelCommit<void>) => this.kernelCommit(build),
      usable: () => this.currentStatus === "open",
    };
  }

  private stop(error: KernelError): void {
    this.scheduler?.close("the session stopped after a storage failure");
    this.currentStatus = "stopped";
    this.stopError = error;
    this.subscriptions.end(new SessionStoppedError(this.id, { cause: error }));
  }

  private assertUsable(what: string): void {
    const unusable = this.unusable(what);
    if (unusable) throw unusable;
  }

  private unusable(what: string): KernelError | undefined {
    if (this.currentStatus === "closed") return new SessionClosedError(this.id);
    if (this.currentStatus === "stopped") return new SessionStoppedError(this.id, { cause: this.stopError });
    if (this.mode === "read") return new ReadOnlyError(this.id, what);
    return undefined;
  }
}
