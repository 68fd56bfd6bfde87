/**
 * The scheduler decides *what runs when*: it runs every ready phase concurrently, outside any commit, and
 * turns what happened into task-machine events (a phase ended, a sleeper is due, recovery on resume),
 * committed through the session's serialized pipeline. It holds no state of its own that matters for
 * recovery — what runs next is always read from committed task records.
 */
import type { Clock, IdSource, TimerHandle, Timers } from "../clock.ts";
import { afterThisTick } from "../clock.ts";
import { isSessionFailure, KernelError } from "../errors.ts";
import type { CommitRecord, Entry, Signal, Task } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { KernelCommit, KernelCommitOptions } from "../session/commit-pipeline.ts";
import type { ProgressDraft } from "../session/draft-types.ts";
import type { WaitCheck } from "../session/parked-waits.ts";
import type { SessionState } from "../session/state.ts";
import { dropExpired } from "../signals/keep-early.ts";
import { errorInfo } from "./error-info.ts";
import { ExclusiveKeys } from "./exclusive-keys.ts";
import { dispatch, isApplicable, type TaskEvent } from "./machine.ts";
import { PhaseAbort, PhaseRunner } from "./phase-runner.ts";
import type { Preview } from "./preview.ts";
import { applyRecovery, planRecovery } from "./recovery.ts";
import { expiryEntry, isCurrentSleeper, keyOfExpiry, PARKED, timerDelay } from "./sleepers.ts";
import { isRunnableStatus, type WakeInfo, wakeTimeOf } from "./wake-info.ts";
import { WakeQueue } from "./wake-queue.ts";

export type { WakeInfo } from "./wake-info.ts";

/** What the scheduler needs from its session. */
export interface SchedulerHost {
  readonly state: SessionState;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly ids: IdSource;
  commit<T>(build: KernelCommit<T>, options?: KernelCommitOptions): Promise<{ value: T; version: number }>;
  /** Commits loss-tolerant progress as a deferred commit (progress documents only). */
  progress(build: (draft: ProgressDraft) => void): void;
  /** Hands a preview (uncommitted output) to the session's live listeners. */
  preview(preview: Preview): void;
  /** Committed entries of a conversation from `fromSeq` on (memory first, then storage). */
  readEntries(conversationId: string, fromSeq: number): Promise<Entry[]>;
  /** Resolves when an outside effect may start (see `PhaseContext.beforeEffect`). */
  beforeEffect(signal: () => AbortSignal): Promise<void>;
  readonly hostKind?: "browser" | "edge";
  block(taskId: string, reason: string): void;
  unblock(taskId: string): void;
  /** Reads back the parked waits due by `now` from storage (`session/parked-waits.ts`). */
  loadDue?(now: number): Promise<void>;
  /** Reads what storage holds of a wait's keys before its commit; answers the check its commit makes. */
  checkWait?(taskId: string, wait: { keys: readonly string[]; mode: "any" | "all" }): Promise<WaitCheck>;
}

export interface SchedulerOptions {
  /** Called after every commit with the current wake info (hosts turn it into timers or alarms). */
  readonly onWake?: (wake: WakeInfo) => void;
  /** Default restart limit for kinds that do not set `maxRestarts`. */
  readonly maxRestarts?: number;
}

export class Scheduler {
  private readonly active = new Map<string, PhaseAbort>();
  /** Who holds each exclusive key, and who is queued for it (`TaskDefinition.exclusiveKey`). */
  private readonly exclusive: ExclusiveKeys;
  private readonly ready = new Set<string>();
  private readonly sleepers = new WakeQueue();
  private readonly runner: PhaseRunner;
  private timer: TimerHandle | undefined;
  private timerDue: number | undefined;
  private driving = false;
  private drainScheduled = false;
  /** Tasks stored as running when this process opened the session: only their phases can have been cut off. */
  private readonly runningAtLoad = new Set<string>();
  private readonly wasInterrupted = (task: Task) => this.runningAtLoad.has(task.id);
  private busy = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly stopWatchingRegistry: () => void;
  private readonly isCurrentSleeper = (at: number, id: string) => isCurrentSleeper(this.host, id, at);

