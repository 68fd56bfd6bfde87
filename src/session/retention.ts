/**
 * Retention (DESIGN §9): a policy that removes finished work from storage — by count, by age, or both —
 * optionally handing each batch to an archive first. It never removes what the session still holds or
 * needs: an item in the working set (memory and views), an item with an unfinished task, a Submission a
 * queued turn waits on, a task an unfinished one names (its parent, a child it waits for). Each batch is
 * one ordinary commit (epoch-checked, in the change log, pushed to replicas), so every store and every
 * follower removes the same rows. Entries stay (they are the conversation); so do the requestId index
 * (a retry of a removed Submission's requestId is refused, never run again) and consumed signals (a repeat
 * keeps its first outcome). An `archive` is called before the removal commits: if that commit fails (or the
 * process dies in between), the next pass archives the same items again — keep archives idempotent by
 * item id.
 */
import type { Clock } from "../clock.ts";
import { afterThisTick } from "../clock.ts";
import { InvalidArgumentError } from "../errors.ts";
import type { CommitRecord, Submission, Task } from "../records/schemas.ts";
import { isSubmissionFinished, isTerminal, SubmissionSchema, TaskSchema } from "../records/schemas.ts";
import { validateRecord } from "../records/validate.ts";
import type { Storage, StoredItem } from "../storage/storage.ts";
import { submissionOfTurnKey } from "../tasks/follow-up.ts";
import type { CommitResult, KernelCommit } from "./commit-pipeline.ts";
import type { SessionState } from "./state.ts";

/** What a session may remove of its finished work. Without `keepSettled` or `maxAgeMs` it removes nothing. */
export interface RetentionPolicy {
  /** Keep at most this many finished items (a Submission with its task tree, a root task tree) in storage. */
  readonly keepSettled?: number;
  /** Remove finished items whose last record changed more than this long ago (by the session's clock). */
  readonly maxAgeMs?: number;
  /** Receives each batch before it is removed; when it throws (or rejects), the batch stays stored. */
  readonly archive?: (batch: readonly ArchivedItem[]) => void | Promise<void>;
  /** `false`: only `session.collect()` removes. Default: the session collects as work finishes. */
  readonly auto?: boolean;
  /** A failed automatic collection (an archive that threw, a storage error). Nothing was removed by it. */
  readonly onError?: (error: unknown) => void;
}

/** A finished item as it is removed: its Submission (if it has one) and every task of its tree. */
export interface ArchivedItem {
  /** Its place in the session's order of inputs (the version that created it). */
  readonly version: number;
  readonly id: string;
  readonly submission?: Submission;
  /** Its root task's id (the first of `tasks`), when it has a task tree. */
  readonly root?: string;
  readonly tasks: readonly Task[];
}

/** What one `collect()` did. */
export interface CollectResult {
  /** The items removed (with what an archive received). */
  readonly removed: readonly ArchivedItem[];
  /** More may be removable now (the batch was full): automatic collection goes on at once. */
  readonly more: boolean;
}

/**
 * Refuses a policy or working set that is not what it looks like, before anything is opened: a count that
 * is not a non-negative integer (NaN from a mistyped setting would otherwise mean "keep nothing"), an age
 * that is not a finite number of milliseconds.
 */
export function checkRetention(options: {
  readonly retention?: RetentionPolicy;
  readonly retainSettled?: number;
  readonly liveWaits?: number;
  readonly maxEarlySignals?: number;
}): void {
  // The last two may be `Infinity`: never park a wait, keep every early signal.
  const counts = [
    ["retention.keepSettled", options.retention?.keepSettled, false],
    ["retainSettled", options.retainSettled, false],
    ["liveWaits", options.liveWaits, true],
    ["maxEarlySignals", options.maxEarlySignals, true],
  ] as const;
  for (const [path, value, unbounded] of counts)
    if (
      value !== undefined &&
      !(Number.isSafeInteger(value) && value >= 0) &&
      !(unbounded && value === Infinity)
    )
      throw new InvalidArgumentError(`${path} must be a non-negative integer, not ${String(value)}`, [
        { path, message: "must be a non-negative integer" },
      ]);
  const age = options.retention?.maxAgeMs;
  if (age !== undefined && !(Number.isFinite(age) && age >= 0))
    throw new InvalidArgumentError(
      `retention.maxAgeMs must be a finite number of ms ≥ 0, not ${String(age)}`,
      [{ path: "retention.maxAgeMs", message: "must be a finite number ≥ 0" }],
    );
}

