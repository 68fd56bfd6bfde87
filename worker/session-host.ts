/**
 * A browser host for one session: it follows the session read-only while another tab leads, takes the
 * lead (a new owner epoch) when it gets the session's Web Lock, resumes unfinished work, accepts inputs
 * that followers left in the durable inbox, and tells followers about every commit over BroadcastChannel.
 */
import {
  type ChangeListener,
  type CommitRecord,
  HistoryTruncatedError,
  InvalidArgumentError,
  indexedDbStorage,
  isSubmissionFinished,
  type Json,
  KernelError,
  type LinkedSession,
  type LinkStatus,
  linkSession,
  openSession,
  type Preview,
  parseSubmitInput,
  type Session,
  SessionClosedError,
  SessionNotFoundError,
  SessionStoppedError,
  type Signal,
  type SignalOptions,
  type SignalReceipt,
  type Storage,
  type Submission,
  type SubmitInput,
  takePlacedCalls,
} from "../src/index.ts";
import { EdgeFollowing } from "./edge-follow.ts";
import type { BrowserSessionHostOptions } from "./host-options.ts";
import { type InboxRow, inboxCancel, inboxDrop, inboxRowId, inboxRowOf } from "./inbox.ts";
import { type InboxMessage, InboxRelay } from "./inbox-relay.ts";
import { type Leadership, requestLeadership } from "./leadership.ts";
import { SessionWatch } from "./session-watch.ts";

/** A page's subscription, carried across this tab's role changes. */
interface ListenerEntry {
  last: number;
  listener: ChangeListener;
  onError?: (error: Error) => void;
  /** Previews of the leading session in this tab (a follower tab's session produces none). */
  onPreview?: (preview: Preview) => void;
  stop?: () => void;
}

/**
 * Between the tabs of one session: the leader announces commits (only once some follower said it listens,
 * so a lone tab pays nothing per commit), followers announce themselves and their inbox inputs.
 */
type Message =
  | { type: "committed"; version: number }
  | { type: "follower" }
  | { type: "leader" }
  /** The copy was rebuilt from the edge's history: followers reopen it. */
  | { type: "replaced" }
  | InboxMessage;

export class BrowserSessionHost {
  private current: Session | undefined;
  private role: "follower" | "leader" | "closed" = "follower";
  private readonly listeners = new Set<ListenerEntry>();
  private readonly channel: BroadcastChannel;
  private readonly inbox: InboxRelay;
  private readonly watch: SessionWatch;
  /** This tab's drops of early signals waiting in the inbox, by key (a signal of the key waits for its drop). */
  private readonly drops = new Map<string, Promise<unknown>>();
  /** This tab's first `lead()`, once it got the lock. */
  private leading: Promise<void> = new Promise(() => undefined);
  /** Rejects when `close()` is called: a tab that closes before it leads never will. */
  private readonly closing: Promise<never>;
  private closed: () => void = () => undefined;
  /** A drain that failed for a passing reason (a full disk) is tried again then. */
  private drainRetry: ReturnType<typeof setTimeout> | undefined;
  /** Drains that failed in a row: each waits twice as long as the one before (at most a minute). */
  private drainFailures = 0;
  private leadership: Leadership;
  private linked: LinkedSession | undefined;
  private readonly edgeFollowing: EdgeFollowing;
  private takeBackAsked = false;

  private constructor(private readonly options: BrowserSessionHostOptions) {
    this.closing = new Promise<never>((_, reject) => {
      this.closed = () => reject(new SessionClosedError(options.sessionId));
    });
    this.closing.catch(() => undefined);
    this.channel = new BroadcastChannel(`durable-agent:${options.database}:${options.sessionId}`);
    this.inbox = new InboxRelay(options.sessionId, options.database, (message) =>
      this.channel.postMessage(message satisfies Message),
    );
    this.watch = new SessionWatch(this, this.inbox);
    this.edgeFollowing = new EdgeFollowing(options, {
      storage: () => this.storage(),
      post: (message) => this.channel.postMessage(message satisfies Message),
      show: (reopen) => this.showCopy(reopen),
      queue: (row) => this.inbox.queue(row),
    });
    this.channel.onmessage = (event: MessageEvent<Message>) => void this.onMessage(event.data);
    this.leadership = this.requestLock(options.steal);
  }

