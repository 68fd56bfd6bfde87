/** Task trees from parent links (a view's tasks come sorted by id, not parents first). */
import type { Task } from "../../src/index.ts";

/** The tasks of the tree under `rootId` (parents before children). */
export function treeOf(tasks: readonly Task[], rootId: string | undefined): Task[] {
  if (rootId === undefined) return [];
  const children = new Map<string, Task[]>();
  let root: Task | undefined;
  for (const task of tasks) {
    if (task.id === rootId) root = task;
    if (task.parentId === undefined) continue;
    const list = children.get(task.parentId);
    if (list) list.push(task);
    else children.set(task.parentId, [task]);
  }
  if (!root) return [];
  const tree: Task[] = [root];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get((tree[i] as Task).id) ?? []));
  return tree;
}