/** Items looked at per pass (oldest first), items and tasks removed per commit at most. */
const SCAN = 256;
const BATCH = 64;
const MAX_TASKS = 2_000;
/** Automatic collection runs after this many items finished since the last one. */
const AUTO_EVERY = 16;

export interface RetentionHost {
  readonly state: SessionState;
  readonly storage: Storage;
  readonly clock: Clock;
  readonly policy: RetentionPolicy;
  commit(build: KernelCommit<void>): Promise<CommitResult<void>>;
  /** Whether the session can still commit (automatic collection stops once it cannot). */
  usable(): boolean;
}

export class Retention {
  private running: Promise<CollectResult> | undefined;
  private finishedSince = 0;
  private automatic = false;

  constructor(private readonly host: RetentionHost) {}

  /** One pass over what is stored now (after any pass in flight): removes up to one batch, in one commit. */
  collect(): Promise<CollectResult> {
    const pass = (this.running ?? Promise.resolve()).catch(() => undefined).then(() => this.pass());
    this.running = pass;
    void pass.then(
      () => this.settle(pass),
      () => this.settle(pass),
    );
    return pass;
  }

  private settle(pass: Promise<CollectResult>): void {
    if (this.running === pass) this.running = undefined;
  }

  /** Takes note of a commit; after enough finished items, collects in the background. */
  observe(commit: CommitRecord): void {
    if (this.host.policy.auto === false) return;
    for (const s of commit.submissions) if (isSubmissionFinished(s)) this.finishedSince++;
    for (const t of commit.tasks)
      if (t.parentId === undefined && t.submissionId === undefined && isTerminal(t)) this.finishedSince++;
    if (this.finishedSince >= AUTO_EVERY) this.start();
  }

  /** Starts automatic collection (also when a session resumes: a policy may be new to an old session). */
  start(): void {
    if (this.host.policy.auto === false || this.automatic) return;
    this.automatic = true;
    this.finishedSince = 0;
    afterThisTick(() => void this.runAutomatic());
  }

  private async runAutomatic(): Promise<void> {
    try {
      while (this.host.usable() && (await this.collect()).more);
    } catch (error) {
      if (this.host.usable()) this.host.policy.onError?.(error);
    } finally {
      this.automatic = false;
    }
  }

  private async pass(): Promise<CollectResult> {
    const { state, storage, policy } = this.host;
    if (policy.keepSettled === undefined && policy.maxAgeMs === undefined)
      return { removed: [], more: false };
    const { items, count } = await storage.readSettled(state.id, SCAN);
    const overCount = policy.keepSettled === undefined ? 0 : count - policy.keepSettled;
    const cutoff = policy.maxAgeMs === undefined ? undefined : this.host.clock.now() - policy.maxAgeMs;
    const referenced = referencedByHeldWork(state);
    const chosen: ArchivedItem[] = [];
    let tasks = 0;
    for (const [i, item] of items.entries()) {
      if (chosen.length === BATCH || tasks >= MAX_TASKS) return this.remove(chosen, true);
      if (i >= overCount && cutoff === undefined) break; // oldest first: the rest are within the count
      if (state.items.itemOf(item.id)) continue; // in the working set: memory and views hold it
      // An item whose records fail to load, or too large to remove in one commit, is left as it is: it
      // must not stop every later pass at the oldest end.
      const archived = await this.read(item).catch(() => undefined);
      if (!archived || archived.tasks.length > MAX_TASKS) continue;
      if (archived.tasks.some((t) => referenced.has(t.id))) continue;
      if (archived.submission && referenced.has(archived.submission.id)) continue;
      if (i >= overCount && lastChange(archived) > (cutoff as number)) continue;
      chosen.push(archived);
      tasks += archived.tasks.length;
    }
    return this.remove(chosen, false);
  }