  /** Asks for the session's Web Lock (`steal`: taken from the tab that holds it). */
  private requestLock(steal?: boolean): Leadership {
    const name = `durable-agent:${this.options.database}:${this.options.sessionId}`;
    return requestLeadership(name, { ...(steal !== undefined && { steal }) });
  }

  /** Starts following the session, and leading it as soon as this tab gets the lock. */
  static async start(options: BrowserSessionHostOptions): Promise<BrowserSessionHost> {
    const host = new BrowserSessionHost(options);
    await host.follow();
    host.contend(host.leadership);
    return host;
  }

  /**
   * Leads once `leadership` holds the lock and follows when it is lost. A lock stolen by another tab (a
   * frozen leader's recovery) is asked for again at once: when the stealing tab closes, this one leads, and
   * the inputs followers queue meanwhile are taken.
   */
  private contend(leadership: Leadership): void {
    this.leadership = leadership;
    // A failure to lead is the caller's of `whenLeader()`; one after `close()` concerns nobody.
    this.leading = leadership.acquired.then(() => this.lead(leadership));
    void this.leading.catch((error: unknown) => {
      if (!this.isClosed) throw error;
    });
    void leadership.lost.then(async () => {
      try {
        await this.demote();
      } finally {
        if (!this.isClosed) this.contend(this.requestLock());
      }
    });
  }

  get isLeader(): boolean {
    return this.role === "leader";
  }

  /** Whether `close()` was called (read where an await may have passed it). */
  private get isClosed(): boolean {
    return this.role === "closed";
  }

  /** The session this tab has open now (a writer when leading, read-only when following). */
  get session(): Session | undefined {
    return this.current;
  }

  /**
   * Resolves once this tab holds the session's lock and has led it: resumed its work and taken the inputs
   * queued for it. (A linked session whose claim was refused, or that waits for `takeBack()`, follows.)
   */
  whenLeader(): Promise<void> {
    return Promise.race([this.leading.then(() => this.inbox.drained()), this.closing]);
  }

  /**
   * Accepts an input. The leader submits it; a follower stores it in the durable inbox first (that is the
   * acknowledgement) and then observes the Submission the leader creates for it.
   */
  async submit(input: SubmitInput): Promise<Submission> {
    if (this.role === "leader" && this.current) return (await this.writer()).submit(input);
    // Bad input is refused here, with the same typed error the leader would give, never queued.
    parseSubmitInput(input);
    // A repeat gets the first Submission, also one that left memory (the leader would commit nothing).
    const known = await this.current?.readSubmissionForRequest(input.requestId);
    if (known) return known;
    // Watched from before it is queued (this tab may lead and take it before the write returns). The leader
    // may still refuse it (its app version checks more than this one): then it is rejected.
    const pick = (session: Session) => session.submissionForRequest(input.requestId);
    return this.watch.observe(pick, { row: inboxRowId(input), queued: this.queue(input) });
  }

  /**
   * Delivers a signal (answers a wait). The leader commits it; a follower checks it as the leader would
   * (bad payload, unknown key, conflict: refused here, never queued), stores it in the durable inbox (the
   * acknowledgement) and resolves once the leader committed it — or rejects if the leader refused it.
   */
  async signal(key: string, payload: Json, options: SignalOptions): Promise<SignalReceipt> {
    // A drop of the key's early signal this tab queued comes first: a repeat of that signal is then new.
    await this.drops.get(key)?.catch(() => undefined);
    if (this.isClosed) throw new SessionClosedError(this.options.sessionId);
    if (this.role === "leader" && this.current) return (await this.writer()).signal(key, payload, options);
    const session = this.current;
    if (!session) throw new SessionNotFoundError(this.options.sessionId);
    // An early signal this copy keeps may have been dropped already (another tab's drop, committed before
    // this call, that this copy has not adopted yet): the repeat, or the conflict, is answered from what
    // this browser's store holds, not from a copy behind it. (A signal a wait took is never dropped.) Not
    // for a linked session, whose store a tab may be rebuilding from its edge (a refresh then would stack
    // the rebuilt history on the discarded one), nor for a session closing (a hand-off, a demotion): those
    // answer from the copy, as before. A failed refresh does too.
    if (!this.options.link && session.status === "open" && session.earlySignals().some((k) => k.key === key))
      await this.refreshCopy(session);
    // A copy that lagged past the change log's pruning was opened again: the new one answers.
    const repeat = await (this.current ?? session).checkSignal(key, payload, options);
    if (repeat) return repeat;
    const row = { signal: { key, payload, requestId: options.requestId } };
    return this.watch.signal(key, payload, options, { row: inboxRowId(row), queued: this.queue(row) });
  }

