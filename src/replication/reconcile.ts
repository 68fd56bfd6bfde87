/**
 * Reconciling a linked session's local copy with its other host's before it leads (DESIGN §6).
 */
import { ReplicationDivergedError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { Storage } from "../storage/storage.ts";
import type { Grant, ReleaseRequest, ReplicaRemote } from "./protocol.ts";
import { rebuildFromSnapshot } from "./snapshot-rebuild.ts";

const CATCH_UP_PAGE = 256;

/**
 * Brings the local copy to the history both hosts share. The same version with the same epoch is the same
 * commit (one writer per epoch) — and made at the same time: copies created apart under one id share
 * epochs, not times — so comparing the shorter copy's head tells behind, ahead and diverged apart. Behind: the other host's newer commits are applied here as a replica. Ahead: they are
 * pushed once the session runs. Diverged: refused, nothing changed on either side.
 */
export async function reconcile(
  storage: Storage,
  remote: ReplicaRemote,
  id: string,
  localVersion: number,
  grant: Grant,
): Promise<void> {
  const shared = Math.min(localVersion, grant.version);
  if (shared > 0) {
    const local = await commitAt(storage, id, shared);
    const remoteHead =
      shared === grant.version
        ? { epoch: grant.headEpoch, at: grant.headAt }
        : await remoteCommitAt(remote, shared);
    if (!sameCommit(local, remoteHead)) {
      const localAt = local?.epoch ?? null;
      const remoteAt = remoteHead?.epoch ?? null;
      const apart = localAt !== null && localAt === remoteAt ? "; made at different times" : "";
      throw new ReplicationDivergedError(
        `session ${id}: this copy and the other host's differ at version ${shared} (epoch ${localAt} here, ${remoteAt} there${apart}); this copy's later commits were never received there`,
        shared,
      );
    }
  }
  // Behind: apply what the other host wrote since, as a replica under an epoch below the granted one.
  if (localVersion < grant.version) {
    let commits: CommitRecord[];
    try {
      commits = await remoteHistory(remote, id, localVersion, grant.version);
    } catch (error) {
      // An empty copy the other host's log no longer reaches from its start: made from its snapshot (a
      // new tab on a long-lived session). Nothing of its own to keep: not a divergence.
      if (!(error instanceof ReplicationDivergedError) || localVersion > 0) throw error;
      const rebuilt = await rebuildFromSnapshot(storage, remote, id, {
        keep: "none",
        epoch: grant.epoch - 1,
        remoteVersion: grant.version,
      });
      if (!rebuilt) throw error;
      return;
    }
    await applyAsReplica(storage, id, grant.epoch - 1, commits);
  }
}

/**
 * Runs `bring` (after a claim: bringing the copy to the history both hosts share, then opening its writer,
 * whose store may fail too: a full disk). If it fails, the claim is handed back at once (`release`, best
 * effort): nothing here will lead, and the other host's writer, stopped by the claim, must not wait for the
 * lease to run out.
 */
export async function handBackIfFails<T>(
  remote: Pick<ReplicaRemote, "release">,
  holder: string,
  grant: Grant,
  bring: () => Promise<T>,
): Promise<T> {
  try {
    return await bring();
  } catch (error) {
    const release: ReleaseRequest = { holder, epoch: grant.epoch, version: grant.version };
    await remote.release(release).catch(() => undefined);
    throw error;
  }
}

/** How many times a read of the other host's retained history starts again when its log moved past it. */
const RETAINED_RESTARTS = 3;

/**
 * The other host's commits after version `after` through `through` (default: its newest), oldest first.
 * Refused when its change log no longer holds them all — unless `retained`: then from the oldest commit
 * it still holds (its first page tells where its log starts; pruned past the read meanwhile, as a host
 * that writes on prunes, it is read again from where it starts then).
 */
export async function remoteHistory(
  remote: Pick<ReplicaRemote, "changes">,
  id: string,
  after: number,
  through = Number.POSITIVE_INFINITY,
  retained = false,
): Promise<CommitRecord[]> {
  const commits: CommitRecord[] = [];
  const toHead = through === Number.POSITIVE_INFINITY;
  let restarts = 0;
  for (let version = after; version < through; ) {
    const { changes, oldestRetained, more } = await remote.changes(version, CATCH_UP_PAGE);
    const page = (changes as CommitRecord[]).filter((c) => c.version <= through);
    if (toHead && page.length === 0 && oldestRetained <= version + 1) break; // its head
    const pruned = oldestRetained > version + 1 && !(retained && commits.length === 0);
    if (pruned && retained && restarts++ < RETAINED_RESTARTS) {
      commits.length = 0;
      version = after;
      continue;
    }
    if (pruned || page.length === 0) {
      throw new ReplicationDivergedError(
        `session ${id}: the other host no longer keeps the commits after version ${version} in its change log`,
        version,
      );
    }
    commits.push(...page);
    version = (page.at(-1) as CommitRecord).version;
    if (toHead && page.length < CATCH_UP_PAGE && !more) break; // its head (a page cut by its size is not)
  }
  return commits;
}

/** Writes another host's consecutive commits into this copy as a replica, a page per transaction. */
export async function applyAsReplica(
  storage: Storage,
  id: string,
  epoch: number,
  commits: readonly CommitRecord[],
): Promise<void> {
  for (let at = 0; at < commits.length; at += CATCH_UP_PAGE) {
    const page = commits.slice(at, at + CATCH_UP_PAGE);
    const expectedVersion = (page[0] as CommitRecord).version - 1;
    await storage.commit({ sessionId: id, epoch, expectedVersion, replica: true }, page);
  }
}

/**
 * Whether two copies' commits of one version are the same commit: one writer per epoch, and made at the
 * same time (copies created apart under one id share epochs, not times). A time not told (`at` absent: a
 * grant of a host from before it sent one) is not compared.
 */
export function sameCommit(
  mine: Pick<CommitRecord, "epoch" | "at"> | undefined,
  theirs: { readonly epoch: number | null; readonly at?: number | null | undefined } | undefined,
): boolean {
  if (mine === undefined || theirs === undefined || theirs.epoch === null) return false;
  return mine.epoch === theirs.epoch && (typeof theirs.at !== "number" || theirs.at === mine.at);
}

/** The commit at `version` in this copy's change log; undefined at 0 or when no longer there. */
export async function commitAt(
  storage: Storage,
  id: string,
  version: number,
): Promise<CommitRecord | undefined> {
  if (version === 0) return undefined;
  const { changes } = await storage.readChanges(id, version - 1, 1);
  const commit = changes[0]?.value as CommitRecord | undefined;
  return commit?.version === version ? commit : undefined;
}

/** The epoch of the commit at `version` in this copy's change log; null at 0 or when no longer there. */
export async function epochAt(storage: Storage, id: string, version: number): Promise<number | null> {
  return (await commitAt(storage, id, version))?.epoch ?? null;
}

/** The other host's commit at `version`, as far as its change log tells (its epoch and time). */
async function remoteCommitAt(
  remote: ReplicaRemote,
  version: number,
): Promise<Pick<CommitRecord, "epoch" | "at"> | undefined> {
  const { changes } = await remote.changes(version - 1, 1);
  const commit = changes[0] as CommitRecord | undefined;
  return commit?.version === version ? commit : undefined;
}
