/**
 * What a tab's callers wait for on a session it may not drive: a Submission the leader creates for an
 * inbox row, a Submission's end, a signal stored. Each resolves from the session this tab has open now,
 * whichever it is after role changes, and rejects if the leader refuses the row it waits for.
 */
import {
  type ChangeListener,
  type Json,
  type Session,
  type SignalOptions,
  type SignalReceipt,
  SignalRefusedError,
} from "../src/index.ts";
import type { InboxRelay } from "./inbox-relay.ts";

/** The tab as its waiters see it. */
export interface WatchedTab {
  readonly session: Session | undefined;
  /** Every committed change after `fromVersion`, across role changes. */
  subscribe(fromVersion: number, listener: ChangeListener): () => void;
}

export class SessionWatch {
  private readonly observers = new Set<() => void>();

  constructor(
    private readonly tab: WatchedTab,
    private readonly inbox: InboxRelay,
  ) {}

  /**
   * Resolves with what `pick` finds once the session shows it; with `row` (an inbox row this tab queued,
   * `inboxRowId`), rejects instead if the leader refuses that row for good.
   */
  observe<T>(pick: (session: Session) => T | undefined, row?: string): Promise<T> {
    return new Promise((resolve, reject) => {
      let stopRefusal: () => void = () => undefined;
      const check = () => {
        const found = this.tab.session ? pick(this.tab.session) : undefined;
        if (found === undefined) return;
        this.observers.delete(check);
        stopRefusal();
        resolve(found);
      };
      this.observers.add(check);
      check();
      const stop = this.tab.subscribe(this.tab.session?.version ?? 0, () => {
        check();
        if (!this.observers.has(check)) stop();
      });
      if (row === undefined || !this.observers.has(check)) return;
      stopRefusal = this.inbox.onRefused(row, (error) => {
        this.observers.delete(check);
        stop();
        stopRefusal();
        reject(error);
      });
    });
  }

  notify(): void {
    for (const check of [...this.observers]) check();
  }

  /**
   * Resolves once a change stores `key`'s signal; rejects if another one won, or it can no longer be taken
   * (seen here, or the leader refused the inbox row `row` — its app version may check more than this one).
   */
  signal(key: string, payload: Json, options: SignalOptions, row: string): Promise<SignalReceipt> {
    return new Promise((resolve, reject) => {
      const stopRefusal = this.inbox.onRefused(row, (error) => {
        stop();
        reject(error);
      });
      const stop = this.tab.subscribe(this.tab.session?.version ?? 0, (change) => {
        const stored = change.signals?.find((s) => s.key === key);
        if (stored) {
          stop();
          stopRefusal();
          if (JSON.stringify(stored.payload) === JSON.stringify(payload))
            resolve({
              signal: stored,
              duplicate: stored.requestId !== options.requestId,
              ...(stored.consumedBy !== undefined && { takenBy: stored.consumedBy }),
            });
          else
            reject(
              new SignalRefusedError(
                "signal-conflict",
                key,
                `"${key}" already received a different signal (request ${stored.requestId})`,
              ),
            );
          return;
        }
        // The wait may have ended meanwhile (a cancelled approval): the leader refused it, so say so here.
        this.tab.session?.checkSignal(key, payload, options).catch((error: unknown) => {
          stop();
          stopRefusal();
          reject(error);
        });
      });
    });
  }
}
