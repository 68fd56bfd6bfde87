/**
 * The scheduler: runs every ready phase concurrently, outside any commit, and commits each phase's
 * transition through the session's serialized pipeline. It holds no state of its own that matters for
 * recovery — what runs next is always read from committed task records.
 */

import type { z } from "zod";
import type { Clock, IdSource, TimerHandle, Timers } from "../clock.ts";
import { afterThisTick } from "../clock.ts";
import { KernelError } from "../errors.ts";
import type { CommitRecord, Entry, Task } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { BuildCommit, CommitOptions, CommitResult } from "../session/commit-pipeline.ts";
import type { SessionState } from "../session/state.ts";
import type { TaskDefinition, Transition } from "./define-task.ts";
import { PhaseContextImpl } from "./phase-context.ts";
import { applyRecovery, planRecovery } from "./recovery.ts";
import { applyTransition, endTask, errorInfo, reenter } from "./transitions.ts";
import { WakeQueue } from "./wake-queue.ts";

/** Reported to the host after every commit: is there work to run now, and when is the next timed wake-up. */
export interface WakeInfo {
  readonly runnableNow: boolean;
  readonly nextWakeAt: number | undefined;
}

/** What the scheduler needs from its session. */
export interface SchedulerHost {
  readonly state: SessionState;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly ids: IdSource;
  commit<T>(build: BuildCommit<T>, options?: CommitOptions): Promise<CommitResult<T>>;
  /** Committed entries of a conversation from `fromSeq` on (memory first, then storage). */
  readEntries(conversationId: string, fromSeq: number): Promise<Entry[]>;
  block(taskId: string, reason: string): void;
  unblock(taskId: string): void;
}

export interface SchedulerOptions {
  /** Called after every commit with the current wake info (hosts turn it into timers or alarms). */
  readonly onWake?: (wake: WakeInfo) => void;
  /** Default restart limit for kinds that do not set `maxRestarts`. */
  readonly maxRestarts?: number;
}

type PhaseOutcome = {
  readonly transition: Transition;
  readonly staged: PhaseContextImpl<unknown, unknown>["staged"];
};

export class Scheduler {
  private readonly active = new Map<string, PhaseAbort>();
  private readonly ready = new Set<string>();
  private readonly sleepers = new WakeQueue();
  private timer: TimerHandle | undefined;
  private timerDue: number | undefined;
  private driving = false;
  private drainScheduled = false;
  /** Tasks stored as running when this process opened the session: only their phases can have been cut off. */
  private readonly runningAtLoad = new Set<string>();
  private readonly wasInterrupted = (task: Task) => this.runningAtLoad.has(task.id);
  private busy = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly parsedInputs = new Map<
    string,
    { version: number; parsed: ReturnType<z.ZodType["safeParse"]> }
  >();
  private readonly stopWatchingRegistry: () => void;

