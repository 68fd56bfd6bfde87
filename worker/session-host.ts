/**
 * A browser host for one session: it follows the session read-only while another tab leads, takes the
 * lead (a new owner epoch) when it gets the session's Web Lock, resumes unfinished work, accepts inputs
 * that followers left in the durable inbox, and tells followers about every commit over BroadcastChannel.
 */
import {
  type ChangeListener,
  type CommitRecord,
  HistoryTruncatedError,
  type Json,
  KernelError,
  type LinkedSession,
  type LinkStatus,
  openSession,
  type Preview,
  type Session,
  SessionClosedError,
  SessionNotFoundError,
  type Signal,
  type SignalOptions,
  type SignalReceipt,
  type Submission,
  type SubmitInput,
  takePlacedCalls,
} from "../src/index.ts";
import { CommitAnnouncer } from "./commit-announcer.ts";
import { EdgeFollowing } from "./edge-follow.ts";
import { HostListeners } from "./host-listeners.ts";
import { type BrowserSessionHostOptions, sessionOptionsOf, storageOf } from "./host-options.ts";
import type { InboxRow } from "./inbox.ts";
import { InboxRelay } from "./inbox-relay.ts";
import { type Leadership, oneAtATime } from "./leadership.ts";
import { openLinkedWriter } from "./linked-writer.ts";
import { SessionWatch } from "./session-watch.ts";
import { TabInputs } from "./tab-inputs.ts";
import { sessionLock, type TabMessage, tabScope } from "./tab-messages.ts";
import { WriterRecovery } from "./writer-recovery.ts";

export class BrowserSessionHost {
  private current: Session | undefined;
  private role: "follower" | "leader" | "closed" = "follower";
  private readonly listeners = new HostListeners();
  private readonly announcer: CommitAnnouncer;
  private readonly channel: BroadcastChannel;
  private readonly inbox: InboxRelay;
  private readonly watch: SessionWatch;
  /** What this tab's callers ask of the session, in either role (see `TabInputs`). */
  private readonly inputs: TabInputs;
  private readonly recovery: WriterRecovery;
  /** This tab's first `lead()`, once it got the lock. */
  private leading: Promise<void> = new Promise(() => undefined);
  /** Rejects when `close()` is called: a tab that closes before it leads never will. */
  private readonly closing: Promise<never>;
  private closed: () => void = () => undefined;
  private leadership: Leadership;
  private linked: LinkedSession | undefined;
  private readonly edgeFollowing: EdgeFollowing;
  private takeBackAsked = false;
  private readonly lead = oneAtATime((l: Leadership) => this.leadOnce(l)); // one at a time: a 2nd waits