  /**
   * Drops the early signal kept for `key` and returns it (undefined: none is kept). The leader commits it; a
   * follower leaves the drop in the durable inbox and resolves once a change ends that signal: with it when
   * it was dropped (by this drop, or by its `keepEarlyMs`), undefined when a wait took it before the drop came.
   */
  async dropEarlySignal(key: string): Promise<Signal | undefined> {
    if (this.role === "leader" && this.current) return (await this.writer()).dropEarlySignal(key);
    const session = this.current;
    if (!session) throw new SessionNotFoundError(this.options.sessionId);
    let kept = session.earlySignals().find((signal) => signal.key === key);
    if (!kept) {
      // This copy may not have caught up yet with what the leader stored (a signal this tab just sent).
      await session.refresh().catch(() => undefined);
      kept = session.earlySignals().find((signal) => signal.key === key);
    }
    if (!kept) return undefined;
    const row = inboxDrop(key, kept.version);
    const dropping = this.watch.dropped(kept, { row: inboxRowId(row), queued: this.queue(row) });
    this.drops.set(key, dropping);
    const forget = () => {
      if (this.drops.get(key) === dropping) this.drops.delete(key);
    };
    dropping.then(forget, forget);
    return dropping;
  }

  /**
   * Cancels a Submission's task tree (or the Submission itself when it has no task), as
   * `session.cancelSubmission` does. The leader commits it; a follower refuses an id its copy and the store
   * do not have, leaves the cancel in the durable inbox and resolves once the leader committed it (the
   * Submission then, its task asked to stop, or as it ended if it ended first).
   */
  async cancelSubmission(submissionId: string, reason?: string): Promise<Submission> {
    if (this.isClosed) throw new SessionClosedError(this.options.sessionId);
    if (this.role === "leader" && this.current)
      return (await this.writer()).cancelSubmission(submissionId, reason);
    const session = this.current;
    if (!session) throw new SessionNotFoundError(this.options.sessionId);
    await this.catchUp(session, submissionId);
    const known = session.submission(submissionId) ?? (await session.readSubmission(submissionId));
    if (!known) {
      const problem = `submission ${submissionId} does not exist`;
      throw new InvalidArgumentError(problem, [{ path: "submissionId", message: problem }]);
    }
    if (isSubmissionFinished(known)) return known; // cancelling it changes nothing, as on the leader
    const row = inboxCancel(submissionId, reason);
    return this.watch.cancelled(submissionId, { row: inboxRowId(row), queued: this.queue(row) });
  }

  /**
   * A follower's copy that does not hold the Submission may not have adopted the commit that created it
   * yet: it adopts what the store holds, so an id is unknown only once the store does not have it either.
   * (Not a linked copy, which a tab may be rebuilding from its edge.)
   */
  private async catchUp(session: Session, submissionId: string): Promise<void> {
    if (this.role === "follower" && !this.options.link && !session.submission(submissionId))
      await this.refreshCopy(session);
  }

  /**
   * Resolves when the Submission has ended, whichever tab drives it: the kernel's own `wait` on the session
   * this tab has open (one that left memory is read from storage, also when it left in the commit that ended
   * it; an unknown id rejects with InvalidArgumentError), asked again of the next session when a role change
   * closes this one.
   */
  async wait(submissionId: string): Promise<Submission> {
    for (;;) {
      const session = this.current ?? (await this.watch.observe((open) => open));
      try {
        await this.catchUp(session, submissionId);
        return await session.wait(submissionId);
      } catch (error) {
        if (this.isClosed) throw new SessionClosedError(this.options.sessionId);
        // A follower's copy that lagged past the change log's pruning is opened again; a leader stopped by a
        // storage failure opens its session again (or says why it cannot): then the wait goes on there.
        if (error instanceof HistoryTruncatedError && this.role === "follower") {
          await this.refreshCopy(session);
          continue;
        }
        if (session.status === "stopped" && this.role === "leader" && session === this.current) {
          await this.writer();
          continue;
        }
        if (session.status !== "closed") throw error;
        // Closed by a role change (a demotion, a reopened copy): wait on the session that replaces it.
        await this.watch.observe((open) => (open !== session ? open : undefined));
      }
    }
  }

