/**
 * A session's history as the devtools hold it: a base view and the committed changes after it, folded on
 * demand into the view at any version (checkpoints every 64 versions keep scrubbing cheap). The base is
 * the empty session when the change log reaches back to version 1, otherwise the view at attach time.
 */
import { applyChangeToView, type CommitRecord, type SessionView, type Task } from "../../src/index.ts";
import { problemsBelow, taskOutcome } from "./outcome.ts";

const CHECKPOINT_EVERY = 64;

export class SessionHistory {
  private changes: CommitRecord[] = [];
  private readonly checkpoints = new Map<number, SessionView>();
  /** Views kept whole at versions off the checkpoint grid (the view a history started from). */
  private readonly anchors: number[] = [];
  private latestView: SessionView;
  #base: SessionView;
  /** Every task this history has seen, in its last state: a view lets finished trees go, this keeps them. */
  private readonly seen = new Map<string, Task>();
  /** `problemsBelow` of every task seen, kept up to date as tasks change (not recomputed per commit). */
  private below = new Map<string, Map<string, number>>();

  constructor(base: SessionView) {
    this.#base = base;
    this.latestView = base;
    for (const task of base.tasks) this.seen.set(task.id, task);
    this.below = problemsBelow([...this.seen.values()]);
    this.checkpoints.set(base.version, base);
    this.anchors.push(base.version);
  }

  get base(): SessionView {
    return this.#base;
  }

  /**
   * Puts the changes before the base in front (read after the page first showed the base): `earlier` must
   * lead from `from` to the base, one by one. Views at or after the old base still start from it (it holds
   * what a fold cannot know, such as records that failed to load).
   */
  prepend(from: SessionView, earlier: readonly CommitRecord[]): void {
    let view = from;
    const folded: CommitRecord[] = [];
    for (const change of earlier) {
      if (change.version > this.#base.version) break;
      view = applyChangeToView(view, change);
      folded.push(change);
      if (change.version % CHECKPOINT_EVERY === 0) this.checkpoints.set(change.version, view);
    }
    if (view.version !== this.#base.version)
      throw new Error(`the earlier history ends at v${view.version}, not at v${this.#base.version}`);
    this.checkpoints.set(from.version, from);
    this.changes = [...folded, ...this.changes];
    this.#base = from;
    // Older states than those held: each task's newest of them, where none is held yet.
    for (const change of [...folded].reverse())
      for (const task of change.tasks) if (!this.seen.has(task.id)) this.seen.set(task.id, task);
    for (const task of from.tasks) if (!this.seen.has(task.id)) this.seen.set(task.id, task);
    // Older tasks may come before their parents here: counted again whole, once.
    this.below = problemsBelow([...this.seen.values()]);
  }

  /** Every task of the history, in its last state, also those the latest view no longer holds. */
  get tasks(): ReadonlyMap<string, Task> {
    return this.seen;
  }

  /** For each task, the problems of the tasks below it (`problemsBelow` of `tasks`), kept as they change. */
  get problems(): ReadonlyMap<string, ReadonlyMap<string, number>> {
    return this.below;
  }

  /** The oldest version this history can show. */
  get firstVersion(): number {
    return this.base.version;
  }

  get latest(): SessionView {
    return this.latestView;
  }

  get commits(): readonly CommitRecord[] {
    return this.changes;
  }

  /** Adds changes in order; ones already held are skipped, a gap is an error. */
  append(changes: readonly CommitRecord[]): boolean {
    let added = false;
    for (const change of changes) {
      if (change.version <= this.latestView.version) continue;
      this.latestView = applyChangeToView(this.latestView, change);
      this.changes.push(change);
      for (const task of change.tasks) this.see(task);
      if (change.version % CHECKPOINT_EVERY === 0) this.checkpoints.set(change.version, this.latestView);
      added = true;
    }
    return added;
  }

  /** A task's new state: its old one's problems taken off its ancestors, its new one's put on. */
  private see(task: Task): void {
    const before = this.seen.get(task.id);
    if (before) this.count(before, -1);
    this.seen.set(task.id, task);
    this.count(task, 1);
  }

  private count(task: Task, by: 1 | -1): void {
    const { label, tone } = taskOutcome(task);
    if (tone !== "bad" && tone !== "warn") return;
    for (let up = this.seen.get(task.parentId ?? ""); up; up = this.seen.get(up.parentId ?? "")) {
      const counts = this.below.get(up.id) ?? new Map<string, number>();
      const n = (counts.get(label) ?? 0) + by;
      if (n > 0) counts.set(label, n);
      else counts.delete(label);
      if (counts.size > 0) this.below.set(up.id, counts);
      else this.below.delete(up.id);
    }
  }

  /** The whole session as it was right after `version` committed. */
  viewAt(version: number): SessionView {
    const target = Math.max(this.firstVersion, Math.min(version, this.latestView.version));
    if (target === this.latestView.version) return this.latestView;
    let start = target - (target % CHECKPOINT_EVERY);
    while (!this.checkpoints.has(start) && start > this.firstVersion) start -= CHECKPOINT_EVERY;
    for (const anchor of this.anchors) if (anchor <= target && anchor > start) start = anchor;
    let view = this.checkpoints.get(start) ?? this.base;
    for (const change of this.changes) {
      if (change.version <= view.version) continue;
      if (change.version > target) break;
      view = applyChangeToView(view, change);
    }
    return view;
  }

  /** The commit that produced `version`, if held (changes are contiguous after the base). */
  commit(version: number): CommitRecord | undefined {
    return this.changes[version - this.firstVersion - 1];
  }

  /** Every committed state of one task, oldest first. */
  taskHistory(taskId: string): { version: number; at: number; task: Task }[] {
    const states: { version: number; at: number; task: Task }[] = [];
    const initial = this.base.tasks.find((t) => t.id === taskId);
    if (initial) states.push({ version: this.base.version, at: initial.updatedAt, task: initial });
    for (const change of this.changes)
      for (const task of change.tasks)
        if (task.id === taskId) states.push({ version: change.version, at: change.at, task });
    return states;
  }

  /** The versions at which a document changed. */
  documentVersions(documentId: string): { version: number; documentVersion: number }[] {
    const versions: { version: number; documentVersion: number }[] = [];
    const initial = this.base.documents.find((d) => d.id === documentId);
    if (initial) versions.push({ version: this.base.version, documentVersion: initial.version });
    for (const change of this.changes)
      for (const doc of change.documents)
        if (doc.id === documentId) versions.push({ version: change.version, documentVersion: doc.version });
    return versions;
  }
}
