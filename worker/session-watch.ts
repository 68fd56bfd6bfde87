/**
 * What a tab's callers wait for on a session it may not drive: a Submission the leader creates for an
 * inbox row, a Submission's end, a signal stored, an early signal dropped. Each resolves from the changes
 * this tab sees and from the session it has open now, whichever it is after role changes (a change it
 * cannot see — its copy rebuilt, its subscription cut off — is read from that session's state), and rejects
 * if the row it waits for could not be queued or the leader refused it. Whatever a wait listened to is
 * released when it settles.
 */
import {
  type ChangeListener,
  type CommitRecord,
  isSubmissionFinished,
  type Json,
  receiptFor,
  type Session,
  type Signal,
  type SignalOptions,
  type SignalReceipt,
  SignalRefusedError,
  type Submission,
} from "../src/index.ts";
import type { InboxRelay } from "./inbox-relay.ts";

/** The tab as its waiters see it. */
export interface WatchedTab {
  readonly session: Session | undefined;
  /** Every committed change after `fromVersion`, across role changes (`onError`: it cannot go on). */
  subscribe(fromVersion: number, listener: ChangeListener, onError?: (error: Error) => void): () => void;
}

/** An inbox row this tab is queueing (`inboxRowId`), and the write that queues it. */
export interface QueuedRow {
  readonly row: string;
  readonly queued: Promise<void>;
}

type Settle<T> = (outcome: { value: T } | { error: unknown }) => void;

export class SessionWatch {
  /** Checks run whenever the tab reopens or refreshes its session. */
  private readonly observers = new Set<() => void>();
  /** How to end each wait not settled yet (`close`). */
  private readonly open = new Set<(error: Error) => void>();

  constructor(
    private readonly tab: WatchedTab,
    private readonly inbox: InboxRelay,
  ) {}

  /** Resolves with what `pick` finds once the session shows it. */
  observe<T>(pick: (session: Session) => T | undefined, queued?: QueuedRow): Promise<T> {
    return this.until<T>(queued, (settle) => () => {
      const found = this.tab.session ? pick(this.tab.session) : undefined;
      if (found !== undefined) settle({ value: found });
    });
  }

  /**
   * Resolves once a change stores `key`'s signal (answered as the leader would: this call's receipt, a
   * repeat, or the conflict); rejects if it can no longer be taken (a change ended its wait).
   */
  signal(key: string, payload: Json, options: SignalOptions, queued: QueuedRow): Promise<SignalReceipt> {
    return this.until<SignalReceipt>(queued, (settle) => (change) => {
      const session = this.tab.session;
      if (!session) return;
      /** Answered as the leader would once `stored` is the key's signal: a receipt, or the conflict. */
      const answer = (stored: Signal) => {
        try {
          settle({ value: receiptFor(session.registry, stored, payload, options) });
        } catch (error) {
          settle({ error });
        }
      };
      const stored = change?.signals?.find((s) => s.key === key);
      if (stored) return answer(stored);
      // The wait may have ended meanwhile (a cancelled approval): the leader refused it, so say so here. Or
      // the key's signal was stored out of sight: taken, it left memory (the leader committed nothing), or
      // in a change this tab did not see (its copy rebuilt, its subscription cut off: `change` is none).
      // Without a change only a stored signal answers: the row may still be queued, and a refusal now could
      // be followed by its delivery (a new wait on the key beginning before the leader takes the row).
      // A full copy says nothing yet: the leader may still take the row (a wait on its key may begin first),
      // and its own refusal comes back through the inbox.
      session.checkSignal(key, payload, options).then(
        (repeat) => repeat && answer(repeat.signal),
        (error: unknown) => change && !isFull(error) && settle({ error }),
      );
    });
  }

  /**
   * Resolves once a change ends the early signal `kept`: with it when that change dropped it, undefined
   * when a wait took it first (there was then none to drop, as the leader would have answered).
   */
  dropped(kept: Signal, queued: QueuedRow): Promise<Signal | undefined> {
    const same = (s: { key: string; version: number }) => s.key === kept.key && s.version === kept.version;
    return this.until<Signal | undefined>(queued, (settle) => (change) => {
      if (change) {
        if (change.droppedSignals?.some(same)) settle({ value: kept });
        else if (change.signals?.some((s) => same(s) && s.consumedBy !== undefined))
          settle({ value: undefined });
        return;
      }
      // Not seen in a change (reopened, a rebuilt copy, a subscription cut off): what the session holds says
      // it — its stored signal taken by a wait, or none (dropped). A failed read says nothing: the next
      // change or reopen asks again.
      const session = this.tab.session;
      if (!session || session.earlySignals().some(same)) return;
      session.readSignal(kept.key).then(
        (stored) => {
          const taken = stored !== undefined && same(stored) && stored.consumedBy !== undefined;
          settle({ value: taken ? undefined : kept });
        },
        () => undefined,
      );
    });
  }

  /**
   * Resolves once the session shows a cancel of the Submission committed: its task asked to stop, or the
   * Submission ended (by the cancel, or before it came). Read from the session's state, not from a change:
   * a cancel of a task already asked to stop commits nothing new. One that left memory has ended.
   */
  cancelled(submissionId: string, queued: QueuedRow): Promise<Submission> {
    return this.until<Submission>(queued, (settle) => () => {
      const session = this.tab.session;
      if (!session) return;
      const held = session.submission(submissionId);
      if (!held) {
        session.readSubmission(submissionId).then(
          (stored) => stored && isSubmissionFinished(stored) && settle({ value: stored }),
          () => undefined, // the next change or reopen reads again
        );
        return;
      }
      const task = held.taskId === undefined ? undefined : session.task(held.taskId);
      if (isSubmissionFinished(held) || task?.cancelRequested !== undefined) settle({ value: held });
    });
  }

  /** Rejects every wait not settled yet with `error` (the tab closed: nothing will settle them here). */
  close(error: Error): void {
    for (const end of [...this.open]) end(error);
  }

  notify(): void {
    for (const check of [...this.observers]) check();
  }

  /**
   * A promise settled by `check` — run now, on every change (with it) and whenever the tab reopens its
   * session — or by the failure of `queued`'s write or the leader's refusal of its row. Everything is
   * listened to before the row is written, so nothing is missed however fast the row is taken.
   */
  private until<T>(
    queued: QueuedRow | undefined,
    start: (settle: Settle<T>) => (change?: CommitRecord) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const stops: (() => void)[] = [];
      const settle: Settle<T> = (outcome) => {
        if (settled) return;
        settled = true;
        this.open.delete(end);
        for (const stop of stops) stop();
        if ("error" in outcome) reject(outcome.error);
        else resolve(outcome.value);
      };
      const end = (error: Error) => settle({ error });
      this.open.add(end);
      const check = start(settle);
      const reopened = () => check();
      this.observers.add(reopened);
      stops.push(() => this.observers.delete(reopened));
      stops.push(
        this.tab.subscribe(
          this.tab.session?.version ?? 0,
          (change) => check(change),
          () => check(),
        ),
      );
      if (queued) {
        stops.push(this.inbox.onRefused(queued.row, (error) => settle({ error })));
        queued.queued.catch((error: unknown) => settle({ error }));
      }
      check();
      if (settled) for (const stop of stops) stop(); // settled while it was still listening
    });
  }
}

/** A refusal for the bound on early signals, as a copy of the session sees it. */
const isFull = (error: unknown) => error instanceof SignalRefusedError && error.code === "early-signals-full";