  constructor(
    private readonly host: SchedulerHost,
    private readonly options: SchedulerOptions = {},
  ) {
    for (const task of host.state.tasks.values()) {
      if (task.state.status === "sleeping") this.sleepers.push(task.state.until, task.id);
      if (task.state.status === "running") this.runningAtLoad.add(task.id);
    }
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
      if (isTerminal(task)) this.parsedInputs.delete(task.id);
      if (status === "running") this.ready.add(task.id);
      else if (status === "sleeping") this.sleepers.push(task.state.until, task.id);
      if (task.cancelRequested !== undefined) {
        this.active
          .get(task.id)
          ?.abort(new KernelError("session-closed", `cancelled: ${task.cancelRequested}`));
      }
    }
    if (this.driving) {
      this.scheduleDrain();
      this.armTimer();
    }
    this.report();
  }

  /** The current wake info. */
  wakeInfo(): WakeInfo {
    const state = this.host.state;
    let blockedRunnable = 0; // blocked tasks are few; the running/pending count is kept by the reducer
    for (const id of state.blockedTasks.keys()) {
      const status = state.task(id)?.state.status;
      if (status === "running" || status === "pending") blockedRunnable++;
    }
    let runnableNow = this.active.size > 0 || this.ready.size > 0 || state.runnableTasks > blockedRunnable;
    const next = this.sleepers.peek((at, id) => this.isSleeping(id, at));
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
    const plan = planRecovery(
      tasks,
      state,
      registry,
      this.host.clock.now(),
      this.options.maxRestarts,
      this.wasInterrupted,
    );
    for (const action of plan) if (action.kind === "blocked") this.host.block(action.taskId, action.reason);
    const needsCommit = plan.some((a) => a.kind !== "blocked" && a.kind !== "sleep-until");
    if (!needsCommit) return;
    const { value: failed } = await this.host.commit((draft) => applyRecovery(draft, registry, plan));
    for (const [taskId, reason] of failed) this.host.block(taskId, reason);
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
      this.ready.delete(id);
      if (state.blockedTasks.has(id)) continue;
      const task = state.task(id);
      if (task?.state.status === "running") this.start(task);
    }
    this.settleIdle();
  }

  private start(task: Task): void {
    const controller = new PhaseAbort();
    this.active.set(task.id, controller);
    void this.runPhase(task, controller).finally(() => {
      this.active.delete(task.id);
      this.drain();
      this.report();
    });
  }

  private async runPhase(task: Task, controller: PhaseAbort): Promise<void> {
    const outcome = await this.executePhase(task, controller);
    if (!outcome || !this.driving) return; // closed or stopped meanwhile: the task stays stored as running
    const { registry } = this.host;
    try {
      await this.host.commit((draft) => {
        for (const change of outcome.staged) change(draft);
        const current = draft.task(task.id);
        if (
          current?.cancelRequested !== undefined &&
          controller.aborted &&
          outcome.transition.type === "fail"
        ) {
          endTask(draft, current, { status: "cancelled", reason: current.cancelRequested });
        } else applyTransition(draft, registry, task.id, outcome.transition);
      });
    } catch (error) {
      if (!this.driving || isSessionFailure(error)) return;
      // What the phase staged or returned does not validate: the task fails with that reason instead.
      await this.host
        .commit((draft) => {
          const current = draft.task(task.id);
          if (current && !isTerminal(current))
            endTask(draft, current, { status: "failed", error: errorInfo(error, "invalid-transition") });
        })
        .catch(() => undefined);
    }
  }

  private async executePhase(task: Task, controller: PhaseAbort): Promise<PhaseOutcome | undefined> {
    const { registry, state, clock, ids } = this.host;
    const resolution = registry.resolveTask(task.kind, task.kindVersion);
    if (!resolution.ok) {
      this.host.block(task.id, resolution.reason);
      return undefined;
    }
    const definition = resolution.definition;
    const phase = definition.phases[task.checkpoint.phase];
    const failure = (code: string, message: string): PhaseOutcome => ({
      transition: { type: "fail", error: { name: "TaskError", code, message } },
      staged: [],
    });
    if (!phase)
      return failure("unknown-phase", `task kind "${task.kind}" has no phase "${task.checkpoint.phase}"`);
    const input = this.parseInput(definition, task);
    if (!input.success)
      return failure("invalid-input", `stored input does not match "${task.kind}": ${input.error.message}`);
    const context = new PhaseContextImpl(
      task,
      input.data,
      () => controller.signal,
      clock,
      state,
      registry,
      ids,
      {
        readEntries: (conversationId, fromSeq) => this.host.readEntries(conversationId, fromSeq),
        progress: (build) => {
          // Loss-tolerant: a lost progress commit is fine, and a stopped session just drops it.
          this.host.commit(build, { deferred: true }).catch(() => undefined);
        },
      },
    );
    try {
      return { transition: await phase(context), staged: context.staged };
    } catch (error) {
      if (!this.driving) return undefined;
      return { transition: { type: "fail", error: errorInfo(error) }, staged: [] };
    }
  }

  /**
   * A task's input only changes by migration (which changes its kind version), so it is parsed once per
   * task and version rather than on every phase of a long chain.
   */
  private parseInput(definition: TaskDefinition<unknown, unknown>, task: Task) {
    const cached = this.parsedInputs.get(task.id);
    if (cached && cached.version === task.kindVersion) return cached.parsed;
    const parsed = definition.input.safeParse(task.input);
    this.parsedInputs.set(task.id, { version: task.kindVersion, parsed });
    return parsed;
  }

  private armTimer(): void {
    const next = this.sleepers.peek((at, id) => this.isSleeping(id, at));
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
      Math.max(0, next.at - this.host.clock.now()),
    );
  }

  private async wakeDue(): Promise<void> {
    if (!this.driving) return;
    const now = this.host.clock.now();
    const due: string[] = [];
    for (;;) {
      const next = this.sleepers.peek((at, id) => this.isSleeping(id, at));
      if (!next || next.at > now) break;
      this.sleepers.pop();
      if (!this.host.state.blockedTasks.has(next.id)) due.push(next.id);
    }
    if (due.length > 0) {
      await this.host
        .commit((draft) => {
          for (const id of due) {
            const task = draft.task(id);
            if (task?.state.status === "sleeping")
              reenter(draft, task, task.checkpoint.phase, task.checkpoint.data, false);
          }
        })
        .catch(() => undefined);
    }
    this.armTimer();
  }

  private isSleeping(id: string, at: number): boolean {
    const state = this.host.state.task(id)?.state;
    return state?.status === "sleeping" && state.until === at;
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

/** A phase's abort: the AbortController is only made if the phase looks at its signal (most never do). */
class PhaseAbort {
  private controller: AbortController | undefined;
  private reason: unknown;
  aborted = false;

  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    if (this.aborted && !this.controller.signal.aborted) this.controller.abort(this.reason);
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}

function isSessionFailure(error: unknown): boolean {
  return (
    error instanceof KernelError &&
    [
      "session-stopped",
      "session-closed",
      "stale-owner",
      "storage-failed",
      "quota-exceeded",
      "storage-closed",
    ].includes(error.code)
  );
}
