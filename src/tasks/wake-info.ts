/**
 * Wake info (DESIGN §6): is there work to run now, and when is the next timed wake-up. One definition,
 * used by the scheduler (from its counters, in O(1)) and by anything that derives it from a view.
 */
import type { Task, TaskStatus } from "../records/schemas.ts";

/** Reported to the host after every commit: is there work to run now, and when is the next timed wake-up. */
export interface WakeInfo {
  readonly runnableNow: boolean;
  readonly nextWakeAt: number | undefined;
}

/** Statuses whose phase should be executing now. */
export function isRunnableStatus(status: TaskStatus): boolean {
  return status === "running" || status === "pending";
}

/** When a task wakes by itself, if it does: a sleeper's time, or the deadline of a wait. */
export function wakeTimeOf(task: Task): number | undefined {
  if (task.state.status === "sleeping") return task.state.until;
  if (task.state.status === "awaiting") return task.state.deadline?.at;
  return undefined;
}

/** Wake info with the tasks behind it, derived from task records (devtools, tests). */
export interface WakeDetails extends WakeInfo {
  /** Runnable tasks that are not blocked. */
  readonly runnable: readonly string[];
  /** Tasks that wake by themselves (sleepers, waits with a deadline), earliest first. */
  readonly sleeping: readonly Task[];
}

/**
 * Wake info of a set of task records, the way the scheduler reports it: runnable now if an unblocked task
 * is running or pending or a sleeper is due at `now`; the next wake-up is the earliest sleeper's time.
 */
export function wakeInfoOf(
  tasks: Iterable<Task>,
  blocked: ReadonlySet<string>,
  now: number = Number.NEGATIVE_INFINITY,
): WakeDetails {
  const runnable: string[] = [];
  const sleeping: Task[] = [];
  for (const task of tasks) {
    if (isRunnableStatus(task.state.status) && !blocked.has(task.id)) runnable.push(task.id);
    if (wakeTimeOf(task) !== undefined && !blocked.has(task.id)) sleeping.push(task);
  }
  sleeping.sort((a, b) => (wakeTimeOf(a) ?? 0) - (wakeTimeOf(b) ?? 0));
  const first = sleeping[0];
  const nextWakeAt = first === undefined ? undefined : wakeTimeOf(first);
  return {
    runnableNow: runnable.length > 0 || (nextWakeAt !== undefined && nextWakeAt <= now),
    nextWakeAt,
    runnable,
    sleeping,
  };
}
