/**
 * The leading tab's writer, opened again (a new owner epoch) when a storage failure stopped it — a full
 * disk, a store that failed — so the tab leads on once storage takes writes: its own calls and its drains
 * of the inbox ask for it. A writer fenced by a newer owner (a tab that took the lock, the edge) is not
 * reopened: that one leads, and the epoch is not taken back.
 */
import { type Session, SessionStoppedError } from "../src/index.ts";

export interface RecoveringTab {
  readonly sessionId: string;
  /** The leading tab's session. */
  current(): Session;
  /** Whether the tab still holds the session's lock. */
  holdsLock(): boolean;
  /** Opens and starts a new writer in place of the stopped one (if the tab still leads). */
  reopen(): Promise<void>;
}

export class WriterRecovery {
  private reopening: Promise<void> | undefined;

  constructor(private readonly tab: RecoveringTab) {}

  /** The writer, reopened first if it stopped; throws the store's error while it still refuses. */
  async writer(): Promise<Session> {
    const current = this.tab.current();
    if (current.status !== "stopped") return current;
    const why = current.stoppedBecause;
    if (why?.code === "stale-owner" || !this.tab.holdsLock())
      throw why ?? new SessionStoppedError(this.tab.sessionId);
    this.reopening ??= this.tab.reopen().finally(() => {
      this.reopening = undefined;
    });
    await this.reopening;
    return this.tab.current();
  }
}
