/**
 * The side of a linked session that decides who writes it: its edge host (DESIGN §6). It records the
 * ownership, grants epochs to a claiming tab (fencing its own writer first), takes the tab's commits into
 * its store as a replica, and takes the session over itself when the tab releases it or its lease runs out.
 * Host-agnostic: the Durable Object uses it over its SQLite store, tests over the in-memory one.
 */
import type { Clock } from "../clock.ts";
import {
  EnvironmentError,
  InvalidArgumentError,
  OwnedElsewhereError,
  SessionNotFoundError,
  StaleOwnerError,
} from "../errors.ts";
import { type CommitRecord, CommitRecordSchema } from "../records/schemas.ts";
import { exportSession, type SessionSnapshot } from "../storage/session-export.ts";
import type { Storage } from "../storage/storage.ts";
import {
  type ClaimRequest,
  DEFAULT_LEASE_MS,
  EDGE_HOLDER,
  type Grant,
  MAX_CHANGES_BYTES,
  type Ownership,
  type PushAck,
  type PushRequest,
  type ReleaseRequest,
} from "./protocol.ts";
import { commitAt } from "./reconcile.ts";

/** Where a host keeps each session's ownership record. */
export interface OwnershipStore {
  get(sessionId: string): Promise<Ownership | undefined>;
  put(sessionId: string, ownership: Ownership): Promise<void>;
}

/** An ownership store in memory (tests and single-process hosts). */
export function memoryOwnership(): OwnershipStore {
  const records = new Map<string, Ownership>();
  return {
    get: async (id) => records.get(id),
    put: async (id, ownership) => void records.set(id, ownership),
  };
}

export interface ReplicaHostOptions {
  readonly storage: Storage;
  readonly ownership: OwnershipStore;
  readonly clock: Clock;
  /** How long a claim or push keeps a remote holder's lease (default 15 s). */
  readonly leaseMs?: number;
  /** Stops this host's own writer of the session, if it runs one: a remote is about to lead it. */
  stopWriter(sessionId: string): Promise<void>;
  /** This host writes the session from now on (released to it, or the lease ran out): open and resume. */
  startWriter(sessionId: string): Promise<void>;
  /**
   * Throws `EnvironmentError` if this host's registry cannot continue the session (`assertCanContinue`):
   * it then does not take the session over, which stays with its remote holder.
   */
  canContinue?(sessionId: string): Promise<void>;
}

const OPEN = { entryTail: 0, settled: 0 } as const;

/** Commits a catch-up page reads from the store first (then as many as its size so far says fit). */
const CHANGES_READ = 16;

export class ReplicaHost {
  /** How long a claim or push keeps a remote holder's lease. */
  readonly leaseMs: number;
  /** One operation per session at a time: claims, pushes and take-overs must not interleave. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly options: ReplicaHostOptions) {
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  }

  /** Who writes the session; undefined when it was never linked (then this host does, if it has it). */
  ownership(sessionId: string): Promise<Ownership | undefined> {
    return this.options.ownership.get(sessionId);
  }

  /** Whether a remote holder leads the session now (this host must then not write it). */
  async ledElsewhere(sessionId: string): Promise<Ownership | undefined> {
    const current = await this.options.ownership.get(sessionId);
    return current && current.holder !== EDGE_HOLDER ? current : undefined;
  }

  /**
   * Grants the session to `request.holder`: refused while another remote holder's lease stands. Stops this
   * host's writer, fences every earlier writer with an epoch above both copies' and answers with the head of
   * this copy, so the claimer can tell whether its own copy is behind, ahead or diverged.
   */
  claim(sessionId: string, request: ClaimRequest): Promise<Grant> {
    return this.serial(sessionId, async () => {
      const { storage, clock } = this.options;
      const current = await this.options.ownership.get(sessionId);
      const now = clock.now();
      if (current && current.holder !== EDGE_HOLDER && current.holder !== request.holder) {
        if (current.leaseUntil !== null && current.leaseUntil > now) throw ownedElsewhere(sessionId, current);
      }
      if (!current || current.holder === EDGE_HOLDER) await this.options.stopWriter(sessionId);
      const stored = await storage.open(sessionId, { mode: "read", at: now, ...OPEN });
      const meta = stored?.meta.value as { epoch: number; version: number } | undefined;
      const epoch = Math.max(meta?.epoch ?? 0, request.epoch, current?.epoch ?? 0) + 1;
      await storage.open(sessionId, { mode: "write", at: now, epoch, ...OPEN });
      const version = meta?.version ?? 0;
      const leaseUntil = now + this.leaseMs;
      await this.options.ownership.put(sessionId, { holder: request.holder, epoch, leaseUntil, version });
      const head = await commitAt(storage, sessionId, version);
      return {
        epoch,
        version,
        headEpoch: head?.epoch ?? null,
        headAt: head?.at ?? null,
        leaseUntil,
        leaseMs: this.leaseMs,
      };
    });
  }

