/** The check of a join: a parent's wait on its children (DESIGN §3, joins). */
import { isTerminal, type Task } from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";

/** Why a wait on `children` is not allowed, if it is not. */
export function invalidWait(draft: KernelDraft, task: Task, children: readonly string[]): string | undefined {
  const listed = new Set(children);
  let listedOpen = 0;
  for (const id of listed) {
    const child = draft.task(id);
    if (child?.parentId !== task.id) return `task ${id} is not a child of ${task.id}`;
    if (!isTerminal(child)) listedOpen++;
  }
  // A parent never moves on past unfinished children it does not mention (they would be orphaned); when
  if (draft.openChildCount(task.id) === listedOpen) return undefined; // all are listed, skip the finished
  for (const id of draft.ownedChildren(task.id)) {
    if (!listed.has(id) && !isTerminal(draft.task(id))) return `wait must list unfinished child ${id}`;
  }
  return undefined;
}