  constructor(
    private readonly host: SchedulerHost,
    private readonly options: SchedulerOptions = {},
  ) {
    this.exclusive = new ExclusiveKeys({
      state: host.state,
      commit: (build) => host.commit(build),
      track: (work) => void this.track(work),
      isDriving: () => this.driving,
      isActive: (taskId) => this.active.has(taskId),
    });
    this.runner = new PhaseRunner({
      state: host.state,
      registry: host.registry,
      clock: host.clock,
      timers: host.timers,
      ids: host.ids,
      readEntries: (conversationId, fromSeq) => host.readEntries(conversationId, fromSeq),
      progress: (build) => host.progress(build),
      preview: (preview) => host.preview(preview),
      beforeEffect: (signal) => host.beforeEffect(signal),
      ...(host.hostKind !== undefined && { hostKind: host.hostKind }),
    });
    for (const task of host.state.tasks.values()) {
      const at = wakeTimeOf(task);
      if (at !== undefined) this.sleepers.push(at, task.id);
      if (task.state.status === "running") this.runningAtLoad.add(task.id);
    }
    if (host.state.parkedDue !== undefined) this.sleepers.push(host.state.parkedDue, PARKED);
    for (const signal of host.state.signals.values()) this.noteSignal(signal);
    // Unsubscribed on close: the registry usually outlives the session (one per app or isolate), and a
    // listener left behind would keep the closed session's whole state reachable.
    this.stopWatchingRegistry = host.registry.onChange(() => {
      if (this.driving) void this.track(this.unblockRegistered());
    });
  }

  /** Whether the scheduler is driving work. */
  get isDriving(): boolean {
    return this.driving;
  }

  /** Recovers unfinished work (DESIGN §4) and starts driving it. Idempotent. */
  async resume(): Promise<void> {
    if (this.driving) return;
    this.driving = true;
    await this.track(this.recover([...this.host.state.tasks.values()]));
    for (const task of this.host.state.tasks.values())
      if (task.state.status === "running") this.ready.add(task.id);
    this.drain();
    this.armTimer();
    this.report();
  }

  /** Stops driving: aborts running phases (their results are not committed) and keeps all work stored. */
  close(reason = "the host closed the session"): void {
    this.driving = false;
    this.stopWatchingRegistry();
    for (const controller of this.active.values())
      controller.abort(new KernelError("session-closed", reason));
    if (this.timer !== undefined) this.host.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerDue = undefined;
    this.ready.clear();
    this.settleIdle();
  }

  /** Called after each commit is adopted. */
  onCommitted(commit: CommitRecord): void {
    for (const task of commit.tasks) {
      const status = task.state.status;
      if (isTerminal(task)) this.runner.forget(task.id);
      if (status === "running") this.ready.add(task.id);
      if (status === "pending" && this.driving) {
        const key = this.exclusiveKeyOf(task);
        if (key !== undefined) this.exclusive.enqueue(task, key);
      }
      const at = wakeTimeOf(task);
      if (at !== undefined) this.sleepers.push(at, task.id);
      this.active.get(task.id)?.abortIfCancelled(task);
    }
    for (const signal of commit.signals ?? []) this.noteSignal(signal);
    if (this.driving) {
      this.scheduleDrain();
      this.armTimer();
    }
    this.report();
  }

  /** Parked waits were read back from storage: their deadlines are kept like any other. */
  onLoaded(tasks: readonly Task[]): void {
    // Recovered like an open's tasks, ahead of the commit they were read back for; a failed recovery blocks them.
    const blockAll = (error: unknown) => {
      if (!isSessionFailure(error))
        for (const { id } of tasks) this.host.block(id, `recovery failed: ${errorInfo(error).message}`);
    };
    if (this.driving) void this.track(this.recover([...tasks]).then(() => this.armTimer(), blockAll));
  }

