/**
 * What a tab's callers ask of its session, whichever role the tab holds. The leading tab commits each input
 * on its writer. A follower checks it as the leader would (a bad one is refused here, never queued), answers
 * it from its copy when it repeats one already stored, else leaves it in the durable inbox (the
 * acknowledgement) and resolves once the leader committed it — or rejects if the leader refused it.
 */
import {
  HistoryTruncatedError,
  InvalidArgumentError,
  isSubmissionFinished,
  type Json,
  parseSubmitInput,
  type Session,
  SessionClosedError,
  SessionNotFoundError,
  type Signal,
  type SignalOptions,
  type SignalReceipt,
  type Submission,
  type SubmitInput,
} from "../src/index.ts";
import { type InboxRow, inboxCancel, inboxDrop, inboxRowId } from "./inbox.ts";
import type { SessionWatch } from "./session-watch.ts";

/** What a tab's inputs need of the tab. */
export interface InputTab {
  readonly sessionId: string;
  /** Whether the session is linked to an edge host (a tab may be rebuilding its copy from there). */
  readonly linked: boolean;
  readonly watch: SessionWatch;
  /** The session this tab has open now (read-only while it follows), if the session exists yet. */
  current(): Session | undefined;
  role(): "follower" | "leader" | "closed";
  /** The leading tab's writer (opened again when a storage failure stopped it). */
  writer(): Promise<Session>;
  /** Queues a row for the leader (taken by this tab itself if it leads meanwhile). */
  queue(row: InboxRow): Promise<void>;
  /** Adopts what the store holds since the copy's version (or opens the copy again). */
  refreshCopy(session: Session): Promise<void>;
}

export class TabInputs {
  /** This tab's drops of early signals waiting in the inbox, by key (a signal of the key waits for its drop). */
  private readonly drops = new Map<string, Promise<unknown>>();

  constructor(private readonly tab: InputTab) {}

  /**
   * The leading tab's writer, or undefined while the tab follows. Told at once: a follower's path runs on
   * in the same task (a drop is noted before the call returns, so a signal of its key right after waits).
   */
  private leader(): Promise<Session> | undefined {
    return this.tab.role() === "leader" && this.tab.current() ? this.tab.writer() : undefined;
  }

  private assertOpen(): void {
    if (this.tab.role() === "closed") throw new SessionClosedError(this.tab.sessionId);
  }

  /** A Submission for `input`: the one a repeat names, or the one the leader creates for the queued row. */
  async submit(input: SubmitInput): Promise<Submission> {
    this.assertOpen();
    const leader = this.leader();
    if (leader !== undefined) return (await leader).submit(input);
    // Bad input is refused here, with the same typed error the leader would give, never queued.
    parseSubmitInput(input);
    // A repeat gets the first Submission, also one that left memory (the leader would commit nothing).
    const known = await this.tab.current()?.readSubmissionForRequest(input.requestId);
    if (known) return known;
    // Watched from before it is queued (this tab may lead and take it before the write returns). The leader
    // may still refuse it (its app version checks more than this one): then it is rejected.
    const pick = (session: Session) => session.submissionForRequest(input.requestId);
    return this.tab.watch.observe(pick, { row: inboxRowId(input), queued: this.tab.queue(input) });
  }

  async signal(key: string, payload: Json, options: SignalOptions): Promise<SignalReceipt> {
    // A drop of the key's early signal this tab queued comes first: a repeat of that signal is then new.
    await this.drops.get(key)?.catch(() => undefined);
    this.assertOpen();
    const leader = this.leader();
    if (leader !== undefined) return (await leader).signal(key, payload, options);
    const session = this.tab.current();
    if (!session) throw new SessionNotFoundError(this.tab.sessionId);
    // An early signal this copy keeps may have been dropped already (another tab's drop, committed before
    // this call, that this copy has not adopted yet): the repeat, or the conflict, is answered from what
    // this browser's store holds, not from a copy behind it. (A signal a wait took is never dropped.) Not
    // for a linked session, whose store a tab may be rebuilding from its edge (a refresh then would stack
    // the rebuilt history on the discarded one), nor for a session closing (a hand-off, a demotion): those
    // answer from the copy, as before. A failed refresh does too.
    if (!this.tab.linked && session.status === "open" && session.earlySignals().some((k) => k.key === key))
      await this.tab.refreshCopy(session);
    // A copy that lagged past the change log's pruning was opened again: the new one answers.
    const repeat = await (this.tab.current() ?? session).checkSignal(key, payload, options);
    if (repeat) return repeat;
    const row = { signal: { key, payload, requestId: options.requestId } };
    return this.tab.watch.signal(key, payload, options, {
      row: inboxRowId(row),
      queued: this.tab.queue(row),
    });
  }

