/** The scheduler of a writer session, wired to its state: blocking and unblocking tasks go through the reducer. */

import type { Registry } from "../registry.ts";
import { Scheduler, type SchedulerHost } from "../tasks/scheduler.ts";
import type { OpenSessionOptions } from "./options.ts";
import { reduceSession, type SessionState } from "./state.ts";

export function sessionScheduler(
  state: SessionState,
  registry: Registry,
  options: OpenSessionOptions,
  host: Omit<SchedulerHost, "state" | "registry" | "block" | "unblock">,
): Scheduler {
  return new Scheduler(
    {
      ...host,
      state,
      registry,
      block: (taskId, reason) => reduceSession(state, { type: "task-blocked", taskId, reason }),
      unblock: (taskId) => reduceSession(state, { type: "task-unblocked", taskId }),
    },
    {
      ...(options.onWake !== undefined && { onWake: options.onWake }),
      ...(options.maxRestarts !== undefined && { maxRestarts: options.maxRestarts }),
    },
  );
}
