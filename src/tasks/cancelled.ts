/** What a cancelled task leaves behind (its kind's `onCancelled`), staged in the commit that ends it. */
import type { Task, TaskState } from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";

/**
 * Runs the `onCancelled` of `ended`'s kind, if it has one. The cancel is what must land: a blocked
 * conversation refuses the entry before anything is staged, and the cancel commits without it.
 */
export function stageCancelled(draft: KernelDraft, ended: Task, from: TaskState["status"]): void {
  if (ended.state.status !== "cancelled") return;
  const resolved = draft.registry.resolveTask(ended.kind, ended.kindVersion);
  const hook = resolved.ok ? resolved.definition.onCancelled : undefined;
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
      version: draft.version,
    });
  } catch {
    // A hook must not throw (see `onCancelled`); one that does leaves nothing more behind.
  }
}
