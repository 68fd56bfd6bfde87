/**
 * Which tasks a parent owns and how many of them are unfinished, as a layer of changes over a base. The
 * committed state keeps one over nothing; drafts and group overlays keep one over the state below them, so
 * the rule for "a task record changed" is written once.
 */
import type { Task } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";

/** What the layer below answers (nothing, for the committed state). */
export interface ChildIndexBase {
  openChildCount(parentId: string): number;
  ownedChildren(parentId: string): readonly string[];
}

const NO_BASE: ChildIndexBase = { openChildCount: () => 0, ownedChildren: () => [] };

export class ChildIndex {
  private readonly added = new Map<string, string[]>();
  private readonly openDelta = new Map<string, number>();

  constructor(private readonly base: ChildIndexBase = NO_BASE) {}

  /** Records that a task record went from `before` (undefined: it is new) to `after`. */
  track(before: Task | undefined, after: Task): void {
    const parentId = after.parentId;
    if (parentId === undefined) return;
    if (!before) {
      const siblings = this.added.get(parentId);
      if (siblings) siblings.push(after.id);
      else this.added.set(parentId, [after.id]);
    }
    const delta = (isTerminal(after) ? 0 : 1) - (before === undefined || isTerminal(before) ? 0 : 1);
    if (delta !== 0) this.openDelta.set(parentId, (this.openDelta.get(parentId) ?? 0) + delta);
  }

  /** Drops what is known about `parentId`'s children (its tree left memory). */
  forget(parentId: string): void {
    this.added.delete(parentId);
    this.openDelta.delete(parentId);
  }

  /** How many tasks owned by `parentId` are not terminal. O(1). */
  openChildCount(parentId: string): number {
    return this.base.openChildCount(parentId) + (this.openDelta.get(parentId) ?? 0);
  }

  /** Ids of the tasks owned by `parentId`, in creation order. */
  ownedChildren(parentId: string): readonly string[] {
    const added = this.added.get(parentId);
    if (!added) return this.base.ownedChildren(parentId);
    const below = this.base.ownedChildren(parentId);
    return below.length === 0 ? added : [...below, ...added];
  }
}
