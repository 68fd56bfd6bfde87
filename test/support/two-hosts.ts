/**
 * One session on two hosts in one process: a "tab" (its own store, linked with `linkSession`) and an
 * "edge" (its own store, a `ReplicaHost` deciding ownership and an edge writer it starts and stops). The
 * link between them can be cut (calls fail as a network would) and either side killed (its store handle
 * dies, like the process holding it). The same `ReplicaHost` is what the Durable Object runs.
 */
import { campaignRegistry } from "../../examples/five-emails/app.ts";
import { MailService, type Receipt } from "../../examples/five-emails/mail-service.ts";
import {
  ClaimRequestSchema,
  type LinkedSession,
  linkSession,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryOwnership,
  memoryStorage,
  openSession,
  PushRequestSchema,
  ReleaseRequestSchema,
  ReplicaHost,
  type ReplicaRemote,
  type Session,
  sequentialIds,
} from "../../src/index.ts";
import { CrashingStorage } from "../../src/testing/index.ts";

/** A mail service that also counts every send attempt per operation id (deduplicated or not). */
export class CountingMail extends MailService {
  readonly attempts = new Map<string, number>();
  override send(message: { to: string; body: string; idempotencyKey: string }): Receipt {
    this.attempts.set(message.idempotencyKey, (this.attempts.get(message.idempotencyKey) ?? 0) + 1);
    return super.send(message);
  }
}

export const SESSION = "campaign";

export class TwoHosts {
  readonly clock = new ManualClock(1_000);
  readonly timers = new ManualTimers(this.clock);
  readonly mail = new CountingMail();
  readonly edgeDisk: MemoryStorage = memoryStorage();
  readonly tabDisk: MemoryStorage = memoryStorage();
  readonly ownership = memoryOwnership();
  /** While true, every call between the hosts fails like a dropped connection. */
  partitioned = false;
  edgeSession: Session | undefined;
  edgeStarts = 0;
  private opens = 0;
  readonly host: ReplicaHost;
  /** The remote the tab uses: the host's calls, through the (cuttable) link, validated as the edge does. */
  readonly remote: ReplicaRemote;

  constructor(readonly leaseMs = 10_000) {
    this.host = new ReplicaHost({
      storage: this.edgeDisk,
      ownership: this.ownership,
      clock: this.clock,
      leaseMs,
      stopWriter: async () => {
        await this.edgeSession?.close();
        this.edgeSession = undefined;
      },
      startWriter: async () => {
        this.edgeStarts++;
        this.edgeSession = await openSession({
          id: SESSION,
          storage: this.edgeDisk,
          registry: campaignRegistry(this.mail),
          clock: this.clock,
          timers: this.timers,
          ids: sequentialIds(100_000 * ++this.opens),
        });
        await this.edgeSession.resume();
      },
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
    };
  }

  /** Opens the tab's writer over a fresh handle on its store (a new tab process), linked to the edge. */
  async openTab(holder = "tab-1"): Promise<{ linked: LinkedSession; disk: CrashingStorage }> {
    const disk = new CrashingStorage(this.tabDisk.reopen());
    const linked = await linkSession({
      id: SESSION,
      storage: disk,
      remote: this.remote,
      holder,
      registry: campaignRegistry(this.mail),
      clock: this.clock,
      timers: this.timers,
      ids: sequentialIds(100_000 * ++this.opens),
    });
    return { linked, disk };
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
