/**
 * Which units of work a session keeps in memory (DESIGN §9). An item is a Submission (with its root task
 * tree) or a root task started without one, ordered by the version of the commit that created it, then
 * its id. Every unfinished item stays; of the finished ones, the `limit` newest stay too, and older ones are
 * evicted: their records remain in storage, read back by id, requestId or page. The same rule decides a
 * live session's memory, what a reopened one loads, and what `applyChangeToView` keeps, so they agree.
 */
import type { Submission, Task } from "../records/schemas.ts";
import { isSubmissionFinished, isTerminal } from "../records/schemas.ts";

/** A unit of work: its Submission, its root task, or both. */
export interface WorkItem {
  /** The version of the commit that created it. */
  readonly version: number;
  /** The Submission's id, or the root task's for one started without a Submission. */
  readonly id: string;
  readonly submission?: string;
  readonly root?: string;
}

/** What the tracker needs to see of the records it decides on. */
export interface ItemRecords {
  submission(id: string): Submission | undefined;
  task(id: string): Task | undefined;
}

export class ItemTracker {
  private readonly items = new Map<string, WorkItem>();
  /** The item of each Submission id and root task id in memory. */
  private readonly keyOf = new Map<string, string>();
  /** Finished items in memory, oldest first. */
  private readonly settled: WorkItem[] = [];

  constructor(
    /** How many finished items stay in memory besides every unfinished one. */
    readonly limit: number,
  ) {}

  /** The item a Submission or root task belongs to, if it is in memory. */
  itemOf(id: string): WorkItem | undefined {
    const item = this.keyOf.get(id);
    return item === undefined ? undefined : this.items.get(item);
  }

  /**
   * Takes note of the Submissions and tasks one commit (or a load) brought, and returns the finished items
   * that must now leave memory, oldest first.
   */
  observe(
    submissions: readonly Submission[],
    tasks: readonly Task[],
    records: ItemRecords,
    version: number,
  ): WorkItem[] {
    const touched = new Set<string>();
    for (const submission of submissions) {
      let id = this.keyOf.get(submission.id);
      if (id === undefined) {
        id = submission.id;
        const root = submission.taskId === undefined ? {} : { root: submission.taskId };
        this.add({ version: submission.acceptedVersion ?? version, id, submission: id, ...root });
      }
      touched.add(id);
    }
    for (const task of tasks) {
      if (task.parentId !== undefined) continue;
      let id = this.keyOf.get(task.id);
      if (id === undefined) {
        // A Submission's root is registered with the Submission (same commit); this one stands alone.
        if (task.submissionId !== undefined && records.submission(task.submissionId)?.taskId === task.id)
          continue;
        id = task.id;
        this.add({ version: task.createdVersion ?? version, id, root: id });
      }
      touched.add(id);
    }
    for (const id of touched) {
      const item = this.items.get(id);
      if (item && isFinished(item, records) && !this.settled.includes(item)) insertSorted(this.settled, item);
    }
    const evicted: WorkItem[] = [];
    while (this.settled.length > this.limit) {
      const item = this.settled.shift() as WorkItem;
      this.items.delete(item.id);
      if (item.submission !== undefined) this.keyOf.delete(item.submission);
      if (item.root !== undefined) this.keyOf.delete(item.root);
      evicted.push(item);
    }
    return evicted;
  }

  /**
   * Registers the items a session loaded (their keys read from the index) and returns those beyond the
   * limit, to evict (none when storage gave the limit's worth).
   */
  load(items: readonly WorkItem[], records: ItemRecords): WorkItem[] {
    for (const item of items) this.add(item);
    for (const item of items) if (isFinished(item, records)) insertSorted(this.settled, item);
    return this.observe([], [], records, 0);
  }

  /** Drops an item from memory's bookkeeping (retention removed it); returns it if it was held. */
  forget(id: string): WorkItem | undefined {
    const item = this.items.get(id);
    if (!item) return undefined;
    this.items.delete(id);
    if (item.submission !== undefined) this.keyOf.delete(item.submission);
    if (item.root !== undefined) this.keyOf.delete(item.root);
    const at = this.settled.indexOf(item);
    if (at >= 0) this.settled.splice(at, 1);
    return item;
  }

  private add(item: WorkItem): void {
    this.items.set(item.id, item);
    if (item.submission !== undefined) this.keyOf.set(item.submission, item.id);
    if (item.root !== undefined) this.keyOf.set(item.root, item.id);
  }
}

/** Whether a task is the root of a tree started without a Submission (an item of its own). */
export const isStandaloneRoot = (task: Task): boolean =>
  task.parentId === undefined && task.submissionId === undefined;

/** Whether an item has finished: its Submission ended (or it has none) and its root task is terminal. */
export function isFinished(item: Pick<WorkItem, "submission" | "root">, records: ItemRecords): boolean {
  if (item.submission !== undefined) {
    const submission = records.submission(item.submission);
    if (!submission || !isSubmissionFinished(submission)) return false;
  }
  if (item.root !== undefined) {
    const root = records.task(item.root);
    if (root && !isTerminal(root)) return false;
  }
  return true;
}

/** Items in their order: by the version that created them, then by id. */
export function itemOrder(a: Pick<WorkItem, "version" | "id">, b: Pick<WorkItem, "version" | "id">): number {
  return a.version - b.version || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function insertSorted(list: WorkItem[], item: WorkItem): void {
  let i = list.length;
  while (i > 0 && itemOrder(list[i - 1] as WorkItem, item) > 0) i--;
  list.splice(i, 0, item);
}

/** Every task under `rootId` (the root included), following `children`. */
export function treeOf(rootId: string, children: (parentId: string) => readonly string[]): string[] {
  const found: string[] = [];
  const queue = [rootId];
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    found.push(next);
    queue.push(...children(next));
  }
  return found;
}
