/**
 * Exclusive keys (`TaskDefinition.exclusiveKey`): phases with the same key never run at the same time in a
 * session. A task whose key another phase holds is queued — stored `pending` by the `queued` event, so a
 * process that dies meanwhile leaves a task that never started, not one cut off (it is not recovered as
 * interrupted, and its restart is not counted) — and when the key is free again, the first task queued for
 * it is started (`started`), holding the key until its phase has run.
 */
import type { Task } from "../records/schemas.ts";
import type { KernelCommit } from "../session/commit-pipeline.ts";
import type { SessionState } from "../session/state.ts";
import { dispatch, isApplicable, type TaskEvent } from "./machine.ts";

/** What the keys need from their scheduler. */
export interface ExclusiveHost {
  readonly state: SessionState;
  commit<T>(build: KernelCommit<T>): Promise<{ value: T; version: number }>;
  /** Counts `work` as the scheduler's (idle only once it settled). */
  track(work: Promise<void>): void;
  isDriving(): boolean;
  /** Whether the task's phase runs now in this process. */
  isActive(taskId: string): boolean;
}

export class ExclusiveKeys {
  /** The task holding each key: its phase runs, or it is being started from the queue. */
  private readonly held = new Map<string, string>();
  /** Tasks queued (stored `pending`) for each key, in the order they queued. */
  private readonly queued = new Map<string, string[]>();

  constructor(private readonly host: ExclusiveHost) {}

  /**
   * Whether `taskId` may run its phase of `key` now. If another holds the key it is stored as queued (or,
   * asked to stop and never run, cancelled: the `queued` event decides).
   */
  mayStart(taskId: string, key: string): boolean {
    const holder = this.held.get(key);
    if (holder === undefined || holder === taskId) return true;
    // Only if, when the commit is built, its phase still has not started here (it may have been made ready
    // again and started meanwhile).
    const notStarted = () => !this.host.isActive(taskId) && this.held.get(key) !== taskId;
    void this.commitIfApplicable({ type: "queued", taskId }, notStarted);
    return false;
  }

  /** `taskId`'s phase of `key` starts. */
  hold(key: string, taskId: string): void {
    this.held.set(key, taskId);
  }

  /** `taskId`'s phase ended: the key goes to the first task queued for it. */
  release(key: string, taskId: string): void {
    if (this.held.get(key) !== taskId) return;
    this.held.delete(key);
    this.startNext(key);
  }

  /** A task was stored as queued for `key`: it starts once the key is free (now, if it already is). */
  enqueue(task: Task, key: string): void {
    const line = this.queued.get(key) ?? [];
    if (!line.includes(task.id)) line.push(task.id);
    this.queued.set(key, line);
    if (!this.held.has(key)) this.startNext(key);
  }

  private startNext(key: string): void {
    const { state } = this.host;
    const line = this.queued.get(key) ?? [];
    let next: Task | undefined;
    while (!next && line.length > 0) {
      const task = state.task(line.shift() as string);
      if (task?.state.status === "pending" && !state.blockedTasks.has(task.id)) next = task;
    }
    if (line.length === 0) this.queued.delete(key);
    if (!next || !this.host.isDriving()) return;
    const taskId = next.id;
    this.held.set(key, taskId);
    const started: TaskEvent = { type: "started", taskId, phase: next.checkpoint.phase };
    this.host.track(
      this.commitIfApplicable(started).then((ran) => {
        // Not started after all (cancelled meanwhile, or the session stopped): the key goes to the next.
        if (!ran && this.held.get(key) === taskId) {
          this.held.delete(key);
          this.startNext(key);
        }
      }),
    );
  }

  /** Commits `event` if it still applies; resolves whether it was committed (never rejects). */
  private commitIfApplicable(event: TaskEvent, still: () => boolean = () => true): Promise<boolean> {
    const committed = this.host
      .commit((draft) => {
        if (!isApplicable(draft, event) || !still()) return false;
        dispatch(draft, event);
        return true;
      })
      .then(
        ({ value }) => value,
        () => false,
      );
    this.host.track(committed.then(() => undefined));
    return committed;
  }
}