  async dropEarlySignal(key: string): Promise<Signal | undefined> {
    this.assertOpen();
    const leader = this.leader();
    if (leader !== undefined) return (await leader).dropEarlySignal(key);
    const session = this.tab.current();
    if (!session) throw new SessionNotFoundError(this.tab.sessionId);
    let kept = session.earlySignals().find((signal) => signal.key === key);
    if (!kept) {
      // This copy may not have caught up yet with what the leader stored (a signal this tab just sent).
      await session.refresh().catch(() => undefined);
      kept = session.earlySignals().find((signal) => signal.key === key);
    }
    if (!kept) return undefined;
    const row = inboxDrop(key, kept.version);
    const dropping = this.tab.watch.dropped(kept, { row: inboxRowId(row), queued: this.tab.queue(row) });
    this.drops.set(key, dropping);
    const forget = () => {
      if (this.drops.get(key) === dropping) this.drops.delete(key);
    };
    dropping.then(forget, forget);
    return dropping;
  }

  async cancelSubmission(submissionId: string, reason?: string): Promise<Submission> {
    this.assertOpen();
    const leader = this.leader();
    if (leader !== undefined) return (await leader).cancelSubmission(submissionId, reason);
    const session = this.tab.current();
    if (!session) throw new SessionNotFoundError(this.tab.sessionId);
    await this.catchUp(session, submissionId);
    const known = session.submission(submissionId) ?? (await session.readSubmission(submissionId));
    if (!known) {
      const problem = `submission ${submissionId} does not exist`;
      throw new InvalidArgumentError(problem, [{ path: "submissionId", message: problem }]);
    }
    if (isSubmissionFinished(known)) return known; // cancelling it changes nothing, as on the leader
    const row = inboxCancel(submissionId, reason);
    return this.tab.watch.cancelled(submissionId, { row: inboxRowId(row), queued: this.tab.queue(row) });
  }

  /**
   * A follower's copy that does not hold the Submission may not have adopted the commit that created it
   * yet: it adopts what the store holds, so an id is unknown only once the store does not have it either.
   * (Not a linked copy, which a tab may be rebuilding from its edge.)
   */
  private async catchUp(session: Session, submissionId: string): Promise<void> {
    if (this.tab.role() === "follower" && !this.tab.linked && !session.submission(submissionId))
      await this.tab.refreshCopy(session);
  }

  /** The Submission once it has ended, whichever tab drives it (see `BrowserSessionHost.wait`). */
  async wait(submissionId: string): Promise<Submission> {
    for (;;) {
      const session = this.tab.current() ?? (await this.tab.watch.observe((open) => open));
      try {
        await this.catchUp(session, submissionId);
        return await session.wait(submissionId);
      } catch (error) {
        const role = this.tab.role();
        this.assertOpen();
        // A follower's copy that lagged past the change log's pruning is opened again; a leader stopped by a
        // storage failure opens its session again (or says why it cannot): then the wait goes on there.
        if (error instanceof HistoryTruncatedError && role === "follower") {
          await this.tab.refreshCopy(session);
          continue;
        }
        if (session.status === "stopped" && role === "leader" && session === this.tab.current()) {
          await this.tab.writer();
          continue;
        }
        if (session.status !== "closed") throw error;
        // Closed by a role change (a demotion, a reopened copy): wait on the session that replaces it.
        await this.tab.watch.observe((open) => (open !== session ? open : undefined));
      }
    }
  }
}
