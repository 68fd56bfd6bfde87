/**
 * What reopening does to each unfinished task (DESIGN §4). `planRecovery` only describes it — devtools
 * show it as a preview — and `applyRecovery` commits it.
 */
import type { Task } from "../records/schemas.ts";
import { isTerminal, TaskSchema } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { Draft } from "../session/draft.ts";
import type { StateReader } from "../session/state.ts";
import { DEFAULT_MAX_RESTARTS } from "./define-task.ts";
import { endTask, recheckJoin, reenter } from "./transitions.ts";

/** One step of recovery for one task. */
export type RecoveryAction =
  | { readonly kind: "blocked"; readonly taskId: string; readonly reason: string }
  | { readonly kind: "migrate"; readonly taskId: string; readonly from: number; readonly to: number }
  | {
      readonly kind: "reenter";
      readonly taskId: string;
      readonly phase: string;
      readonly restart: boolean;
      /** What re-entering the phase will do, from the task kind's `describeRecovery`. */
      readonly detail?: string;
    }
  | {
      readonly kind: "fail-restart-limit";
      readonly taskId: string;
      readonly phase: string;
      readonly restarts: number;
    }
  | { readonly kind: "recheck-children"; readonly taskId: string; readonly open: number }
  | { readonly kind: "await-children"; readonly taskId: string; readonly open: number }
  | { readonly kind: "wake-now"; readonly taskId: string; readonly phase: string }
  | { readonly kind: "sleep-until"; readonly taskId: string; readonly until: number };

/**
 * Describes what resume() will do to every unfinished task, in task order. `interrupted` says whether a
 * running task's phase may have been cut off by a process that died; by default every running task was
 * (a reader sees only storage). A writer passes "was running when this process loaded the session": a
 * task it created or re-entered itself has not run anywhere yet, so starting it is not a restart.
 */
export function planRecovery(
  tasks: Iterable<Task>,
  state: StateReader,
  registry: Registry,
  now: number,
  defaultMaxRestarts = DEFAULT_MAX_RESTARTS,
  interrupted: (task: Task) => boolean = () => true,
): RecoveryAction[] {
  const plan: RecoveryAction[] = [];
  for (const task of tasks) {
    if (isTerminal(task)) continue;
    const resolution = registry.resolveTask(task.kind, task.kindVersion);
    if (!resolution.ok) {
      plan.push({ kind: "blocked", taskId: task.id, reason: resolution.reason });
      continue;
    }
    if (resolution.migrate) {
      plan.push({
        kind: "migrate",
        taskId: task.id,
        from: task.kindVersion,
        to: resolution.definition.version,
      });
    }
    const state_ = task.state;
    const detail = resolution.definition.describeRecovery?.(task);
    const reenter = (restart: boolean): RecoveryAction => ({
      kind: "reenter",
      taskId: task.id,
      phase: task.checkpoint.phase,
      restart,
      ...(detail !== undefined && { detail }),
    });
    switch (state_.status) {
      case "pending":
        plan.push(reenter(false));
        break;
      case "running": {
        if (!interrupted(task)) break; // nothing to recover: the scheduler simply runs it
        const limit = resolution.definition.maxRestarts ?? defaultMaxRestarts;
        if (task.restarts + 1 > limit) {
          plan.push({
            kind: "fail-restart-limit",
            taskId: task.id,
            phase: task.checkpoint.phase,
            restarts: task.restarts + 1,
          });
        } else plan.push(reenter(true));
        break;
      }
      case "waiting":
        plan.push({ kind: "recheck-children", taskId: task.id, open: state.openChildCount(task.id) });
        break;
      case "completing":
        plan.push({ kind: "await-children", taskId: task.id, open: state.openChildCount(task.id) });
        break;
      case "sleeping":
        if (state_.until <= now)
          plan.push({ kind: "wake-now", taskId: task.id, phase: task.checkpoint.phase });
        else plan.push({ kind: "sleep-until", taskId: task.id, until: state_.until });
        break;
    }
  }
  return plan;
}

/**
 * Commits the plan's changes on a draft: migrations, counted re-entries, restart-limit failures, joins
 * that became due, and due sleepers. Returns the ids of tasks whose migration failed, with the reason.
 */
export function applyRecovery(
  draft: Draft,
  registry: Registry,
  plan: readonly RecoveryAction[],
): Map<string, string> {
  const failedMigrations = new Map<string, string>();
  for (const action of plan) {
    const task = draft.task(action.taskId);
    if (!task || isTerminal(task) || failedMigrations.has(action.taskId)) continue;
    switch (action.kind) {
      case "migrate": {
        const resolution = registry.resolveTask(task.kind, task.kindVersion);
        if (!resolution.ok || !resolution.migrate) break;
        try {
          const migrated = resolution.migrate({ input: task.input, checkpoint: task.checkpoint });
          const next = TaskSchema.parse({ ...task, ...migrated, kindVersion: resolution.definition.version });
          const input = resolution.definition.input.safeParse(next.input);
          if (!input.success) throw new Error(`migrated input is invalid: ${input.error.message}`);
          draft.putTask(next);
        } catch (error) {
          failedMigrations.set(
            task.id,
            `migration from version ${action.from} failed: ${(error as Error).message}`,
          );
        }
        break;
      }
      case "reenter":
        reenter(draft, task, task.checkpoint.phase, task.checkpoint.data, action.restart);
        break;
      case "fail-restart-limit":
        endTask(draft, task, {
          status: "failed",
          error: {
            name: "TaskError",
            code: "restart-limit",
            message: `phase "${action.phase}" was interrupted ${action.restarts} times; giving up instead of crash-looping`,
          },
        });
        break;
      case "recheck-children":
      case "await-children":
        recheckJoin(draft, task);
        break;
      case "wake-now":
        reenter(draft, task, task.checkpoint.phase, task.checkpoint.data, false);
        break;
      case "blocked":
      case "sleep-until":
        break;
    }
  }
  return failedMigrations;
}