  /** The current wake info (the same rule as `wakeInfoOf`, from counters kept as commits are adopted). */
  wakeInfo(): WakeInfo {
    const state = this.host.state;
    let blockedRunnable = 0; // blocked tasks are few; the running/pending count is kept by the reducer
    for (const id of state.blockedTasks.keys()) {
      const status = state.task(id)?.state.status;
      if (status !== undefined && isRunnableStatus(status)) blockedRunnable++;
    }
    let runnableNow = this.active.size > 0 || this.ready.size > 0 || state.runnableTasks > blockedRunnable;
    const next = this.sleepers.peek(this.isCurrentSleeper);
    if (next && next.at <= this.host.clock.now()) runnableNow = true;
    return { runnableNow, nextWakeAt: next?.at };
  }

  /** Resolves once no phase runs and no scheduled work is pending (timed sleeps may remain). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async recover(tasks: Task[]): Promise<void> {
    const { state, registry } = this.host;
    const plan = planRecovery(tasks, state, registry, {
      now: this.host.clock.now(),
      ...(this.options.maxRestarts !== undefined && { maxRestarts: this.options.maxRestarts }),
      interrupted: this.wasInterrupted,
    });
    for (const { taskId, reason } of plan.blocked) this.host.block(taskId, reason);
    for (const { taskId, until } of plan.sleeping) this.sleepers.push(until, taskId);
    for (const { taskId, until } of plan.awaiting) if (until !== undefined) this.sleepers.push(until, taskId);
    if (plan.events.length > 0) await this.host.commit((draft) => applyRecovery(draft, plan));
  }

  /** A kind was registered: tasks blocked on it may run now. */
  private async unblockRegistered(): Promise<void> {
    const { state, registry } = this.host;
    const candidates: Task[] = [];
    for (const taskId of [...state.blockedTasks.keys()]) {
      const task = state.task(taskId);
      if (task && registry.resolveTask(task.kind, task.kindVersion).ok) {
        this.host.unblock(taskId);
        candidates.push(task);
      }
    }
    if (candidates.length === 0) return;
    await this.recover(candidates);
    for (const task of candidates) this.ready.add(task.id);
    this.drain();
    this.armTimer();
  }

  private scheduleDrain(): void {
    if (this.drainScheduled) return;
    this.drainScheduled = true;
    // After the current commit settles, so a phase's own commit has released it before it is restarted.
    afterThisTick(() => {
      this.drainScheduled = false;
      this.drain();
    });
  }

  private drain(): void {
    if (!this.driving) {
      this.settleIdle();
      return;
    }
    const { state } = this.host;
    for (const id of this.ready) {
      // Still finishing its previous phase: stays ready, and `start`'s cleanup drains again.
      if (this.active.has(id)) continue;
      const task = state.task(id);
      this.ready.delete(id);
      if (state.blockedTasks.has(id) || task?.state.status !== "running") continue;
      const key = this.exclusiveKeyOf(task);
      // Another phase of its key runs: it is queued (stored), and started when that one ends.
      if (key === undefined || this.exclusive.mayStart(id, key)) this.start(task, key);
    }
    this.settleIdle();
  }

  private exclusiveKeyOf(task: Task): string | undefined {
    if (task.state.status !== "running" && task.state.status !== "pending") return undefined;
    const resolution = this.host.registry.resolveTask(task.kind, task.kindVersion);
    return resolution.ok ? resolution.definition.exclusiveKey?.(task) : undefined;
  }

  private start(task: Task, key: string | undefined): void {
    const abort = new PhaseAbort();
    abort.abortIfCancelled(task); // its cancel was committed before this phase started (a restart)
    this.active.set(task.id, abort);
    if (key !== undefined) this.exclusive.hold(key, task.id);
    void this.runPhase(task, abort).finally(() => {
      this.active.delete(task.id);
      if (key !== undefined) this.exclusive.release(key, task.id);
      this.drain();
      this.report();
    });
  }