  /** Every committed change after `fromVersion`, in order, across role changes of this tab. */
  subscribe(
    fromVersion: number,
    listener: ChangeListener,
    onError?: (error: Error) => void,
    onPreview?: (preview: Preview) => void,
  ): () => void {
    const entry: ListenerEntry = {
      last: fromVersion,
      ...(onError && { onError }),
      ...(onPreview && { onPreview }),
      listener: (change) => {
        // After a role change the new session may replay versions this listener already saw.
        if (change.version <= entry.last) return;
        entry.last = change.version;
        listener(change);
      },
    };
    this.listeners.add(entry);
    this.attach(entry);
    return () => {
      entry.stop?.();
      this.listeners.delete(entry);
    };
  }

  /** Stops driving and following; unfinished work stays stored for whichever tab leads next. */
  async close(): Promise<void> {
    this.role = "closed";
    this.closed();
    await this.edgeFollowing.stop();
    await this.linked?.close();
    this.leadership.release();
    clearTimeout(this.drainRetry);
    this.watch.close(new SessionClosedError(this.options.sessionId));
    this.channel.close();
    for (const entry of this.listeners) entry.stop?.();
    await this.current?.close();
    await this.inbox.close();
  }

  private async follow(): Promise<void> {
    // Said before loading: the leader answers with its version, covering commits made meanwhile.
    this.channel.postMessage({ type: "follower" } satisfies Message);
    try {
      this.replace(await openSession({ ...this.sessionOptions(), mode: "read" }));
    } catch (error) {
      if (!(error instanceof SessionNotFoundError)) throw error;
      this.current = undefined; // nobody has created it yet; the leader will
    }
    this.options.onRole?.("follower");
  }

  /**
   * Hands the session to its edge host (linked sessions only): this tab stops writing, pushes what is
   * left, and follows its own copy; `takeBack` leads again.
   */
  async handOff(): Promise<void> {
    const linked = this.linked;
    if (!linked || this.role !== "leader")
      throw new KernelError("invalid-argument", "this tab does not lead a linked session");
    this.role = "follower";
    this.linked = undefined;
    try {
      await linked.handOff();
    } finally {
      await this.follow(); // handed over or not, this tab's writer is closed: follow its copy
      await this.followEdge(false); // and the edge's run, live (the status stays `released`)
    }
  }

  /** While the edge owns the session, copies its run into this browser's copy (see `EdgeFollowing`). */
  private followEdge(announce = true): Promise<void> {
    if (this.role === "closed") return Promise.resolve();
    return this.edgeFollowing.start(announce, () => this.role === "follower");
  }

  /** A follower's read-only session brought up to the copy: opened (or reopened, `reopen`) or refreshed. */
  private async showCopy(reopen = false): Promise<void> {
    if (this.role !== "follower") return;
    if (reopen || !this.current) await this.follow();
    else await this.refreshCopy(this.current);
    this.watch.notify();
  }

  /**
   * Adopts what the store holds since the copy's version; a copy that lagged past the change log's pruning
   * (a frozen tab) cannot catch up, so it is opened again (its subscribers were told: HistoryTruncatedError).
   */
  private async refreshCopy(session: Session): Promise<void> {
    await session.refresh().catch(async (error: unknown) => {
      if (error instanceof HistoryTruncatedError && this.role === "follower" && this.current === session)
        await this.follow();
    });
  }

  /** Claims the session back from the edge (after `handOff`, a fence, or a refused claim) and leads it. */
  async takeBack(): Promise<void> {
    if (this.role === "leader" || this.role === "closed") return;
    this.takeBackAsked = true;
    await this.leadership.acquired;
    await this.lead(this.leadership);
  }

  /** The link's state while this tab leads a linked session. */
  linkState(): { status: LinkStatus; epoch: number; acknowledged: number } | undefined {
    const linked = this.linked;
    return linked && { status: linked.status, epoch: linked.epoch, acknowledged: linked.acknowledged };
  }

