/**
 * A tab that comes back to a session its edge now owns follows the edge before (or instead of) taking it
 * back (DESIGN §6): the edge's commits are copied into this copy as a replica — in order, from the version
 * this copy holds, under the edge's epochs — each time `pull()` runs (and every `everyMs` while it follows),
 * so the tab shows the run as the edge writes it and writes nothing itself. Taking ownership back is
 * `linkSession`, the same claim as ever: it catches up on whatever was not pulled yet and fences the edge.
 * A copy that holds commits the edge never received waits while the edge has not written past them, and is
 * rebased once it has (a tab closed mid-run and taken over): the inputs those commits hold are kept for
 * whoever leads next (`onRebased`), the copy is rebuilt from the edge's history, and following goes on. A
 * copy the edge's change log no longer reaches (a new tab on a long-lived session, a tab back after the log
 * was pruned past it) is rebuilt from the edge's snapshot of the session (`ReplicaRemote.snapshot`), its
 * inputs kept the same way, and follows from the snapshot's version.
 */
import { type Clock, systemClock, systemTimers, type TimerHandle, type Timers } from "../clock.ts";
import { ensureError, KernelError, ReplicationDivergedError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { Storage } from "../storage/storage.ts";
import type { OnKept } from "./local-inputs.ts";
import type { ReplicaRemote } from "./protocol.ts";
import { rebaseDiverged } from "./rebase.ts";
import { applyAsReplica, epochAt } from "./reconcile.ts";
import { rebuildFromSnapshot } from "./snapshot-rebuild.ts";

const PAGE = 256;

export interface FollowRemoteOptions {
  readonly storage: Storage;
  /** The session's other host (the edge), in process or over HTTP (`edgeReplica`). */
  readonly remote: Pick<ReplicaRemote, "changes" | "snapshot">;
  readonly id: string;
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** How often to pull while following (default 1 s); 0: only when `pull()` is called. */
  readonly everyMs?: number;
  /** Told after each pull that copied commits, with the version this copy now holds. */
  readonly onPulled?: (version: number) => void;
  /**
   * Following stopped for good, refused: the other host no longer keeps what this copy needs and gives no
   * snapshot, the copy diverged under `refuse`, access was withdrawn (`RefusedWriteError`), an answer was
   * malformed (`InvalidArgumentError`). Any kernel error but a `StorageError`.
   */
  readonly onError?: (error: Error) => void;
  /** A timed pull failed and is tried again at the next tick (a dropped connection, a 5xx, a full disk). */
  readonly onRetry?: (error: Error) => void;
  /**
   * This copy holds commits the other host never received and has written past (a tab closed mid-run,
   * taken over): `rebase` (default) keeps the Submissions, signals and early-signal drops of those commits
   * (`onRebased`: give them again once leading), discards the copy and copies the other host's history;
   * `refuse` stops.
   */
  readonly onDiverged?: "rebase" | "refuse";
  /**
   * The inputs of the discarded commits, to be given again by whoever leads next (see `onDiverged`);
   * awaited before the copy is discarded, so they can be stored first. With them, the signals that are not
   * given again (`withheld`: a copy rebuilt from a snapshot cannot tell one never sent from one withdrawn).
   */
  readonly onRebased?: OnKept;
}

export interface RemoteFollower {
  /** The version this copy holds. */
  readonly version: number;
  /** Copies what the other host wrote since the last pull; resolves to the version this copy holds. */
  pull(): Promise<number>;
  /** Stops following (the copy stays as pulled); resolves once a pull under way has ended. */
  stop(): Promise<void>;
}

/** Starts following the other host's commits into this copy, read-only. */
export async function followRemote(options: FollowRemoteOptions): Promise<RemoteFollower> {
  const { storage, remote, id } = options;
  const clock = options.clock ?? systemClock;
  const timers = options.timers ?? systemTimers;
  const create = () =>
    storage.open(id, { mode: "write", at: clock.now(), entryTail: 0, settled: 0, epoch: 0 });
  const local = await storage.open(id, { mode: "read", at: clock.now(), entryTail: 0, settled: 0 });
  if (!local) await create();
  let version = (local?.meta.value as { version?: number } | undefined)?.version ?? 0;
  /** The epoch of this copy's newest commit (read once; then known from what is applied). */
  let headEpoch = version === 0 ? null : await epochAt(storage, id, version);

  let pulling: Promise<number> | undefined;
  let timer: TimerHandle | undefined;
  let stopped = false;
  const pullOnce = async (): Promise<number> => {
    for (;;) {
      // From the commit this copy holds last: the other host must hold that same commit (version, epoch).
      const from = Math.max(0, version - 1);
      const { changes, oldestRetained, more } = await remote.changes(from, PAGE);
      const commits = changes as CommitRecord[];
      const head = commits.find((c) => c.version === version);
      const page = commits.filter((c) => c.version > version);
      if (version > 0 && head !== undefined && head.epoch !== headEpoch) {
        // This copy wrote commits the other host never received, and it has written past them.
        await rebase(version);
        if (stopped) return version;
        continue;
      }
      // Nothing new there yet (or it has not reached this copy's head: this copy is ahead, unacknowledged).
      if (page.length === 0 || stopped) return version;
      // Its log no longer holds this copy's head: whether the copy holds its commits cannot be told (one
      // the other host never received would have the other host's next commits stacked onto it).
      // Unless its next commit is of the head's epoch: one writer per epoch wrote both, so the head is its.
      // Either way the copy is rebuilt from the other host's snapshot, when it gives one.
      const next = page[0] as CommitRecord;
      if (version > 0 && head === undefined && next.epoch !== headEpoch) {
        await rebuild(
          `session ${id}: the other host no longer keeps version ${version}, this copy's head, to check it against`,
          true,
        );
        if (stopped) return version;
        continue;
      }
      if (oldestRetained > version + 1 || next.version !== version + 1) {
        // Empty, or its head is the other host's (see above): merely behind, nothing of its own.
        await rebuild(
          `session ${id}: the other host no longer keeps the commits after version ${version}`,
          false,
        );
        if (stopped) return version;
        continue;
      }
      // Each page under its newest writer's epoch: a copy never takes commits from an owner older than one
      // it has seen, and becomes that owner's replica.
      await applyAsReplica(storage, id, Math.max(...page.map((c) => c.epoch)), page);
      ({ version, epoch: headEpoch } = page.at(-1) as CommitRecord);
      options.onPulled?.(version);
      if (page.length < PAGE - 1 && !more) return version; // its head (a page cut by its size is not)
    }
  };
  /** Keeps this copy's unacknowledged inputs, rebuilds the copy from the other host's whole history. */
  const rebase = async (at: number) => {
    const diverged = new ReplicationDivergedError(
      `session ${id}: this copy's version ${at} is not the other host's (it holds commits never received there)`,
      at,
    );
    if (options.onDiverged === "refuse") throw diverged;
    if (stopped) return;
    ({ version, epoch: headEpoch } = await rebaseDiverged(
      storage,
      remote,
      id,
      at,
      undefined, // to the other host's head, under its newest writer's epoch
      diverged,
      undefined,
      create,
      options.onRebased,
    ));
    options.onPulled?.(version);
  };
  /**
   * Rebuilds this copy from the other host's snapshot: its log no longer reaches what the copy holds. A
   * copy that may hold commits of its own (`own`) keeps their inputs, and is not rebuilt under `refuse`;
   * none is rebuilt without a snapshot to take.
   */
  const rebuild = async (why: string, own: boolean) => {
    const behind = new ReplicationDivergedError(why, version);
    if ((options.onDiverged === "refuse" && own) || !remote.snapshot || !storage.importRaw) throw behind;
    if (stopped) return;
    // One that may hold its own keeps what it cannot tell apart ("unchecked"): the other host's log starts
    // past this copy's head here, so it cannot show where the two part.
    const keep = own ? "unchecked" : "none";
    const rebuilt = await rebuildFromSnapshot(storage, remote, id, { keep, onKept: options.onRebased });
    if (!rebuilt) throw behind;
    ({ version, epoch: headEpoch } = rebuilt);
    options.onPulled?.(version);
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
        // A dropped connection, a busy or failing host, a storage failure here: retried at the next tick
        // (and told). A refusal (a history that cannot be followed, access withdrawn, a malformed answer)
        // stops following: asking again would be refused again.
        const err = ensureError(error);
        if (err instanceof KernelError && !(err instanceof StorageError)) options.onError?.(err);
        else {
          options.onRetry?.(err);
          schedule();
        }
      });
    }, every);
  };
  schedule();
  return {
    get version() {
      return version;
    },
    pull,
    async stop() {
      stopped = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      await pulling?.catch(() => undefined);
    },
  };
}
