/**
 * What a session waits for from outside (DESIGN §4): one line per signal key an awaiting task still needs,
 * derived from task records alone — so a view folded from changes lists exactly what the session's own
 * view lists, and a new or resolved wait reaches subscribers as an ordinary task change.
 */
import type { Json, Task } from "../records/schemas.ts";
import { isInternalKey } from "../signals/define-signal.ts";

export interface PendingWait {
  /** The key to signal (`session.signal(key, …)`, `POST /sessions/:id/signals/:key`). */
  readonly key: string;
  readonly taskId: string;
  /** The awaiting task's kind (`tool` for a tool approval). */
  readonly kind: string;
  /** What the wait is for: the tool call (`{ tool, arguments }`) or the app's own description. */
  readonly about?: Json;
  /** The other keys of the same wait, and whether it needs `any` or `all` of them. */
  readonly keys: readonly string[];
  readonly mode: "any" | "all";
  /** When the wait began. */
  readonly since: number;
  /** When its deadline passes, if it has one. */
  readonly until?: number;
}

/** The pending waits of `tasks`, ordered by key. */
export function pendingWaits(tasks: Iterable<Task>): PendingWait[] {
  const pending: PendingWait[] = [];
  for (const task of tasks) {
    const state = task.state;
    if (state.status !== "awaiting") continue;
    const received = (task.checkpoint.data as { signals?: Record<string, unknown> } | null)?.signals ?? {};
    for (const key of state.keys) {
      if (Object.hasOwn(received, key) || isInternalKey(key)) continue;
      pending.push({
        key,
        taskId: task.id,
        kind: task.kind,
        ...(state.about !== undefined && { about: state.about }),
        keys: state.keys,
        mode: state.mode,
        since: state.since,
        ...(state.deadline && { until: state.deadline.at }),
      });
    }
  }
  return pending.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
