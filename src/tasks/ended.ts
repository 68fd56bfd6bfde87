/**
 * What a task that ends cancelled or failed leaves behind (its kind's `onCancelled` or `onFailed`), staged in
 * the commit that ends it.
 */
import type { Task, TaskState } from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";
import type { Transition } from "./define-task.ts";

/**
 * Runs the `onCancelled` (or `onFailed`) of `ended`'s kind, if it has one. The ending is what must land: a
 * blocked conversation refuses the entry before anything is staged, and the task ends without it.
 */
export function stageEnded(
  draft: KernelDraft,
  ended: Task,
  from: TaskState["status"],
  returned?: Transition["type"],
): void {
  const status = ended.state.status;
  if (status !== "cancelled" && status !== "failed") return;
  const resolved = draft.registry.resolveTask(ended.kind, ended.kindVersion);
  const definition = resolved.ok ? resolved.definition : undefined;
  const hook = status === "cancelled" ? definition?.onCancelled : definition?.onFailed;
  if (!hook) return;
  // The task machine's own rules: created in this commit, or queued for its key and never cut off there.
  const phaseStarted =
    ended.createdVersion !== draft.version && !(from === "pending" && ended.restarts === 0);
  try {
    hook(ended, {
      appendEntry: (conversationId, content) => {
        draft.appendEntry(conversationId, content, { taskId: ended.id });
      },
      child: (id) => {
        const task = draft.task(id);
        return task?.parentId === ended.id ? task : undefined;
      },
      // Read only by hooks that look (a commit cancelling many tasks copies nothing per task).
      get appended() {
        return draft.entries ?? [];
      },
      phaseStarted,
      ...(returned !== undefined && { returned }),
      version: draft.version,
    });
  } catch {
    // A hook must not throw (see `onCancelled`); one that does leaves nothing more behind.
  }
}