  /** The writer this tab leads with: a plain one, or linked to the edge (claimed first). */
  private async openWriter(): Promise<Session | undefined> {
    const link = this.options.link;
    if (!link) return openSession({ ...this.sessionOptions(), mode: "write" });
    let rebased = false;
    try {
      let linked: LinkedSession | undefined;
      let fenced = false;
      linked = await linkSession({
        ...this.sessionOptions(),
        remote: link.remote,
        ...(link.holder !== undefined && { holder: link.holder }),
        // A diverged copy's inputs go to the durable inbox before it is discarded (given again once a tab
        // leads, also when this one then cannot: its code cannot continue the edge's run).
        onRebased: async (inputs) => {
          for (const input of inputs) await this.inbox.queue(inboxRowOf(input));
          rebased = true;
        },
        onStatus: (status) => {
          link.onStatus?.(status);
          // The edge took the session over (this tab was quiet past its lease): follow, do not fight it.
          if (status !== "fenced" && status !== "closed") return;
          fenced = true;
          if (linked && this.linked === linked) {
            this.linked = undefined;
            void this.demote().then(() => this.followEdge(false));
          }
        },
      });
      if (fenced) return undefined; // fenced while it was still linking: keep following
      this.linked = linked;
      return linked.session;
    } catch (error) {
      link.onStatus?.("refused", error as Error);
      if (rebased) await this.showCopy(true);
      return undefined;
    } finally {
      // Rebuilt from the edge: sessions over the old copy (other tabs', pages') hold discarded commits.
      if (rebased) this.channel.postMessage({ type: "replaced" } satisfies Message);
    }
  }

  /** Leads under `leadership`, while it is the tab's lock and held (a lock lost meanwhile leads nothing). */
  private async lead(leadership: Leadership): Promise<void> {
    if (this.role === "closed" || !this.holds(leadership)) return;
    // Asked to follow the edge first: this tab holds the lock and follows until `takeBack()`.
    if (this.options.link?.takeBack === "when-asked" && !this.takeBackAsked) return this.followEdge(true);
    await this.edgeFollowing.stop();
    const writer = await this.openWriter();
    if (!writer) return; // a linked session whose claim was refused: this tab keeps following its copy
    await this.options.onLead?.(writer);
    // Closed while the writer opened: it never leads (and its lock is released already). Nor does a tab
    // whose lock another tab stole meanwhile (it asks for the lock again).
    if (this.isClosed || !this.holds(leadership)) return writer.close();
    this.role = "leader";
    await this.startWriter(writer, () => {
      this.channel.postMessage({ type: "leader" } satisfies Message);
      this.options.onRole?.("leader");
    });
    await this.drainInbox();
  }

  /**
   * Puts `writer` in place of the tab's session (`announced` once it is) and starts it: its unfinished work,
   * and the calls of browser-only tools that waited for a tab.
   */
  private async startWriter(writer: Session, announced?: () => void): Promise<void> {
    this.replace(writer);
    writer.subscribe(writer.version, (change: CommitRecord) => this.announce(change.version));
    announced?.();
    await writer.resume();
    await takePlacedCalls(writer, "browser");
  }

  /** Whether some follower tab listens (sticky: followers come and go unannounced). */
  private hasFollowers = false;
  private announced: ReturnType<typeof setTimeout> | undefined;
  private announcedVersion = 0;

  /**
   * Tells followers the session moved. Posted after the current task, coalesced: the caller waiting for
   * its commit's confirmation is answered first, and a burst of commits costs one message.
   */
  private announce(version: number): void {
    this.announcedVersion = version;
    if (!this.hasFollowers || this.announced !== undefined) return;
    this.announced = setTimeout(() => {
      this.announced = undefined;
      if (this.role === "leader")
        this.channel.postMessage({ type: "committed", version: this.announcedVersion } satisfies Message);
    }, 0);
  }

  private async demote(): Promise<void> {
    if (this.role !== "leader") return;
    this.role = "follower";
    await this.current?.close();
    await this.follow();
  }

  private async onMessage(message: Message): Promise<void> {
    if (this.role === "closed") return;
    if (message.type === "follower" && this.role === "leader") {
      this.hasFollowers = true;
      if (this.current) this.announce(this.current.version);
    } else if (message.type === "leader" && this.role === "follower") {
      this.channel.postMessage({ type: "follower" } satisfies Message);
      if (this.current) await this.refreshCopy(this.current);
      this.watch.notify();
    } else if (message.type === "inbox" && this.role === "leader") {
      await this.drainInbox();
    } else if (message.type === "replaced" || message.type === "committed") {
      await this.showCopy(message.type === "replaced");
    } else if (message.type === "refused") this.inbox.refused(message);
  }

