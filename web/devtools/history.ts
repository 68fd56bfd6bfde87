/**
 * A session's history as the devtools hold it: a base view and the committed changes after it, folded on
 * demand into the view at any version (checkpoints every 64 versions keep scrubbing cheap). The base is
 * the empty session when the change log reaches back to version 1, otherwise the view at attach time.
 */
import { applyChangeToView, type CommitRecord, type SessionView, type Task } from "../../src/index.ts";

const CHECKPOINT_EVERY = 64;

export class SessionHistory {
  private readonly changes: CommitRecord[] = [];
  private readonly checkpoints = new Map<number, SessionView>();
  private latestView: SessionView;

  constructor(readonly base: SessionView) {
    this.latestView = base;
    this.checkpoints.set(base.version, base);
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
      if (change.version % CHECKPOINT_EVERY === 0) this.checkpoints.set(change.version, this.latestView);
      added = true;
    }
    return added;
  }

  /** The whole session as it was right after `version` committed. */
  viewAt(version: number): SessionView {
    const target = Math.max(this.firstVersion, Math.min(version, this.latestView.version));
    if (target === this.latestView.version) return this.latestView;
    let start = target - (target % CHECKPOINT_EVERY);
    while (!this.checkpoints.has(start) && start > this.firstVersion) start -= CHECKPOINT_EVERY;
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
