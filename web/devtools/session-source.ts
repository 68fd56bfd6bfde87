/** What every source the devtools read a session from offers (`sources.ts` lists the sources). */

import type {
  CommitRecord,
  Entry,
  PendingWait,
  RecoveryPlan,
  SessionView,
  Signal,
  Submission,
  Task,
} from "../../src/index.ts";

/** A session the devtools follow, read-only. */
export interface SessionSource {
  readonly label: string;
  /** The history base (empty session, or the view at attach time when older changes were pruned). */
  readonly base: SessionView;
  /**
   * When `base` is the view at attach time but the change log reaches back to version 1: reads those
   * earlier changes (1 … base.version), so the page shows the latest version at once and can scrub back
   * once they are in.
   */
  earlier?(): Promise<CommitRecord[]>;
  /** Delivers retained changes after the base, then live ones, in order. Returns a stop function. */
  follow(
    onChanges: (changes: CommitRecord[]) => void,
    onError: (error: Error) => void,
    onStatus?: (status: "live" | "reconnecting") => void,
    /**
     * The stored session was replaced (a linked session's copy rebuilt from the edge): what the page holds
     * is history no longer stored, and it must attach again.
     */
    onReplaced?: () => void,
  ): () => void;
  /**
   * What resume() would do to each unfinished task now. Local sessions need the app's registry for it;
   * edge sessions answer from their Durable Object (read-only when it is not running).
   */
  previewRecovery?(): Promise<RecoveryPlan>;
  /** A write the devtools offer, only on request: cancelling a submission (edge only). */
  cancelSubmission?(submissionId: string): Promise<Submission>;
  /**
   * The other: answering a wait (a signal), on request. Edge: `POST …/signals/:key`. Local: through the
   * session's durable inbox, which the leading tab drains (the devtools never write the session itself).
   */
  answerWait?(key: string, payload: unknown, requestId: string): Promise<void>;
  /**
   * Submissions beyond the view's working set, newest first, from storage (local sessions): a page of
   * them accepted before version `before`, and the `before` of the next page (null at the end).
   */
  readSubmissions?(
    before: number | undefined,
    limit: number,
  ): Promise<{ submissions: readonly Submission[]; next: number | null }>;
  /**
   * Who drives the session now. Local sessions ask the Web Locks API whether a tab holds the session's
   * leader lock (the devtools never take it); an edge session asks its ownership record (`GET …/replica`):
   * its Durable Object, or a linked tab while that tab's lease lasts. Absent where it cannot be known.
   */
  writer?(): Promise<WriterState>;
  /**
   * Parked waits left in storage, which the view's pending list does not hold (a session with many waits,
   * DESIGN §9): how many there are now, and a page of them, newest first, with the `before` of the next.
   */
  readParkedWaits?(
    before: string | undefined,
    limit: number,
  ): Promise<{ parked: number; waits: readonly PendingWait[]; next: string | null }>;
  /**
   * The signals the session keeps now that no wait has taken yet (they came before their wait), oldest
   * first, as the session holds them at its latest version: the first `limit` of them, and how many in all.
   */
  readEarlySignals?(limit: number): Promise<{ signals: readonly Signal[]; count: number }>;
  /**
   * Drops one of them, on request. Edge: `DELETE …/signals/:key`. Local: through the session's durable inbox,
   * which the leading tab drains (it drops the signal only if it is still the one listed).
   */
  dropEarlySignal?(key: string): Promise<void>;
  /** A task tree as storage holds it now (for a Submission beyond the working set). */
  readTaskTree?(rootId: string): Promise<Task[]>;
  /**
   * A conversation's entries before `before` (a seq), from storage, up to `limit` of them, and the `before`
   * of the next page (null at the conversation's start): entries older than the view's tail.
   */
  readEntries?(
    conversationId: string,
    before: number,
    limit: number,
  ): Promise<{ entries: readonly Entry[]; next: number | null }>;
  close(): Promise<void>;
}

/** Who drives a session's open work (see `SessionSource.writer`). */
export type WriterState =
  /** Local: a tab holds the session's leader lock. */
  | { readonly state: "leading" }
  /** Local: no tab does; open work waits until one opens the session. */
  | { readonly state: "none" }
  /** Edge: the Durable Object writes (its alarm wakes open work with no request). */
  | { readonly state: "edge" }
  /** Edge: a linked browser tab leads while its lease lasts. */
  | { readonly state: "tab"; readonly leaseUntil: number }
  /** Edge: the linked tab's lease ran out; the Durable Object takes over on its alarm. */
  | { readonly state: "lapsed"; readonly leaseUntil: number };