  /**
   * Takes the holder's next commits into this copy, in order, and renews its lease. Commits this copy
   * already holds are skipped (a push sent twice is harmless); the answer's version says where to go on
   * from, so a push after a gap is answered with the version to resend after.
   */
  push(sessionId: string, request: PushRequest): Promise<PushAck> {
    return this.serial(sessionId, async () => {
      const current = await this.leading(sessionId, request.holder, request.epoch);
      const commits = parseCommits(request.commits, request.epoch);
      let version = current.version;
      const next = commits.filter((c) => c.version > version);
      if (next.length > 0 && next[0]?.version === version + 1) {
        const guard = { sessionId, epoch: request.epoch, expectedVersion: version, replica: true };
        try {
          await this.options.storage.commit(guard, next);
          version = next.at(-1)?.version ?? version;
        } catch (error) {
          if (!(error instanceof StaleOwnerError) || error.details.storedEpoch > request.epoch) throw error;
          version = error.details.storedVersion; // this record lagged its store (a crash between the two)
        }
      }
      const leaseUntil = this.options.clock.now() + this.leaseMs;
      await this.options.ownership.put(sessionId, { ...current, version, leaseUntil });
      return { version, leaseUntil };
    });
  }

  /** The holder stopped writing and pushed everything: this host takes the session over now. */
  release(sessionId: string, request: ReleaseRequest): Promise<void> {
    return this.serial(sessionId, async () => {
      const current = await this.leading(sessionId, request.holder, request.epoch);
      if (current.version !== request.version) {
        throw new InvalidArgumentError(
          `session ${sessionId}: release at version ${request.version}, but this host holds ${current.version}; push the rest first`,
          [{ path: "version", message: `this host holds ${current.version}` }],
        );
      }
      await this.takeOver(sessionId, current);
    });
  }

  /**
   * Takes the session over if its remote holder's lease has run out. True if it did; false also when this
   * host cannot continue the session (the session then stays with its holder, whenever it comes back).
   */
  expire(sessionId: string): Promise<boolean> {
    return this.serial(sessionId, async () => {
      const current = await this.options.ownership.get(sessionId);
      if (!current || current.holder === EDGE_HOLDER || current.leaseUntil === null) return false;
      if (current.leaseUntil > this.options.clock.now()) return false;
      try {
        await this.takeOver(sessionId, current);
      } catch (error) {
        if (error instanceof EnvironmentError) return false;
        throw error;
      }
      return true;
    });
  }

  /**
   * Commits after `afterVersion` from this copy's change log (a tab catching up before it leads again):
   * up to `limit`, read a few first, and cut past {@link MAX_CHANGES_BYTES} (`more`), so a page of large
   * commits is never held whole.
   */
  async changes(
    sessionId: string,
    afterVersion: number,
    limit: number,
  ): Promise<{ changes: unknown[]; oldestRetained: number; more?: boolean }> {
    const changes: unknown[] = [];
    let bytes = 0;
    let oldestRetained = afterVersion + 1;
    for (let after = afterVersion; changes.length < limit; ) {
      // A few first; then as many as the bytes left would hold at the size seen so far (each read has a
      // cost of its own, whatever it reads: most pages are read in two).
      const fit =
        changes.length === 0 ? CHANGES_READ : ((MAX_CHANGES_BYTES - bytes) * changes.length) / bytes;
      const want = Math.min(limit - changes.length, Math.max(2, Math.floor(fit)));
      const read = await this.options.storage.readChanges(sessionId, after, want);
      // Pruned past the read meanwhile: this page ends here, and the next one says where the log starts.
      if (changes.length > 0 && read.oldestRetained > after + 1)
        return { changes, oldestRetained, more: true };
      if (changes.length === 0) oldestRetained = read.oldestRetained;
      for (const { value } of read.changes) {
        bytes += JSON.stringify(value).length;
        if (changes.length >= 2 && bytes > MAX_CHANGES_BYTES) return { changes, oldestRetained, more: true };
        changes.push(value);
        after = (value as { version: number }).version;
      }
      if (read.changes.length < want) break;
    }
    return { changes, oldestRetained };
  }

