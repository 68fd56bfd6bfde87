/**
 * One session on two hosts in one process: a "tab" (its own store, linked with `linkSession`) and an
 * "edge" (its own store, a `ReplicaHost` deciding ownership and an edge writer it starts and stops). The
 * link between them can be cut (calls fail as a network would) and either side killed (its store handle
 * dies, like the process holding it). The same `ReplicaHost` is what the Durable Object runs.
 */
import { campaignRegistry } from "../../examples/five-emails/app.ts";
import { MailService, type Receipt } from "../../examples/five-emails/mail-service.ts";
import {
  assertCanContinue,
  ClaimRequestSchema,
  type LinkedSession,
  type LinkOptions,
  linkSession,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  type MemoryStorageOptions,
  memoryOwnership,
  memoryStorage,
  openSession,
  PushRequestSchema,
  type Registry,
  ReleaseRequestSchema,
  ReplicaHost,
  type ReplicaRemote,
  type Session,
  sequentialIds,
  takePlacedCalls,
} from "../../src/index.ts";
import { CrashingStorage } from "../../src/testing/index.ts";

/** A mail service that also logs every send attempt and lookup per operation id (deduplicated or not). */
export class CountingMail extends MailService {
  readonly attempts = new Map<string, number>();
  readonly log: { op: "send" | "lookup"; operationId: string }[] = [];
  override send(message: { to: string; body: string; idempotencyKey: string }): Receipt {
    this.attempts.set(message.idempotencyKey, (this.attempts.get(message.idempotencyKey) ?? 0) + 1);
    this.log.push({ op: "send", operationId: message.idempotencyKey });
    return super.send(message);
  }
  override lookup(operationId: string): Receipt | undefined {
    this.log.push({ op: "lookup", operationId });
    return super.lookup(operationId);
  }
  /** The provider as one process reaches it: nothing gets through once that process is dead. */
  from(alive: () => boolean): MailService {
    const check = () => {
      if (!alive()) throw new Error("mail service unreachable: the caller's process is gone");
    };
    return {
      send: (message: Parameters<MailService["send"]>[0]) => {
        check();
        return this.send(message);
      },
      lookup: (operationId: string) => {
        check();
        return this.lookup(operationId);
      },
    } as MailService;
  }
}

export const SESSION = "campaign";

/** A tab's store handle that tells the test after each commit (to cut the link or kill it right there). */
class TabStorage extends CrashingStorage {
  constructor(
    inner: ConstructorParameters<typeof CrashingStorage>[0],
    private readonly afterCommit: (count: number) => void,
  ) {
    super(inner);
  }
  override async commit(...args: Parameters<CrashingStorage["commit"]>): Promise<void> {
    await super.commit(...args);
    this.afterCommit(this.commits);
  }
}

export class TwoHosts {
  readonly clock = new ManualClock(1_000);
  readonly timers = new ManualTimers(this.clock);
  readonly mail = new CountingMail();
  readonly edgeDisk: MemoryStorage;
  /** The tab's own store (a new one when the test discards a diverged copy). */
  tabDisk: MemoryStorage = memoryStorage();
  readonly ownership = memoryOwnership();
  /** Called after each commit a tab writes to its own store, with how many that tab process has written. */
  onTabCommit: ((count: number) => void) | undefined;
  /** While true, every call between the hosts fails like a dropped connection. */
  partitioned = false;
  edgeSession: Session | undefined;
  /** The edge writer's handle on its store: it dies with the instance (`killEdge`). */
  edgeHandle: CrashingStorage | undefined;
  edgeStarts = 0;
  private opens = 0;
  readonly host: ReplicaHost;
  /** The remote the tab uses: the host's calls, through the (cuttable) link, validated as the edge does. */
  readonly remote: ReplicaRemote;