  /** Queues an input for the leader; if this tab took the lead meanwhile, it drains it itself. */
  private async queue(row: InboxRow): Promise<void> {
    await this.inbox.queue(row);
    if (this.role === "leader") void this.drainInbox();
  }

  /**
   * Accepts the inputs followers left (one drain at a time; see `InboxRelay.drain`). A drain that stopped
   * (a full disk, a closed store, the app's code throwing) leaves its rows queued and is tried again while
   * this tab leads — a second later, then two, four, … up to a minute: the callers waiting for those rows
   * wait. A row the app's code keeps failing on is dropped, its caller told why (`ROW_ATTEMPTS`).
   */
  private async drainInbox(): Promise<void> {
    const before = this.inbox.progress;
    try {
      if (this.role === "leader") await this.writer();
      await this.inbox.drain(() => (this.role === "leader" ? this.current : undefined));
      this.drainFailures = 0;
    } catch {
      if (this.inbox.progress !== before) this.drainFailures = 0; // it took rows before it stopped
      if (this.role !== "leader" || this.drainRetry !== undefined) return;
      const delay = Math.min(DRAIN_RETRY_MAX_MS, DRAIN_RETRY_MS * 2 ** this.drainFailures++);
      this.drainRetry = setTimeout(() => {
        this.drainRetry = undefined;
        void this.drainInbox();
      }, delay);
    }
  }

  /**
   * The leading tab's session, opened again (a new owner epoch) when a storage failure stopped it — a full
   * disk, a store that failed — so the tab leads on once storage takes writes: its own calls and its drains
   * of the inbox ask for it. Throws the store's error while it still refuses (a drain is tried again later).
   */
  private async writer(): Promise<Session> {
    const current = this.current as Session;
    if (current.status !== "stopped") return current;
    // Fenced by a newer owner (a tab that took the lock, the edge): that one leads; the epoch is not taken back.
    const why = current.stoppedBecause;
    if (why?.code === "stale-owner" || !this.leadership.isLeader)
      throw why ?? new SessionStoppedError(this.options.sessionId);
    this.reopening ??= this.reopenWriter().finally(() => {
      this.reopening = undefined;
    });
    await this.reopening;
    return this.current as Session;
  }
  private reopening: Promise<void> | undefined;

  private async reopenWriter(): Promise<void> {
    const leadership = this.leadership;
    if (this.isClosed || this.role !== "leader" || !this.holds(leadership)) return;
    const writer = await this.openWriter();
    if (!writer) return;
    if (this.isClosed || this.role !== "leader" || !this.holds(leadership)) return writer.close();
    await this.startWriter(writer);
  }

  /** Whether `leadership` is this tab's lock, and held now. */
  private holds(leadership: Leadership): boolean {
    return leadership === this.leadership && leadership.isLeader;
  }

  private replace(session: Session): void {
    for (const entry of this.listeners) entry.stop?.();
    void this.current?.close();
    this.current = session;
    for (const entry of this.listeners) this.attach(entry);
    this.watch.notify();
  }

  private attach(entry: ListenerEntry): void {
    const session = this.current;
    if (!session) return;
    entry.stop = session.subscribe(Math.min(entry.last, session.version), entry.listener, {
      ...(entry.onError && { onError: entry.onError }),
      ...(entry.onPreview && { onPreview: entry.onPreview }),
    });
  }

  /** A new handle on the session's store. */
  private storage(): Storage {
    const { database, durability } = this.options;
    return (
      this.options.storage?.(database) ?? indexedDbStorage(database, { durability: durability ?? "strict" })
    );
  }

  private sessionOptions() {
    const { sessionId, registry, clock, timers, maxRestarts, liveWaits, maxEarlySignals } = this.options;
    return {
      id: sessionId,
      storage: this.storage(),
      registry: registry(),
      host: "browser" as const,
      ...(clock !== undefined && { clock }),
      ...(timers !== undefined && { timers }),
      ...(maxRestarts !== undefined && { maxRestarts }),
      ...(liveWaits !== undefined && { liveWaits }),
      ...(maxEarlySignals !== undefined && { maxEarlySignals }),
    };
  }
}

/** How long after a drain of the inbox stopped it is tried again (doubled for each failure in a row)… */
const DRAIN_RETRY_MS = 1_000;
/** …up to this. */
const DRAIN_RETRY_MAX_MS = 60_000;
