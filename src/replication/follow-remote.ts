/**
 * A tab that comes back to a session its edge now owns follows the edge before (or instead of) taking it
 * back (DESIGN §6): the edge's commits are copied into this copy as a replica — in order, from the version
 * this copy holds, under the edge's epochs — each time `pull()` runs (and every `everyMs` while it follows),
 * so the tab shows the run as the edge writes it and writes nothing itself. Taking ownership back is
 * `linkSession`, the same claim as ever: it catches up on whatever was not pulled yet and fences the edge.
 * A copy that holds commits the edge never received (it was cut off mid-run) is not followed: it is refused
 * with `ReplicationDivergedError`, and `linkSession` (which rebases such a copy) is the way back.
 */
import { type Clock, systemClock, systemTimers, type TimerHandle, type Timers } from "../clock.ts";
import { ReplicationDivergedError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { Storage } from "../storage/storage.ts";
import type { ReplicaRemote } from "./protocol.ts";
import { applyAsReplica, epochAt } from "./reconcile.ts";

const PAGE = 256;

export interface FollowRemoteOptions {
  readonly storage: Storage;
  /** The session's other host (the edge), in process or over HTTP (`edgeReplica`). */
  readonly remote: Pick<ReplicaRemote, "changes">;
  readonly id: string;
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** How often to pull while following (default 1 s); 0: only when `pull()` is called. */
  readonly everyMs?: number;
  /** Told after each pull that copied commits, with the version this copy now holds. */
  readonly onPulled?: (version: number) => void;
  /** Following stopped for good: the copy diverged, or the other host no longer keeps what it needs. */
  readonly onError?: (error: Error) => void;
}

export interface RemoteFollower {
  /** The version this copy holds. */
  readonly version: number;
  /** Copies what the other host wrote since the last pull; resolves to the version this copy holds. */
  pull(): Promise<number>;
  /** Stops following (the copy stays as pulled). */
  stop(): void;
}

/** Starts following the other host's commits into this copy, read-only. */
export async function followRemote(options: FollowRemoteOptions): Promise<RemoteFollower> {
  const { storage, remote, id } = options;
  const clock = options.clock ?? systemClock;
  const timers = options.timers ?? systemTimers;
  const local = await storage.open(id, { mode: "read", at: clock.now(), entryTail: 0, settled: 0 });
  if (!local) await storage.open(id, { mode: "write", at: clock.now(), entryTail: 0, settled: 0, epoch: 0 });
  let version = (local?.meta.value as { version?: number } | undefined)?.version ?? 0;
  await assertSameHistory(storage, remote, id, version);

  let pulling: Promise<number> | undefined;
  let timer: TimerHandle | undefined;
  let stopped = false;
  const pullOnce = async (): Promise<number> => {
    for (;;) {
      const { changes, oldestRetained } = await remote.changes(version, PAGE);
      const page = (changes as CommitRecord[]).filter((c) => c.version > version);
      if (page.length === 0) return version;
      if (oldestRetained > version + 1 || (page[0] as CommitRecord).version !== version + 1)
        throw new ReplicationDivergedError(
          `session ${id}: the other host no longer keeps the commits after version ${version}`,
          version,
        );
      // Each page under its newest writer's epoch: a copy never takes commits from an owner older than one
      // it has seen, and becomes that owner's replica.
      await applyAsReplica(storage, id, Math.max(...page.map((c) => c.epoch)), page);
      version = (page.at(-1) as CommitRecord).version;
      options.onPulled?.(version);
      if (page.length < PAGE) return version;
    }
  };
  const pull = () => {
    pulling ??= pullOnce().finally(() => {
      pulling = undefined;
    });
    return pulling;
  };
  const every = options.everyMs ?? 1_000;
  const schedule = () => {
    if (stopped || every <= 0) return;
    timer = timers.setTimeout(() => {
      pull().then(schedule, (error: unknown) => {
        // A dropped connection is retried at the next tick; a history that cannot be followed stops it.
        if (error instanceof ReplicationDivergedError) options.onError?.(error);
        else schedule();
      });
    }, every);
  };
  schedule();
  return {
    get version() {
      return version;
    },
    pull,
    stop() {
      stopped = true;
      if (timer !== undefined) timers.clearTimeout(timer);
    },
  };
}

/** Refuses a copy whose head the other host does not hold as the same commit (same version, same epoch). */
async function assertSameHistory(
  storage: Storage,
  remote: Pick<ReplicaRemote, "changes">,
  id: string,
  version: number,
): Promise<void> {
  if (version === 0) return;
  const here = await epochAt(storage, id, version);
  const { changes } = await remote.changes(version - 1, 1);
  const there = changes[0] as CommitRecord | undefined;
  if (here !== null && there?.version === version && there.epoch === here) return;
  throw new ReplicationDivergedError(
    `session ${id}: this copy's version ${version} is not the other host's (it holds commits never received there); take the session back with linkSession, which rebases it`,
    version,
  );
}