  /** The session whole at this copy's version (`exportSession`): for a copy the change log no longer reaches. */
  async snapshot(sessionId: string): Promise<SessionSnapshot> {
    const snapshot = await exportSession(this.options.storage, sessionId);
    if (!snapshot) throw new SessionNotFoundError(sessionId);
    return snapshot;
  }

  private async takeOver(sessionId: string, current: Ownership): Promise<void> {
    await this.options.canContinue?.(sessionId);
    // The writer this host starts opens with the next epoch, so the old holder's pushes are refused by it too.
    const taken = {
      holder: EDGE_HOLDER,
      epoch: current.epoch + 1,
      leaseUntil: null,
      version: current.version,
    };
    await this.options.ownership.put(sessionId, taken);
    await this.options.startWriter(sessionId);
  }

  /** The ownership record if `holder` still leads with `epoch`; otherwise it was fenced: say who leads. */
  private async leading(sessionId: string, holder: string, epoch: number): Promise<Ownership> {
    const current = await this.options.ownership.get(sessionId);
    if (!current || current.holder !== holder || current.epoch !== epoch) {
      throw ownedElsewhere(
        sessionId,
        current ?? { holder: EDGE_HOLDER, epoch: 0, leaseUntil: null, version: 0 },
      );
    }
    if (current.leaseUntil !== null && current.leaseUntil <= this.options.clock.now()) {
      try {
        await this.takeOver(sessionId, current);
      } catch (error) {
        // This host cannot continue the session: the late holder still leads it.
        if (error instanceof EnvironmentError) return current;
        throw error;
      }
      throw ownedElsewhere(sessionId, { ...current, holder: EDGE_HOLDER, leaseUntil: null });
    }
    return current;
  }

  private serial<T>(sessionId: string, run: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(sessionId) ?? Promise.resolve();
    const result = previous.then(run, run);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(sessionId, settled);
    void settled.then(() => {
      if (this.queues.get(sessionId) === settled) this.queues.delete(sessionId);
    });
    return result;
  }
}

/** The error a host that may not write the session now gets, saying who does. */
export function ownedElsewhere(sessionId: string, current: Ownership): OwnedElsewhereError {
  // The holder's name stays out of the message: an HTTP caller may be another principal.
  const who = current.holder === EDGE_HOLDER ? "its edge host" : "a linked browser tab";
  const until = current.leaseUntil === null ? "" : ` until ${new Date(current.leaseUntil).toISOString()}`;
  return new OwnedElsewhereError(
    `session ${sessionId} is written by ${who} (epoch ${current.epoch})${until}`,
    current.holder,
    current.leaseUntil,
  );
}

/** Validates pushed commits: each a commit record, versions consecutive, none from a newer epoch. */
function parseCommits(raw: readonly unknown[], epoch: number): CommitRecord[] {
  const commits: CommitRecord[] = [];
  raw.forEach((value, index) => {
    const parsed = CommitRecordSchema.safeParse(value);
    if (!parsed.success)
      throw new InvalidArgumentError(`commit ${index} of the push is not a commit record`, [
        { path: `commits.${index}`, message: parsed.error.issues[0]?.message ?? "invalid" },
      ]);
    const commit = parsed.data;
    const previous = commits.at(-1);
    if (previous && commit.version !== previous.version + 1)
      throw new InvalidArgumentError(`commit versions must be consecutive`, [
        { path: `commits.${index}.version`, message: `expected ${previous.version + 1}` },
      ]);
    if (commit.epoch > epoch)
      throw new InvalidArgumentError(
        `commit ${commit.version} is from epoch ${commit.epoch}, after ${epoch}`,
        [{ path: `commits.${index}.epoch`, message: `at most ${epoch}` }],
      );
    commits.push(commit);
  });
  return commits;
}
