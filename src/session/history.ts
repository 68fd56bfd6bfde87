/**
 * Reads of what a session holds in storage beyond memory: older entries, the change log, and settled work
 * that left the working set (DESIGN §9) — by id, by requestId, and by page. Memory answers first.
 */
import { HistoryTruncatedError } from "../errors.ts";
import type { CommitRecord, Entry, Signal, Submission, Task } from "../records/schemas.ts";
import {
  CommitRecordSchema,
  EntrySchema,
  SignalSchema,
  SubmissionSchema,
  TaskSchema,
} from "../records/schemas.ts";
import { validateRecord } from "../records/validate.ts";
import type { Storage, StoredRecord } from "../storage/storage.ts";
import type { SessionState } from "./state.ts";

/** A page of Submissions, newest first; `next` is the `before` of the page after it, `null` at the end. */
export interface SubmissionPage {
  readonly submissions: readonly Submission[];
  readonly next: number | null;
}

/** How many change-log records one read returns by default. */
export const CHANGE_PAGE = 500;

export class SessionHistory {
  constructor(
    private readonly state: SessionState,
    private readonly storage: Storage,
  ) {}

  /** Entries `fromSeq` ≤ seq < `toSeq` of a conversation, read from storage and validated. */
  async readEntries(conversationId: string, fromSeq: number, toSeq?: number): Promise<Entry[]> {
    const end = toSeq ?? this.state.conversation(conversationId)?.entryCount ?? 0;
    const rows = await this.storage.readEntries(this.state.id, conversationId, fromSeq, end);
    return rows.map((row) => validateRecord(EntrySchema, row.value, row.key));
  }

  /** Entries from `fromSeq` to the end of a conversation: from memory when it holds them, else from storage. */
  async readEntriesFrom(conversationId: string, fromSeq: number): Promise<Entry[]> {
    const held = this.state.conversations.get(conversationId);
    if (!held) return [];
    const first = held.entries[0]?.seq ?? held.record.entryCount;
    if (fromSeq >= first) return held.entries.filter((e) => e.seq >= fromSeq);
    const older = await this.readEntries(conversationId, fromSeq, first);
    return [...older, ...held.entries];
  }

  /**
   * Adopts, in order, the changes other writers committed after the state's version; returns how many.
   * Throws `HistoryTruncatedError` when the change log no longer holds the next change: pruned while this
   * copy lagged, it can only be reloaded, never brought up to date.
   */
  async adoptNewChanges(adopt: (change: CommitRecord) => void): Promise<number> {
    let adopted = 0;
    for (;;) {
      // A session replaced since this one opened it is refused by the read (see `readChanges`).
      const { changes, oldestRetained } = await this.readChanges(this.state.version, CHANGE_PAGE);
      // Compared with the version now (a concurrent refresh may have adopted some meanwhile).
      if (oldestRetained > this.state.version + 1)
        throw new HistoryTruncatedError(this.state.version, oldestRetained);
      const next = changes.filter((c) => c.version > this.state.version);
      if (next.length === 0) return adopted;
      for (const change of next) {
        if (change.version !== this.state.version + 1) return adopted;
        adopt(change);
        adopted++;
      }
    }
  }

  /** A Submission by id: from memory, else from storage (it may have left the working set). */
  async readSubmission(submissionId: string): Promise<Submission | undefined> {
    const held = this.state.submission(submissionId);
    if (held) return held;
    return submission(await this.storage.readSubmission(this.state.id, submissionId));
  }

  /** The Submission accepted for `requestId`: from memory, else from the store's requestId index. */
  async readSubmissionForRequest(requestId: string): Promise<Submission | undefined> {
    const held = this.state.submissionByRequest(requestId);
    if (held) return held;
    return submission(await this.storage.readRequest(this.state.id, requestId));
  }

  /** Submissions accepted before version `before` (default: all), newest first, `limit` at a time. */
  async readSubmissions(options: { before?: number; limit?: number } = {}): Promise<SubmissionPage> {
    const limit = Math.max(1, Math.min(options.limit ?? 50, 500));
    const page = await this.storage.readItems(
      this.state.id,
      options.before ?? Number.MAX_SAFE_INTEGER,
      limit,
    );
    const byId = new Map(page.submissions.map((row) => [row.key.slice("submissions/".length), row]));
    const submissions: Submission[] = [];
    for (const item of page.items) {
      const held = this.state.submission(item.id);
      const found = held ?? submission(byId.get(item.id));
      if (found) submissions.push(found);
    }
    const last = page.items.at(-1);
    return { submissions, next: page.items.length === limit && last ? last.version : null };
  }

  /** A task by id: from memory, else from storage. */
  async readTask(taskId: string): Promise<Task | undefined> {
    const held = this.state.task(taskId);
    if (held) return held;
    const row = await this.storage.readTask(this.state.id, taskId);
    return row && validateRecord(TaskSchema, row.value, row.key);
  }

  /** The signal stored for `key`: a kept early one from memory, else its row (a taken one left memory). */
  async readSignal(key: string): Promise<Signal | undefined> {
    const kept = this.state.signal(key);
    if (kept) return kept;
    const [row] = await this.storage.readSignals(this.state.id, [key]);
    return row && validateRecord(SignalSchema, row.value, row.key);
  }

  /** Every task of the tree under `rootId`, read from storage (the root first, then level by level). */
  async readTaskTree(rootId: string): Promise<Task[]> {
    const rows = await this.storage.readTaskTree(this.state.id, rootId);
    return rows.map(
      (row) =>
        this.state.task(row.key.slice("tasks/".length)) ?? validateRecord(TaskSchema, row.value, row.key),
    );
  }

  /**
   * Committed changes after `afterVersion` from the change log, validated, oldest first. A store whose
   * session was replaced since this one opened it (rebuilt from its other host) holds another history,
   * whose versions are not this one's: refused (`HistoryTruncatedError`, `replaced`) — for a refresh, a
   * subscription catching up and a page of history alike.
   */
  async readChanges(
    afterVersion: number,
    limit = CHANGE_PAGE,
  ): Promise<{ changes: CommitRecord[]; oldestRetained: number }> {
    const read = await this.storage.readChanges(this.state.id, afterVersion, limit);
    const held = this.state.incarnation;
    if (read.incarnation !== undefined && held !== undefined && read.incarnation !== held)
      throw new HistoryTruncatedError(afterVersion, read.oldestRetained, true);
    return {
      changes: read.changes.map((row) => validateRecord(CommitRecordSchema, row.value, row.key)),
      oldestRetained: read.oldestRetained,
    };
  }
}

function submission(row: StoredRecord | undefined): Submission | undefined {
  return row && validateRecord(SubmissionSchema, row.value, row.key);
}
