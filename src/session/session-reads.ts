/**
 * What every session answers without committing — from memory (its working set) or from storage (settled
 * work that left memory): records by id, pages, views, the change log. The base of {@link Session}.
 */
import type { Conversation, Entry, Signal, Submission, Task } from "../records/schemas.ts";
import type { Storage } from "../storage/storage.ts";
import { CHANGE_PAGE, SessionHistory, type SubmissionPage } from "./history.ts";
import { ParkedWaits } from "./parked-waits.ts";
import { type PendingWait, pendingWaits } from "./pending.ts";
import type { SessionState } from "./state.ts";
import { buildView, type SessionView, shownTasks, type ViewOptions } from "./view.ts";

export class SessionReads {
  protected readonly history: SessionHistory;
  protected readonly parked: ParkedWaits;

  constructor(
    protected readonly state: SessionState,
    storage: Storage,
  ) {
    this.history = new SessionHistory(state, storage);
    this.parked = new ParkedWaits(state, storage, (tasks) => this.parkedLoaded(tasks));
  }

  /** Parked waits were read back into memory (a writer's scheduler learns their deadlines). */
  protected parkedLoaded(_tasks: readonly Task[]): void {}

  /** The session's id. */
  get id(): string {
    return this.state.id;
  }

  /** The version of the last commit this session adopted. */
  get version(): number {
    return this.state.version;
  }

  /** The owner epoch this session writes with (read-only sessions: the epoch they loaded). */
  get epoch(): number {
    return this.state.epoch;
  }

  /** A Submission by id, also one that left the working set (read from storage). */
  readSubmission(submissionId: string): Promise<Submission | undefined> {
    return this.history.readSubmission(submissionId);
  }

  /** The Submission accepted for a client's `requestId`, also one that left the working set. */
  readSubmissionForRequest(requestId: string): Promise<Submission | undefined> {
    return this.history.readSubmissionForRequest(requestId);
  }

  /** Submissions newest first, a page at a time (`before`: the `next` of the previous page). */
  readSubmissions(options?: { before?: number; limit?: number }): Promise<SubmissionPage> {
    return this.history.readSubmissions(options);
  }

  /** A task by id, also one that left the working set; `readTaskTree` reads a whole tree by its root. */
  readTask(taskId: string): Promise<Task | undefined> {
    return this.history.readTask(taskId);
  }

  readTaskTree(rootId: string): Promise<Task[]> {
    return this.history.readTaskTree(rootId);
  }

  /** One Submission as of the current version, or undefined when there is none with this id. */
  submission(submissionId: string): Submission | undefined {
    return this.state.submission(submissionId);
  }

  /** One task as of the current version, if the working set holds it (`readTask` reads evicted ones). */
  task(taskId: string): Task | undefined {
    return this.state.task(taskId);
  }

  /**
   * What the session waits for from outside, of the work a view shows (as `view().pending`). Parked waits
   * left in storage on open are not among them — nor one read back that no commit has moved on since:
   * `parkedInStorage` counts them, `readParkedWaits` lists them.
   */
  pending(): PendingWait[] {
    return pendingWaits(shownTasks(this.state));
  }

  /**
   * The signal stored for `key` as it is now — kept early (no wait has taken it), or taken (`consumedBy`) —
   * or undefined when the key has none (never sent, or dropped). Does not check a payload: `checkSignal` does.
   */
  readSignal(key: string): Promise<Signal | undefined> {
    return this.history.readSignal(key);
  }

  /**
   * The signals no wait has taken yet (they came before their wait), oldest first: each is taken when a wait
   * for its key begins, dropped when its definition's `keepEarlyMs` runs out, or by `dropEarlySignal`.
   * At most `maxEarlySignals` are kept, all in memory.
   */
  earlySignals(): Signal[] {
    return [...this.state.signals.values()].sort((a, b) => a.version - b.version);
  }

  /** How many parked waits stayed in storage when the session opened, not moved on by a commit since. */
  get parkedInStorage(): number {
    return this.state.parkedInStorage;
  }

  /** The pending waits of parked waits still parked in storage (read back or not), newest first, a page at a time. */
  readParkedWaits(options?: { before?: string; limit?: number }) {
    return this.parked.readPage(options);
  }

  /**
   * Every pending wait — in memory and parked in storage — a bounded page at a time: up to `limit` (default
   * 100, at most 1,000) waiting tasks, newest first, `next` to pass as `before` for the page after, and how
   * many of the page's keys were read from storage (`stored`). With `prefix`, only keys that start with it.
   */
  readPending(options?: { before?: string; limit?: number; prefix?: string }) {
    return this.parked.readAll(options);
  }

  /** How many Submissions have not ended yet (accepted or running). O(1). */
  unfinishedSubmissions(): number {
    return this.state.unfinishedSubmissions;
  }

  /** The Submission accepted for a client's `requestId`, if any. */
  submissionForRequest(requestId: string): Submission | undefined {
    return this.state.submissionByRequest(requestId);
  }

  /** A snapshot of the session at its current version; `options` trim it for display. */
  view(options?: ViewOptions): SessionView {
    return buildView(this.state, options);
  }

  /** One conversation's record (its `entryCount` is the seq its next entry gets), if it exists. */
  conversation(conversationId: string): Conversation | undefined {
    return this.state.conversation(conversationId);
  }

  /** Entries `fromSeq` ≤ seq < `toSeq` of a conversation, read from storage and validated. */
  readEntries(conversationId: string, fromSeq: number, toSeq?: number): Promise<Entry[]> {
    return this.history.readEntries(conversationId, fromSeq, toSeq);
  }

  /** Committed changes after `afterVersion` from the change log, validated, oldest first. */
  readChanges(afterVersion: number, limit = CHANGE_PAGE) {
    return this.history.readChanges(afterVersion, limit);
  }
}
