/**
 * Lookups of records a layer changed over the layer below it (a draft over its base, a commit group over
 * the session state): the same rule for both, so what a draft sees and what the next draft of its group
 * sees cannot drift apart.
 */
import type { Task } from "../records/schemas.ts";

/** Notes the keys a written task awaits (`awaiterOf`'s index of a layer), creating the index when needed. */
export function noteAwaiting(
  index: Map<string, string> | undefined,
  task: Task,
): Map<string, string> | undefined {
  if (task.state.status !== "awaiting") return index;
  const keys = index ?? new Map<string, string>();
  for (const key of task.state.keys) keys.set(key, task.id);
  return keys;
}

/**
 * The task awaiting `key`: one the layer changed into awaiting it (`changed` names the last task the layer
 * wrote awaiting each key: a key is awaited by one task at a time), else the one below — as long as the
 * layer did not move that task on.
 */
export function awaiterOf(
  changed: ReadonlyMap<string, string> | undefined,
  below: { awaiter(key: string): Task | undefined },
  current: { task(taskId: string): Task | undefined },
  key: string,
): Task | undefined {
  const awaits = (task: Task | undefined) =>
    task?.state.status === "awaiting" && task.state.keys.includes(key);
  const own = changed?.get(key);
  const mine = own === undefined ? undefined : current.task(own);
  if (awaits(mine)) return mine;
  const found = below.awaiter(key);
  if (!found) return undefined;
  const now = current.task(found.id);
  return awaits(now) ? now : undefined;
}
