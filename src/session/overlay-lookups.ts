/**
 * Lookups of records a layer changed over the layer below it (a draft over its base, a commit group over
 * the session state): the same rule for both, so what a draft sees and what the next draft of its group
 * sees cannot drift apart.
 */
import type { Signal, Task } from "../records/schemas.ts";

/** A signal still waiting to be taken: the layer's own version of it, else the one below. */
export function openSignal(
  changed: ReadonlyMap<string, Signal>,
  below: (key: string) => Signal | undefined,
  key: string,
): Signal | undefined {
  const own = changed.get(key);
  if (own) return own.consumedBy === undefined ? own : undefined;
  return below(key);
}

/**
 * The task awaiting `key`: one the layer changed into awaiting it, else the one below — as long as the
 * layer did not move that task on.
 */
export function awaiterOf(
  changed: Iterable<Task>,
  below: (key: string) => Task | undefined,
  current: (taskId: string) => Task | undefined,
  key: string,
): Task | undefined {
  const awaits = (task: Task | undefined) =>
    task?.state.status === "awaiting" && task.state.keys.includes(key);
  for (const task of changed) if (awaits(task)) return task;
  const found = below(key);
  if (!found) return undefined;
  const now = current(found.id);
  return awaits(now) ? now : undefined;
}