  private async runPhase(task: Task, abort: PhaseAbort): Promise<void> {
    const resolution = this.host.registry.resolveTask(task.kind, task.kindVersion);
    if (!resolution.ok) {
      this.host.block(task.id, resolution.reason);
      return;
    }
    const { transition, staged } = await this.runner.run(task, resolution.definition, abort);
    // A wait about to begin checks its keys: a parked wait in storage may hold one, a taken signal spend it.
    const check = transition.type === "await" ? await this.host.checkWait?.(task.id, transition) : undefined;
    if (!this.driving) return; // closed or stopped meanwhile: the task stays stored as running
    const ended: TaskEvent = { type: "phase-ended", taskId: task.id, transition, aborted: abort.aborted };
    try {
      await this.host.commit((draft) => {
        for (const change of staged) change(draft);
        const refused = check?.(draft);
        dispatch(draft, refused ? { ...ended, transition: { type: "fail", error: refused } } : ended);
      });
    } catch (error) {
      if (!this.driving || isSessionFailure(error)) return;
      // What the phase staged or returned does not validate: the task fails with that reason instead.
      const failed: TaskEvent = {
        type: "phase-failed",
        taskId: task.id,
        error: errorInfo(error, "invalid-transition"),
      };
      await this.host
        .commit((draft) => {
          if (isApplicable(draft, failed)) dispatch(draft, failed);
        })
        .catch(() => undefined);
    }
  }

  private armTimer(): void {
    const next = this.sleepers.peek(this.isCurrentSleeper);
    if (!next || !this.driving) return;
    if (this.timer !== undefined && this.timerDue !== undefined && this.timerDue <= next.at) return;
    if (this.timer !== undefined) this.host.timers.clearTimeout(this.timer);
    this.timerDue = next.at;
    this.timer = this.host.timers.setTimeout(
      () => {
        this.timer = undefined;
        this.timerDue = undefined;
        void this.track(this.wakeDue());
      },
      timerDelay(next.at, this.host.clock.now()),
    );
  }

  private async wakeDue(): Promise<void> {
    if (!this.driving) return;
    const now = this.host.clock.now();
    const { state } = this.host;
    if (state.parkedDue !== undefined && state.parkedDue <= now && this.host.loadDue) {
      await this.host.loadDue(now).catch(() => undefined); // tried again a little later (see `loadDue`)
      if (state.parkedDue !== undefined) this.sleepers.push(state.parkedDue, PARKED);
    }
    const due: TaskEvent[] = [];
    const expired: string[] = [];
    for (;;) {
      const next = this.sleepers.peek(this.isCurrentSleeper);
      if (!next || next.at > now) break;
      this.sleepers.pop();
      const key = keyOfExpiry(next.id);
      if (key !== undefined) expired.push(key);
      if (next.id === PARKED || key !== undefined) continue;
      const task = this.host.state.task(next.id);
      if (task?.state.status === "awaiting" && task.state.deadline)
        due.push({ type: "deadline-passed", taskId: next.id, phase: task.state.deadline.phase });
      else due.push({ type: "woke", taskId: next.id, phase: task?.checkpoint.phase ?? "" });
    }
    if (due.length > 0 || expired.length > 0) {
      await this.host
        .commit((draft) => {
          for (const event of due) if (isApplicable(draft, event)) dispatch(draft, event);
          dropExpired(draft, expired, now);
        })
        .catch(() => undefined);
    }
    this.armTimer();
  }

  /** An early signal with a `keepEarlyMs` wakes the scheduler when it is to be dropped. */
  private noteSignal(signal: Signal): void {
    const entry = expiryEntry(this.host.registry, signal);
    if (entry) this.sleepers.push(entry.at, entry.id);
  }

  private async track(work: Promise<void>): Promise<void> {
    this.busy++;
    try {
      await work;
    } finally {
      this.busy--;
      this.settleIdle();
    }
  }

  private isIdle(): boolean {
    return (
      this.active.size === 0 &&
      this.busy === 0 &&
      !this.drainScheduled &&
      (this.ready.size === 0 || !this.driving)
    );
  }

  private settleIdle(): void {
    if (!this.isIdle() || this.idleWaiters.length === 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private report(): void {
    this.options.onWake?.(this.wakeInfo());
  }
}
