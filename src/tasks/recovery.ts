/**
 * What reopening does to each unfinished task (DESIGN §4), as a plan: the list of task-machine events
 * `resume()` dispatches, in order, plus the tasks it leaves alone (blocked, still asleep). The recovery
 * preview of devtools and the edge API is this same plan.
 */
import { ensureError } from "../errors.ts";
import type { Task } from "../records/schemas.ts";
import { isTerminal, TaskSchema } from "../records/schemas.ts";
import type { Registry, TaskResolution } from "../registry.ts";
import type { KernelDraft } from "../session/draft.ts";
import type { StateReader } from "../session/state.ts";
import { restartLimitOf } from "./define-task.ts";
import { dispatch, isApplicable, type RecoveryEvent } from "./machine.ts";

/** A task recovery cannot run: unknown kind, unmigratable version. It is kept as it is. */
export interface BlockedTask {
  readonly taskId: string;
  readonly reason: string;
}

/** What resume() will do. */
export interface RecoveryPlan {
  /** The events resume() dispatches, in this order (one that an earlier one made moot is skipped). */
  readonly events: readonly RecoveryEvent[];
  /** Tasks that stay as they are until their kind or a migration is registered. */
  readonly blocked: readonly BlockedTask[];
  /** Sleepers whose time has not come: they wake on their timer (or alarm). */
  readonly sleeping: readonly { readonly taskId: string; readonly until: number }[];
  /**
   * Tasks waiting for outside input (signals): left as they are. `until` is a deadline not yet due (it is
   * armed like a sleeper); a deadline already due is a `deadline-passed` event instead.
   */
  readonly awaiting: readonly AwaitingTask[];
}

/** A task recovery leaves waiting for its signals. */
export interface AwaitingTask {
  readonly taskId: string;
  readonly keys: readonly string[];
  readonly mode: "any" | "all";
  /** Keys whose signal already came (an `all` wait that is still short of some). */
  readonly received: readonly string[];
  readonly until?: number;
}

export interface PlanOptions {
  readonly now: number;
  /** Restart limit for kinds that set none. */
  readonly maxRestarts?: number;
  /**
   * Whether a running task's phase may have been cut off by a process that died; by default every running
   * task was (a reader sees only storage). A writer passes "was running when this process loaded the
   * session": a task it created or re-entered itself has not run anywhere yet.
   */
  readonly interrupted?: (task: Task) => boolean;
}

/** Plans the recovery of `tasks`, in task order. Pure: nothing is changed. */
export function planRecovery(
  tasks: Iterable<Task>,
  state: StateReader,
  registry: Registry,
  options: PlanOptions,
): RecoveryPlan {
  const events: RecoveryEvent[] = [];
  const blocked: BlockedTask[] = [];
  const sleeping: { taskId: string; until: number }[] = [];
  const awaiting: AwaitingTask[] = [];
  const interrupted = options.interrupted ?? (() => true);
  for (const task of tasks) {
    if (isTerminal(task)) continue;
    const resolution = registry.resolveTask(task.kind, task.kindVersion);
    if (!resolution.ok) {
      blocked.push({ taskId: task.id, reason: resolution.reason });
      continue;
    }
    let current = task;
    if (resolution.migrate) {
      const migrated = migrate(task, resolution);
      if ("reason" in migrated) {
        blocked.push({ taskId: task.id, reason: migrated.reason });
        continue;
      }
      events.push(migrated.event);
      current = migrated.task;
    }
    const describe = (situation: "restart" | "restart-limit") => {
      const detail = resolution.definition.describeRecovery?.(current, situation);
      return detail === undefined ? {} : { detail };
    };
    const phase = current.checkpoint.phase;
    const status = current.state.status;
    switch (status) {
      case "pending":
        events.push({ type: "started", taskId: task.id, phase, ...describe("restart") });
        break;
      case "running": {
        if (!interrupted(task)) break; // nothing to recover: the scheduler simply runs it
        const limit = restartLimitOf(resolution.definition, current, options.maxRestarts);
        const settle = resolution.definition.onRestartLimit;
        if (current.restarts + 1 > limit) {
          events.push({
            type: "restart-limit",
            taskId: task.id,
            phase,
            restarts: current.restarts + 1,
            // A kind that can settle its outcome gets one last phase for it, unless that phase is the one cut off.
            ...(settle !== undefined && settle !== phase && { settleIn: settle }),
            ...describe("restart-limit"),
          });
        } else events.push({ type: "restarted", taskId: task.id, phase, ...describe("restart") });
        break;
      }
      case "waiting":
      case "completing":
        events.push({ type: "join-rechecked", taskId: task.id, open: state.openChildCount(task.id) });
        break;
      case "sleeping":
        if (current.state.status === "sleeping" && current.state.until <= options.now)
          events.push({ type: "woke", taskId: task.id, phase });
        else if (current.state.status === "sleeping")
          sleeping.push({ taskId: task.id, until: current.state.until });
        break;
      case "awaiting": {
        if (current.state.status !== "awaiting") break;
        const { keys, mode, deadline } = current.state;
        if (deadline && deadline.at <= options.now) {
          events.push({ type: "deadline-passed", taskId: task.id, phase: deadline.phase });
          break;
        }
        const data = current.checkpoint.data as { signals?: Record<string, unknown> } | null;
        const received = Object.keys(data?.signals ?? {});
        awaiting.push({ taskId: task.id, keys, mode, received, ...(deadline && { until: deadline.at }) });
        break;
      }
      case "succeeded":
      case "failed":
      case "cancelled":
        break;
    }
  }
  return { events, blocked, sleeping, awaiting };
}

/** Runs a stored task's migrations; the migrated record is validated before it is planned. */
function migrate(
  task: Task,
  resolution: Extract<TaskResolution, { ok: true }>,
): { event: RecoveryEvent; task: Task } | { reason: string } {
  const to = resolution.definition.version;
  try {
    const migrated = resolution.migrate?.({ input: task.input, checkpoint: task.checkpoint });
    if (!migrated) return { reason: "no migration" };
    const next = TaskSchema.parse({ ...task, ...migrated, kindVersion: to });
    const input = resolution.definition.input.safeParse(next.input);
    if (!input.success) throw new Error(`migrated input is invalid: ${input.error.message}`);
    return {
      event: {
        type: "migrated",
        taskId: task.id,
        from: task.kindVersion,
        to,
        input: next.input,
        checkpoint: next.checkpoint,
      },
      task: next,
    };
  } catch (error) {
    return { reason: `migration from version ${task.kindVersion} failed: ${ensureError(error).message}` };
  }
}

/** Dispatches the plan's events on a draft, skipping those an earlier event made moot. */
export function applyRecovery(draft: KernelDraft, plan: RecoveryPlan): void {
  for (const event of plan.events) if (isApplicable(draft, event)) dispatch(draft, event);
}