  /** An item's records, or undefined unless every one of them has ended. */
  private async read(item: StoredItem): Promise<ArchivedItem | undefined> {
    const { state, storage } = this.host;
    const value = item.value as { submission?: unknown; root?: unknown };
    let submission: Submission | undefined;
    if (typeof value.submission === "string") {
      const row = await storage.readSubmission(state.id, value.submission);
      if (!row) return undefined;
      submission = validateRecord(SubmissionSchema, row.value, row.key);
      if (!isSubmissionFinished(submission)) return undefined;
    }
    const tasks: Task[] = [];
    if (typeof value.root === "string") {
      for (const row of await storage.readTaskTree(state.id, value.root)) {
        const task = validateRecord(TaskSchema, row.value, row.key);
        if (!isTerminal(task)) return undefined;
        tasks.push(task);
      }
    }
    const root = typeof value.root === "string" ? value.root : undefined;
    return {
      version: item.version,
      id: item.id,
      ...(submission && { submission }),
      ...(root && { root }),
      tasks,
    };
  }

  private async remove(chosen: readonly ArchivedItem[], more: boolean): Promise<CollectResult> {
    if (chosen.length === 0) return { removed: [], more: false };
    await this.host.policy.archive?.(chosen);
    await this.host.commit((draft) => {
      for (const item of chosen) {
        draft.removeSettled({
          version: item.version,
          id: item.id,
          ...(item.submission && { submission: item.submission.id }),
          ...(item.root !== undefined && { root: item.root }),
          tasks: childLinks(item.tasks),
        });
      }
    });
    return { removed: chosen, more };
  }
}

/**
 * The ids the session's held work names: each task's parent and the children it waits for, and the
 * Submission a queued turn waits on. Everything unfinished is held (memory keeps all unfinished work).
 */
function referencedByHeldWork(state: SessionState): Set<string> {
  const ids = new Set<string>();
  for (const task of state.tasks.values()) {
    if (task.parentId !== undefined) ids.add(task.parentId);
    if (task.state.status === "waiting") for (const child of task.state.children) ids.add(child);
    if (task.state.status === "awaiting")
      for (const key of task.state.keys) {
        const turn = submissionOfTurnKey(key);
        if (turn !== undefined) ids.add(turn);
      }
  }
  return ids;
}

/**
 * Each task with the key of the child link that names it: its `childIndex`, or — for a task stored before
 * the field existed (a migrated session) — its place among its siblings by creation, as the migration
 * numbered them.
 */
function childLinks(tasks: readonly Task[]): { id: string; parentId?: string; childIndex?: number }[] {
  const siblings = new Map<string, Task[]>();
  for (const t of tasks)
    if (t.parentId !== undefined && t.childIndex === undefined)
      siblings.set(t.parentId, [...(siblings.get(t.parentId) ?? []), t]);
  const migrated = new Map<string, number>();
  for (const list of siblings.values()) {
    list.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
    for (const [i, t] of list.entries()) migrated.set(t.id, i);
  }
  return tasks.map((t) => {
    const childIndex = t.childIndex ?? migrated.get(t.id);
    return {
      id: t.id,
      ...(t.parentId !== undefined && { parentId: t.parentId }),
      ...(childIndex !== undefined && { childIndex }),
    };
  });
}

/** When an item's records last changed. */
function lastChange(item: ArchivedItem): number {
  let at = item.submission?.updatedAt ?? Number.NEGATIVE_INFINITY;
  for (const task of item.tasks) at = Math.max(at, task.updatedAt);
  return at;
}
