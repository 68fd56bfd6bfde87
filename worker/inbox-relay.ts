/**
 * Both ends of one session's durable inbox in one tab. As a follower it queues inputs for the leader and
 * hears when the leader refuses one for good; as the leader it drains the inbox — one drain at a time, so
 * no row is taken twice — and tells every tab waiting for a row it can never accept why, this tab included.
 */
import { InvalidArgumentError, KernelError, type Session, SignalRefusedError } from "../src/index.ts";
import { fromWireError, toWireError, type WireError } from "./error-wire.ts";
import { acceptInboxRow, DurableInbox, type InboxRow, inboxRowId, isInboxSignal } from "./inbox.ts";

/** What the relay says between the tabs of a session. */
export type InboxMessage =
  /** A follower queued an input: the leader drains. */
  | { type: "inbox" }
  /** The leader dropped the row `row` (`inboxRowId`) for good; `key` names a signal's key. */
  | { type: "refused"; row: string; error: WireError; key?: string };

/**
 * Why a queued input is refused for good at once. Any other kernel error (a full disk, a closed store, a
 * conversation this leader could not load) is retried for as long as it lasts; an error of the app's own
 * code counts against the row (see {@link ROW_ATTEMPTS}).
 */
const REFUSALS: ReadonlySet<string> = new Set([
  "invalid-argument",
  "invalid-record",
  "record-too-large",
  "unknown-signal",
  "signal-conflict",
  "signal-not-awaited",
  "wait-not-found",
  "early-signals-full",
  // A requestId whose Submission retention removed: never run again (a rebase's kept input, a late repeat).
  "duplicate-request",
]);

/**
 * A row that failed, for a reason of its own, in this many drains in a row, and over at least
 * {@link ROW_PATIENCE_MS} (the drains retry it 1 s, then 2 s apart; followers' messages start more), is
 * dropped: the app's code fails on it every time, and it must not hold back the rows queued after it.
 */
export const ROW_ATTEMPTS = 3;
export const ROW_PATIENCE_MS = 3_000;

type SignalRefusal = ConstructorParameters<typeof SignalRefusedError>[0];
const SIGNAL_REFUSALS: ReadonlySet<string> = new Set<SignalRefusal>([
  "unknown-signal",
  "signal-conflict",
  "signal-not-awaited",
  "wait-not-found",
  "early-signals-full",
]);

/** How long after a drain of the inbox stopped it is tried again (doubled for each failure in a row)… */
const DRAIN_RETRY_MS = 1_000;
/** …up to this. */
const DRAIN_RETRY_MAX_MS = 60_000;

export class InboxRelay {
  private readonly inbox: DurableInbox;
  /** Who waits for each row this tab queued, to be told if the leader refuses it. */
  private readonly waiting = new Map<string, Set<(error: Error) => void>>();
  /** The drain under way (settled when none is), and the one asked for meanwhile, run after it. */
  private running: Promise<void> = Promise.resolve();
  private next: Promise<void> | undefined;
  /** Per row (`inboxRowId`), how many drains in a row it failed for a reason of its own, since when. */
  private readonly failures = new Map<string, { count: number; since: number }>();
  /** The leader's session those failures were counted under. */
  private countedFor: Session | undefined;
  /** How many rows the drains took off the inbox (accepted or dropped) so far. */
  private taken = 0;
  /** A drain that failed for a passing reason (a full disk) is tried again then. */
  private retry: ReturnType<typeof setTimeout> | undefined;
  /** Drains that failed in a row: each waits twice as long as the one before (at most a minute). */
  private failedDrains = 0;

  constructor(
    private readonly sessionId: string,
    database: string,
    private readonly post: (message: InboxMessage) => void,
  ) {
    this.inbox = new DurableInbox(`${database}:inbox`);
  }

  /** Stores `row` durably (that is the acknowledgement) and tells the leader. */
  async queue(row: InboxRow): Promise<void> {
    await this.inbox.put(this.sessionId, row);
    this.post({ type: "inbox" });
  }

  /** Calls `reject` with the leader's refusal of the row `id` (`inboxRowId`); returns the unsubscribe. */
  onRefused(id: string, reject: (error: Error) => void): () => void {
    const waiting = this.waiting.get(id) ?? new Set();
    this.waiting.set(id, waiting);
    waiting.add(reject);
    return () => {
      waiting.delete(reject);
      if (waiting.size === 0) this.waiting.delete(id);
    };
  }

  /** The leader's refusal of a row, from another tab or this one. */
  refused(message: Extract<InboxMessage, { type: "refused" }>): void {
    const error = revive(message.error, message.key);
    for (const reject of [...(this.waiting.get(message.row) ?? [])]) reject(error);
  }