  private constructor(private readonly options: BrowserSessionHostOptions) {
    this.closing = new Promise<never>((_, reject) => {
      this.closed = () => reject(new SessionClosedError(options.sessionId));
    });
    this.closing.catch(() => undefined);
    this.channel = new BroadcastChannel(tabScope(options.database, options.sessionId));
    this.inbox = new InboxRelay(options.sessionId, options.database, (message) => this.post(message));
    this.watch = new SessionWatch(this, this.inbox);
    this.recovery = new WriterRecovery({
      sessionId: options.sessionId,
      current: () => this.current as Session,
      holdsLock: () => this.leadership.isLeader,
      reopen: () => this.reopenWriter(),
    });
    this.announcer = new CommitAnnouncer((version) => {
      if (this.role === "leader") this.post({ type: "committed", version });
    });
    this.inputs = new TabInputs({
      sessionId: options.sessionId,
      linked: options.link !== undefined,
      watch: this.watch,
      current: () => this.current,
      role: () => this.role,
      writer: () => this.recovery.writer(),
      queue: (row) => this.queue(row),
      refreshCopy: (session) => this.refreshCopy(session),
    });
    this.edgeFollowing = new EdgeFollowing(options, {
      storage: () => storageOf(this.options),
      post: (message) => this.post(message),
      show: (reopen) => this.showCopy(reopen),
      queue: (row) => this.inbox.queue(row),
      follows: () => this.role === "follower",
    });
    this.channel.onmessage = (event: MessageEvent<TabMessage>) => void this.onMessage(event.data);
    this.leadership = sessionLock(options, options.steal);
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
        if (!this.isClosed) this.contend(sessionLock(this.options));
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
  submit(input: SubmitInput): Promise<Submission> {
    return this.inputs.submit(input);
  }

  /**
   * Delivers a signal (answers a wait). The leader commits it; a follower checks it as the leader would
   * (bad payload, unknown key, conflict: refused here, never queued), stores it in the durable inbox (the
   * acknowledgement) and resolves once the leader committed it — or rejects if the leader refused it.
   */
  signal(key: string, payload: Json, options: SignalOptions): Promise<SignalReceipt> {
    return this.inputs.signal(key, payload, options);
  }

  /**
   * Drops the early signal kept for `key` and returns it (undefined: none is kept). The leader commits it; a
   * follower leaves the drop in the durable inbox and resolves once a change ends that signal: with it when
   * it was dropped (by this drop, or by its `keepEarlyMs`), undefined when a wait took it before the drop came.
   */
  dropEarlySignal(key: string): Promise<Signal | undefined> {
    return this.inputs.dropEarlySignal(key);
  }

  /**
   * Cancels a Submission's task tree (or the Submission itself when it has no task), as
   * `session.cancelSubmission` does. The leader commits it; a follower refuses an id its copy and the store
   * do not have, leaves the cancel in the durable inbox and resolves once the leader committed it (the
   * Submission then, its task asked to stop, or as it ended if it ended first).
   */
  cancelSubmission(submissionId: string, reason?: string): Promise<Submission> {
    return this.inputs.cancelSubmission(submissionId, reason);
  }

  /**
   * Resolves when the Submission has ended, whichever tab drives it: the kernel's own `wait` on the session
   * this tab has open (one that left memory is read from storage, also when it left in the commit that ended
   * it; an unknown id rejects with InvalidArgumentError), asked again of the next session when a role change
   * closes this one.
   */
  wait(submissionId: string): Promise<Submission> {
    return this.inputs.wait(submissionId);
  }

  /** Every committed change after `fromVersion`, in order, across role changes of this tab. */
  subscribe(
    fromVersion: number,
    listener: ChangeListener,
    onError?: (error: Error) => void,
    onPreview?: (preview: Preview) => void,
  ): () => void {
    return this.listeners.add(this.current, fromVersion, listener, onError, onPreview);
  }

  /** Stops driving and following; unfinished work stays stored for whichever tab leads next. */
  async close(): Promise<void> {
    this.role = "closed";
    this.closed();
    await this.edgeFollowing.stop();
    await this.linked?.close();
    this.leadership.release();
    this.watch.close(new SessionClosedError(this.options.sessionId));
    this.channel.close();
    this.listeners.detach();
    await this.current?.close();
    await this.inbox.close();
  }

  private async follow(): Promise<void> {
    // Said before loading: the leader answers with its version, covering commits made meanwhile.
    this.post({ type: "follower" });
    try {
      this.replace(await openSession({ ...sessionOptionsOf(this.options), mode: "read" }));
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
      await this.edgeFollowing.start(false); // and the edge's run, live (the status stays `released`)
    }
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
    if (!link) return openSession({ ...sessionOptionsOf(this.options), mode: "write" });
    const linked = await openLinkedWriter(sessionOptionsOf(this.options), link, {
      queue: (row) => this.inbox.queue(row),
      adopt: (linked) => {
        this.linked = linked;
      },
      fenced: (linked) => {
        if (this.linked !== linked) return;
        this.linked = undefined;
        void this.demote().then(() => this.edgeFollowing.start(false));
      },
      showRebuilt: () => this.showCopy(true),
      replaced: () => this.post({ type: "replaced" }),
    });
    return linked?.session;
  }

  /** Leads under `leadership`, while it is the tab's lock and held (a lock lost meanwhile leads nothing). */
  private async leadOnce(leadership: Leadership): Promise<void> {
    if (this.role !== "follower" || !this.holds(leadership)) return;
    // Asked to follow the edge first: this tab holds the lock and follows until `takeBack()`.
    if (this.options.link?.takeBack === "when-asked" && !this.takeBackAsked)
      return this.edgeFollowing.start(true);
    await this.edgeFollowing.stop();
    const writer = await this.openWriter();
    // A linked session whose claim was refused (another browser leads it, say): this tab follows the edge.
    if (!writer) return this.holds(leadership) ? this.edgeFollowing.start(false) : undefined;
    await this.options.onLead?.(writer);
    // Closed while the writer opened: it never leads (and its lock is released already). Nor does a tab
    // whose lock another tab stole meanwhile (it asks for the lock again).
    if (this.isClosed || !this.holds(leadership)) return writer.close();
    this.role = "leader";
    await this.startWriter(writer, () => {
      this.post({ type: "leader" });
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
    writer.subscribe(writer.version, (change: CommitRecord) => this.announcer.announce(change.version));
    announced?.();
    await writer.resume();
    await takePlacedCalls(writer, "browser");
  }

  private async demote(): Promise<void> {
    if (this.role !== "leader") return;
    this.role = "follower";
    await this.current?.close();
    await this.follow();
  }

  private async onMessage(message: TabMessage): Promise<void> {
    if (this.role === "closed") return;
    if (message.type === "follower" && this.role === "leader") {
      this.announcer.heard(this.current?.version);
    } else if (message.type === "leader" && this.role === "follower") {
      this.post({ type: "follower" });
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

  /** Accepts the inputs followers left, while this tab leads (see `InboxRelay.drainRetrying`). */
  private drainInbox(): Promise<void> {
    return this.inbox.drainRetrying(
      () => (this.role === "leader" ? this.current : undefined),
      async () => this.role === "leader" && (await this.recovery.writer()),
    );
  }

  private async reopenWriter(): Promise<void> {
    const leadership = this.leadership;
    if (this.isClosed || this.role !== "leader" || !this.holds(leadership)) return;
    const writer = await this.openWriter();
    if (!writer) return;
    if (this.isClosed || this.role !== "leader" || !this.holds(leadership)) return writer.close();
    await this.startWriter(writer);
  }

  /** Tells this session's other tabs. */
  private post(message: TabMessage): void {
    this.channel.postMessage(message);
  }

  /** Whether `leadership` is this tab's lock, and held now. */
  private holds(leadership: Leadership): boolean {
    return leadership === this.leadership && leadership.isLeader;
  }

  private replace(session: Session): void {
    this.listeners.detach();
    void this.current?.close();
    this.current = session;
    this.listeners.attach(session);
    this.watch.notify();
  }
}
