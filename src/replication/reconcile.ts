/**
 * Reconciling a linked session's local copy with its other host's before it leads (DESIGN §6).
 */
import { ReplicationDivergedError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { Storage } from "../storage/storage.ts";
import type { Grant, ReplicaRemote } from "./protocol.ts";

const CATCH_UP_PAGE = 256;

/**
 * Brings the local copy to the history both hosts share. The same version with the same epoch is the same
 * commit (one writer per epoch), so comparing the epochs of the shorter copy's head tells behind, ahead and
 * diverged apart. Behind: the other host's newer commits are applied here as a replica. Ahead: they are
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
    const localAt = await epochAt(storage, id, shared);
    const remoteAt = shared === grant.version ? grant.headEpoch : await remoteEpochAt(remote, shared);
    if (localAt === null || remoteAt === null || localAt !== remoteAt) {
      throw new ReplicationDivergedError(
        `session ${id}: this copy and the other host's differ at version ${shared} (epoch ${localAt} here, ${remoteAt} there); this copy's later commits were never received there`,
        shared,
      );
    }
  }
  // Behind: apply what the other host wrote since, as a replica under an epoch below the granted one.
  let version = localVersion;
  while (version < grant.version) {
    const { changes, oldestRetained } = await remote.changes(version, CATCH_UP_PAGE);
    if (oldestRetained > version + 1 || changes.length === 0) {
      throw new ReplicationDivergedError(
        `session ${id}: the other host no longer keeps the commits after version ${version} in its change log`,
        version,
      );
    }
    const commits = changes as CommitRecord[];
    const guard = { sessionId: id, epoch: grant.epoch - 1, expectedVersion: version, replica: true };
    await storage.commit(guard, commits);
    version = commits.at(-1)?.version ?? version;
  }
}

async function epochAt(storage: Storage, id: string, version: number): Promise<number | null> {
  const { changes } = await storage.readChanges(id, version - 1, 1);
  const commit = changes[0]?.value as CommitRecord | undefined;
  return commit?.version === version ? commit.epoch : null;
}

async function remoteEpochAt(remote: ReplicaRemote, version: number): Promise<number | null> {
  const { changes } = await remote.changes(version - 1, 1);
  const commit = changes[0] as CommitRecord | undefined;
  return commit?.version === version ? commit.epoch : null;
}