  constructor(
    readonly leaseMs = 10_000,
    /** The edge's registry (its code may lack what the tab's has). */
    readonly edgeRegistry: (mail: MailService) => Registry = (mail) => campaignRegistry(mail),
    /** The tab's registry. */
    readonly tabRegistry: (mail: MailService) => Registry = (mail) => campaignRegistry(mail),
    /** The edge store's options (its change log's bounds). */
    edgeStore: MemoryStorageOptions = {},
  ) {
    this.edgeDisk = memoryStorage(edgeStore);
    this.host = new ReplicaHost({
      storage: this.edgeDisk,
      ownership: this.ownership,
      clock: this.clock,
      leaseMs,
      stopWriter: async () => {
        await this.edgeSession?.close();
        this.edgeSession = undefined;
      },
      startWriter: () => this.startEdgeWriter(),
      canContinue: (id) => assertCanContinue(this.edgeDisk, id, this.edgeRegistry(this.mail)),
    });
    const link = async <T>(call: () => Promise<T>): Promise<T> => {
      await Promise.resolve();
      if (this.partitioned) throw new TypeError("fetch failed: the network is down");
      const result = await call();
      if (this.partitioned) throw new TypeError("fetch failed: the answer was lost");
      return structuredClone(result);
    };
    this.remote = {
      claim: (r) => link(() => this.host.claim(SESSION, ClaimRequestSchema.parse(r))),
      push: (r) =>
        link(() =>
          this.host.push(SESSION, { ...PushRequestSchema.parse(structuredClone(r)), commits: r.commits }),
        ),
      release: (r) => link(() => this.host.release(SESSION, ReleaseRequestSchema.parse(r))),
      changes: (after, limit) => link(() => this.host.changes(SESSION, after, limit)),
      snapshot: () => link(() => this.host.snapshot(SESSION)),
    };
  }

  /** Opens the tab's writer over a fresh handle on its store (a new tab process), linked to the edge. */
  async openTab(
    holder = "tab-1",
    extra: Partial<LinkOptions> = {},
  ): Promise<{ linked: LinkedSession; disk: CrashingStorage }> {
    const disk = new TabStorage(this.tabDisk.reopen(), (count) => this.onTabCommit?.(count));
    const remote: ReplicaRemote = {
      claim: (r) => this.fromTab(disk, () => this.remote.claim(r)),
      push: (r) => this.fromTab(disk, () => this.remote.push(r)),
      release: (r) => this.fromTab(disk, () => this.remote.release(r)),
      changes: (after, limit) => this.fromTab(disk, () => this.remote.changes(after, limit)),
      snapshot: () => this.fromTab(disk, () => (this.remote.snapshot as () => Promise<unknown>)()),
    };
    const linked = await linkSession({
      id: SESSION,
      storage: disk,
      remote,
      holder,
      registry: this.tabRegistry(this.mail.from(() => !disk.isDead)),
      host: "browser",
      clock: this.clock,
      timers: this.timers,
      ids: sequentialIds(100_000 * ++this.opens),
      ...extra,
    });
    return { linked, disk };
  }

  /** A new edge instance opens the session as its writer (new epoch) and resumes it. */
  private async startEdgeWriter(): Promise<void> {
    this.edgeStarts++;
    const handle = new CrashingStorage(this.edgeDisk.reopen());
    this.edgeHandle = handle;
    this.edgeSession = await openSession({
      id: SESSION,
      storage: handle,
      registry: this.edgeRegistry(this.mail.from(() => !handle.isDead)),
      host: "edge",
      clock: this.clock,
      timers: this.timers,
      ids: sequentialIds(100_000 * ++this.opens),
    });
    await this.edgeSession.resume();
    await takePlacedCalls(this.edgeSession, "edge");
  }

  /** A call the tab's process makes: it fails once that process is dead. */
  private async fromTab<T>(disk: CrashingStorage, call: () => Promise<T>): Promise<T> {
    if (disk.isDead) throw new TypeError("fetch failed: the tab is gone");
    return call();
  }

  /** The edge instance dies (evicted mid-run): its writer's store handle and mail calls fail from now on. */
  killEdge(): void {
    this.edgeHandle?.kill();
  }

  /**
   * The edge's alarm: takes over an expired lease, and brings a dead writer back if the edge owns the
   * session (a new instance reopening it). True if the edge writes the session afterwards.
   */
  async edgeAlarm(): Promise<boolean> {
    if (await this.host.expire(SESSION)) return true;
    const owner = await this.host.ownership(SESSION);
    if (owner?.holder !== "edge") return false;
    if (this.edgeSession?.status !== "open" || this.edgeHandle?.isDead) {
      await this.edgeSession?.whenIdle();
      await this.startEdgeWriter();
    }
    return true;
  }

  /** Reads the edge's copy as it is stored. */
  edgeReader(): Promise<Session> {
    return openSession({
      id: SESSION,
      storage: this.edgeDisk.reopen(),
      registry: campaignRegistry(this.mail),
      mode: "read",
    });
  }

  /** Reads the tab's copy as it is stored. */
  tabReader(): Promise<Session> {
    return openSession({
      id: SESSION,
      storage: this.tabDisk.reopen(),
      registry: campaignRegistry(this.mail),
      mode: "read",
    });
  }
}