  /**
   * Accepts every queued input on the leader's session (`leader()` when the drain starts, none if this tab
   * no longer leads); idempotent by requestId, a row deleted only once accepted. A drain asked for while
   * one runs runs once after it, never alongside: two drains over the same rows would take a signal twice,
   * and refuse the second time a signal stored the first.
   */
  drain(leader: () => Session | undefined): Promise<void> {
    if (this.next !== undefined) return this.next;
    const next = this.running.then(() => {
      this.next = undefined;
      return this.drainOnce(leader);
    });
    this.next = next;
    this.running = next.catch(() => undefined);
    return next;
  }

  /**
   * Drains as {@link drain} does, on the leader's session once `ready` resolves. A drain that stopped (a
   * full disk, a closed store, the app's code throwing) leaves its rows queued and is tried again while
   * `leader()` names a session — a second later, then two, four, … up to a minute: the callers waiting for
   * those rows wait. A row the app's code keeps failing on is dropped, its caller told why (`ROW_ATTEMPTS`).
   */
  async drainRetrying(leader: () => Session | undefined, ready: () => Promise<unknown>): Promise<void> {
    const before = this.taken;
    try {
      await ready();
      await this.drain(leader);
      this.failedDrains = 0;
    } catch {
      if (this.taken !== before) this.failedDrains = 0; // it took rows before it stopped
      if (!leader() || this.retry !== undefined) return;
      const delay = Math.min(DRAIN_RETRY_MAX_MS, DRAIN_RETRY_MS * 2 ** this.failedDrains++);
      this.retry = setTimeout(() => {
        this.retry = undefined;
        void this.drainRetrying(leader, ready);
      }, delay);
    }
  }

  /** Settles once no drain is under way or asked for. */
  drained(): Promise<void> {
    return this.running;
  }

  /**
   * A row the session can never accept — a signal whose wait ended since, a row another version of the app
   * queued that checked less — is dropped and its tabs are told why: it must not hold back the rows queued
   * after it. So is a row the app's own code keeps failing on (its `submissionTask` throws for it: see
   * {@link ROW_ATTEMPTS}). Anything else stops the drain; the rows stay for the next one. So does
   * losing the lead: a session on its way out must not refuse what the next leader would take.
   */
  private async drainOnce(leader: () => Session | undefined): Promise<void> {
    const session = leader();
    if (!session) return;
    const rows = await this.inbox.pending(this.sessionId);
    // Failures count for the session that leads now, and for rows still queued (another tab may have
    // taken one while this tab followed).
    if (this.countedFor !== session) this.failures.clear();
    this.countedFor = session;
    const queued = new Set(rows.map(inboxRowId));
    for (const id of this.failures.keys()) if (!queued.has(id)) this.failures.delete(id);
    for (const row of rows) {
      if (leader() !== session) return;
      const id = inboxRowId(row);
      try {
        await acceptInboxRow(session, row);
      } catch (error) {
        if (leader() !== session || !this.isForGood(id, error)) throw error;
        const refused: InboxMessage = {
          type: "refused",
          row: id,
          error: toWireError(error),
          ...(isInboxSignal(row) && { key: row.signal.key }),
        };
        this.post(refused);
        this.refused(refused); // this tab may have queued it while it followed
      }
      this.failures.delete(id);
      await this.inbox.remove(this.sessionId, row);
      this.taken++;
    }
  }

  /**
   * Whether the row `id` is dropped for `error`; counts a failure of its own when it is not yet. Only the
   * app's own errors count: a kernel error that is no refusal (a conversation this leader could not load,
   * a race lost too often) may not happen under the next leader, and the row waits for it.
   */
  private isForGood(id: string, error: unknown): boolean {
    if (error instanceof KernelError) return REFUSALS.has(error.code);
    const failed = this.failures.get(id) ?? { count: 0, since: Date.now() };
    failed.count++;
    this.failures.set(id, failed);
    return failed.count >= ROW_ATTEMPTS && Date.now() - failed.since >= ROW_PATIENCE_MS;
  }

  async close(): Promise<void> {
    clearTimeout(this.retry);
    await this.inbox.close();
  }
}

/**
 * The refusal as the class the caller would have got from the leader's session itself, with its fields. A
 * leader of an older version sends only the kernel's format, and a signal's key beside it.
 */
function revive(wire: WireError, key: string | undefined): Error {
  const error = fromWireError(wire);
  if (error instanceof SignalRefusedError && error.key !== undefined) return error;
  if (key !== undefined && SIGNAL_REFUSALS.has(wire.code))
    return new SignalRefusedError(wire.code as SignalRefusal, key, wire.message);
  if (wire.code === "invalid-argument" && !(error instanceof InvalidArgumentError))
    return new InvalidArgumentError(wire.message);
  return error;
}
