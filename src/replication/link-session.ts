/**
 * The leading side of a linked session (DESIGN §6): a browser tab's session that its edge host follows.
 * `linkSession` claims the session from the other host, brings the local copy to the same history (pulling
 * what the other host wrote since, or pushing what it never received), opens the local writer at the
 * granted epoch and then pushes every commit in version order, off the commit path. An unsafe effect waits
 * until the other host holds the commit it starts from (`effectGate`), so a take-over never loses an
 * intent. When the other host fences this writer (it took the session over), the local session is closed.
 */
import { systemClock, systemTimers, type TimerHandle } from "../clock.ts";
import { KernelError, OwnedElsewhereError, ReplicationDivergedError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { openSession } from "../session/open-session.ts";
import type { OpenSessionOptions } from "../session/options.ts";
import type { Session } from "../session/session.ts";
import { assertCanContinue } from "./environment.ts";
import type { LocalInput, OnKept } from "./local-inputs.ts";
import { type Grant, MAX_PUSH_COMMITS, pushBatch, type ReplicaRemote } from "./protocol.ts";
import { rebaseDiverged, replayInputs } from "./rebase.ts";
import { handBackIfFails, reconcile } from "./reconcile.ts";

export interface LinkOptions
  extends Omit<OpenSessionOptions, "mode" | "epoch" | "effectGate" | "changeLogFloor"> {
  /** The session's other host (the edge), in process or over HTTP (`edgeReplica`). */
  readonly remote: ReplicaRemote;
  /** This host's name in the other host's ownership record (default: a random one per link). */
  readonly holder?: string;
  /** Told of every change of the link's state. */
  readonly onStatus?: (status: LinkStatus) => void;
  /** How long to wait before retrying a push that failed to arrive (default 500 ms, doubling to 8 s). */
  readonly retryMs?: number;
  /** How long commits gather before they are pushed (default 25 ms; an effect waiting pushes at once). */
  readonly batchMs?: number;
  /**
   * This copy wrote commits the other host never received, and it has written past them (this tab was
   * closed or cut off mid-run and taken over), or its log no longer reaches this copy's head to tell.
   * `rebase` (default): keep the inputs those commits hold, rebuild the copy from the other host (its
   * history, or its snapshot: see `rebuildFromSnapshot`) and give them again. `refuse`: throw
   * `ReplicationDivergedError`, change nothing, and hand the claim back.
   */
  readonly onDiverged?: "rebase" | "refuse";
  /**
   * Rebasing: the inputs of the discarded commits, awaited before the copy is discarded, for the caller to
   * give again (a durable inbox), and the signals not given again (`withheld`: see rebuildFromSnapshot).
   * Without it they are given again from memory: lost if linking fails next. */
  readonly onRebased?: OnKept;
}

/**
 * `leading`: this host writes, and pushes; `fenced`: the other host took the session over (this writer is
 * closed; reopen with `linkSession` to lead again); `released`: handed over on purpose; `closed`.
 */
export type LinkStatus = "leading" | "fenced" | "released" | "closed";

/** Claims the session from its other host and opens it here as the writer that host follows. */
export async function linkSession(options: LinkOptions): Promise<LinkedSession> {
  const { storage, remote, id } = options;
  const clock = options.clock ?? systemClock;
  const holder = options.holder ?? `tab-${globalThis.crypto.randomUUID().slice(0, 12)}`;
  const local = await storage.open(id, { mode: "read", at: clock.now(), entryTail: 0, settled: 0 });
  const head = local?.meta.value as { version: number; epoch: number } | undefined;
  const localVersion = head?.version ?? 0;
  const claimedAt = clock.now();
  const grant = await remote.claim({ holder, epoch: head?.epoch ?? 0 });
  const create = () =>
    storage.open(id, { mode: "write", at: clock.now(), entryTail: 0, settled: 0, epoch: 0 });
  let kept: LocalInput[] = [];
  const link = new LinkedSession(options, holder, grant, claimedAt);
  const session = await handBackIfFails(remote, holder, grant, async () => {
    if (!local) await create();
    try {
      await reconcile(storage, remote, id, localVersion, grant);
    } catch (error) {
      if (!(error instanceof ReplicationDivergedError) || options.onDiverged === "refuse") throw error;
      const rebased = await rebaseDiverged(
        storage,
        remote,
        id,
        localVersion,
        grant.version,
        error,
        grant.epoch - 1,
        create,
        options.onRebased,
      );
      if (!options.onRebased) kept = rebased.inputs;
    }
    // A copy this registry could not continue is not led from here: the edge goes on at once.
    if (options.registry) await assertCanContinue(storage, id, options.registry);
    return openSession({
      ...options,
      mode: "write",
      epoch: grant.epoch,
      effectGate: (version, signal) => link.replicated(version, signal),
      // Pushes read unacknowledged commits from the change log, and the next claim the last acknowledged
      // one's epoch (ahead, not diverged): pruning must not take them first.
      changeLogFloor: () => Math.max(0, link.acknowledged - 1),
    });
  });
  link.start(session);
  try {
    await replayInputs(session, kept);
  } catch (error) {
    await link.close(); // never handed to the caller: it must not lead (and push) unseen
    throw error;
  }
  return link;
}

/** A session this host leads while its other host follows. */
export class LinkedSession {
  #session: Session | undefined;
  #status: LinkStatus = "leading";
  #acknowledged = 0;
  #pushing: Promise<void> | undefined;
  #again = false;
  #renewal: TimerHandle | undefined;
  #retry: TimerHandle | undefined;
  #batch: TimerHandle | undefined;
  #retryMs: number;
  #fencedBy: KernelError | undefined;
  #unsubscribe: (() => void) | undefined;
  /** Commits as this session adopted them, not yet acknowledged: pushed without reading them back. */
  #recent: CommitRecord[] = [];
  /**
   * Until when (this host's clock) an acknowledgement still stands for an effect: three quarters of the
   * lease after the push that got it was sent. Past it the other host may be taking over, so a gated
   * effect first renews the lease (a push) and waits for a fresh acknowledgement.
   */
  #freshUntil: number;
  #handingOff = false;
  readonly #clock;
  readonly #waiters = new Set<{ version: number; resolve: () => void; reject: (e: unknown) => void }>();
  readonly #timers;

  constructor(
    private readonly options: LinkOptions,
    readonly holder: string,
    readonly grant: Grant,
    claimedAt: number,
  ) {
    this.#timers = options.timers ?? systemTimers;
    this.#clock = options.clock ?? systemClock;
    this.#freshUntil = this.vouchedUntil(claimedAt);
    this.#retryMs = options.retryMs ?? 500;
  }

  /** The local writer session. */
  get session(): Session {
    if (!this.#session) throw new KernelError("internal", "the linked session is not open yet");
    return this.#session;
  }
  get status(): LinkStatus {
    return this.#status;
  }
  /** The highest version the other host has acknowledged holding. */
  get acknowledged(): number {
    return this.#acknowledged;
  }
  /** The epoch this host writes with. */
  get epoch(): number {
    return this.grant.epoch;
  }

  /** Called by `linkSession` once the local writer is open. */
  start(session: Session): void {
    this.#session = session;
    // After reconciling, both copies hold the same history through the granted version.
    this.#acknowledged = this.grant.version;
    this.#unsubscribe = session.subscribe(
      session.version,
      (change) => {
        // Consecutive and bounded: offline for long, the rest is read back from the change log.
        const last = this.#recent.at(-1)?.version ?? this.#acknowledged;
        if (change.version === last + 1 && this.#recent.length < MAX_PUSH_COMMITS * 4)
          this.#recent.push(change);
        this.pushSoon();
      },
      {
        // The local writer stopped (a storage failure) or closed: stop leading, so the lease lapses.
        onError: () => this.end("closed"),
        onEnd: () => {
          if (!this.#handingOff) this.end("closed");
        },
      },
    );
    this.schedulePush();
    this.options.onStatus?.("leading");
  }

  /** Resolves once the other host holds `version` (an unsafe effect's gate); rejects when fenced or closed. */
  replicated(version: number, signal?: AbortSignal): Promise<void> {
    if (this.#acknowledged >= version && this.#clock.now() < this.#freshUntil) return Promise.resolve();
    if (this.#status !== "leading") return Promise.reject(this.whyStopped());
    return new Promise((resolve, reject) => {
      const waiter = { version, resolve, reject };
      this.#waiters.add(waiter);
      const onAbort = () => {
        this.#waiters.delete(waiter);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      // Settled either way, the waiter lets go of the signal (a phase's signal outlives many waits).
      waiter.resolve = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      this.schedulePush();
    });
  }

  /** Resolves once the other host holds everything committed here so far. */
  flush(): Promise<void> {
    return this.replicated(this.session.version);
  }

  /**
   * Hands the session to the other host: stops writing here, pushes what is left, then releases it; the
   * other host takes over at once with a newer epoch. Unfinished work continues there.
   */
  async handOff(): Promise<void> {
    const session = this.session;
    this.#handingOff = true;
    await session.close();
    try {
      await this.drain();
      await this.options.remote.release({ holder: this.holder, epoch: this.epoch, version: session.version });
    } catch (error) {
      // Not handed over (the edge cannot continue the session, or cannot be reached): this writer is
      // closed all the same; link again to lead, and the lease keeps the session this host's meanwhile.
      this.end("closed");
      throw error;
    }
    this.end("released");
  }

  /** Stops leading without handing over: the other host takes the session over once the lease runs out. */
  async close(): Promise<void> {
    await this.#session?.close();
    this.end("closed");
  }

  /** Pushes until the other host holds the local version (used by `handOff` with the writer closed). */
  private async drain(): Promise<void> {
    for (let failures = 0; this.#status === "leading" && this.#acknowledged < this.session.version; ) {
      this.schedulePush();
      await this.#pushing;
      if (this.#acknowledged >= this.session.version || this.#retry === undefined) continue;
      // A push did not arrive: try again at once a few times before giving the hand-off up.
      this.#timers.clearTimeout(this.#retry);
      this.#retry = undefined;
      if (++failures >= 3)
        throw (
          this.#fencedBy ?? new KernelError("storage-failed", "could not reach the other host to hand over")
        );
    }
    if (this.#status !== "leading") throw this.#fencedBy;
  }

  /**
   * A commit was adopted: push within `batchMs` (default 25 ms), so a burst of commits costs the tab one
   * push, not one each. An effect waiting for the edge (`replicated`) pushes at once.
   */
  private pushSoon(): void {
    if (this.#batch !== undefined || this.#status !== "leading") return;
    this.#batch = this.#timers.setTimeout(() => {
      this.#batch = undefined;
      this.schedulePush();
    }, this.options.batchMs ?? 25);
  }

  private schedulePush(): void {
    if (this.#status !== "leading") return;
    if (this.#pushing !== undefined) {
      this.#again = true;
      return;
    }
    this.#pushing = this.pushLoop().finally(() => {
      this.#pushing = undefined;
      if (this.#again) {
        this.#again = false;
        this.schedulePush();
      }
    });
  }

  private async pushLoop(): Promise<void> {
    const { remote } = this.options;
    for (;;) {
      const behind = this.#acknowledged < this.session.version;
      // Nothing to push, a renewal already planned, and no effect waiting on a stale answer: done.
      if (!behind && this.#renewal !== undefined && !this.staleWaiters()) return;
      try {
        const commits = await this.nextCommits();
        if (!commits) return;
        const sentAt = this.#clock.now();
        const ack = await remote.push({ holder: this.holder, epoch: this.epoch, commits });
        this.#retryMs = this.options.retryMs ?? 500;
        this.#acknowledged = Math.max(this.#acknowledged, ack.version);
        this.#freshUntil = Math.max(this.#freshUntil, this.vouchedUntil(sentAt));
        this.settleWaiters();
        this.renewLater();
        // An answer that came back too late for the lease to vouch for it is renewed before any effect.
        if (commits.length === 0 && !this.staleWaiters()) return;
        if (this.#status !== "leading") return;
      } catch (error) {
        // Refused (fenced, diverged, not allowed): the link ends. Retried: network, 5xx, a local StorageError.
        if (error instanceof KernelError && !(error instanceof StorageError)) return this.fence(error);
        this.retryLater();
        return;
      }
    }
  }

  /**
   * The next commits to push after the acknowledged version: from what this session adopted when they
   * follow on directly, else (a backlog from before this session, or after a gap) from the change log.
   * Undefined when the change log no longer holds them (the link is then fenced: it cannot go on).
   */
  private async nextCommits(): Promise<CommitRecord[] | undefined> {
    const after = this.#acknowledged;
    this.#recent = this.#recent.filter((c) => c.version > after);
    if (this.#recent[0]?.version === after + 1) return pushBatch(this.#recent);
    const { storage, id } = this.options;
    const { changes, oldestRetained } = await storage.readChanges(id, after, MAX_PUSH_COMMITS);
    if (oldestRetained > after + 1) {
      const why = `the commits after version ${after} are no longer in this copy's change log`;
      this.fence(new ReplicationDivergedError(`session ${id}: ${why}`, after));
      return undefined;
    }
    return pushBatch(changes.map((c) => c.value as CommitRecord));
  }

  /** Renews the lease a third of its length after the last push, while nothing else is pushed. */
  private renewLater(): void {
    if (this.#renewal !== undefined) this.#timers.clearTimeout(this.#renewal);
    this.#renewal = this.#timers.setTimeout(() => {
      this.#renewal = undefined;
      this.schedulePush();
    }, this.grant.leaseMs / 3);
  }

  private retryLater(): void {
    if (this.#retry !== undefined) return;
    this.#retry = this.#timers.setTimeout(() => {
      this.#retry = undefined;
      this.schedulePush();
    }, this.#retryMs);
    this.#retryMs = Math.min(this.#retryMs * 2, 8_000);
  }

  /** Until when an acknowledgement of a push sent at `sentAt` vouches for an effect: 3/4 of the lease. */
  private vouchedUntil(sentAt: number): number {
    return sentAt + (this.grant.leaseMs * 3) / 4;
  }

  /** Why a gated effect may not start any more: the fence, or this host having stopped leading. */
  private whyStopped(): KernelError {
    return (
      this.#fencedBy ??
      new OwnedElsewhereError(`this host no longer writes session ${this.options.id}`, "edge", null)
    );
  }

  /** Whether a gated effect waits on a version already acknowledged, but too long ago to vouch for it. */
  private staleWaiters(): boolean {
    if (this.#clock.now() < this.#freshUntil) return false;
    for (const waiter of this.#waiters) if (waiter.version <= this.#acknowledged) return true;
    return false;
  }

  private settleWaiters(): void {
    if (this.#clock.now() >= this.#freshUntil) return;
    for (const waiter of this.#waiters) {
      if (waiter.version > this.#acknowledged) continue;
      this.#waiters.delete(waiter);
      waiter.resolve();
    }
  }

  /** The other host took the session over: this writer stops, and every gated effect is refused. */
  private fence(error: KernelError): void {
    this.#fencedBy = error;
    void this.#session?.close();
    this.end("fenced");
  }

  private end(status: LinkStatus): void {
    if (this.#status !== "leading") return;
    this.#status = status;
    this.#unsubscribe?.();
    for (const handle of [this.#renewal, this.#retry, this.#batch])
      if (handle !== undefined) this.#timers.clearTimeout(handle);
    this.#renewal = this.#retry = this.#batch = undefined;
    const error = this.whyStopped();
    for (const waiter of this.#waiters) waiter.reject(error);
    this.#waiters.clear();
    this.options.onStatus?.(status);
  }
}
