/** A copy rebuilt from its other host's snapshot (DESIGN §6): what the change log can no longer bring up to date. */
import { ReplicationDivergedError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { importSession, parseSnapshot, type SessionSnapshot } from "../storage/session-export.ts";
import type { Storage } from "../storage/storage.ts";
import { inputsAfter, type LocalInput, WINDOW } from "./local-inputs.ts";
import type { ReplicaRemote } from "./protocol.ts";

/**
 * Rebuilds this copy from the other host's snapshot (`ReplicaRemote.snapshot`) when its change log no
 * longer reaches back to what the copy holds. A copy merely behind (`own: false`: empty, or its head known
 * to be the other host's) keeps nothing. One whose head cannot be checked there keeps the inputs of its
 * last writer's commits (its head's epoch: unsent commits are all of the writer that wrote last) that the
 * snapshot shows the other host lacks — a Submission whose requestId it has is left out unless it was
 * cancelled there, a signal it holds by key and requestId is left out. Still given again: a signal of
 * those commits the other host received and has since dropped (nothing there remembers it). The snapshot
 * is checked first, and refused when it is not at `remoteVersion` (the version a claim was granted at);
 * undefined when the other host or this store cannot move a session whole. Nothing is changed then.
 */
export async function rebuildFromSnapshot(
  storage: Storage,
  remote: Pick<ReplicaRemote, "snapshot">,
  id: string,
  options: {
    readonly own: boolean;
    readonly epoch?: number | undefined;
    readonly remoteVersion?: number | undefined;
    readonly keep?: ((inputs: readonly LocalInput[]) => Promise<void> | void) | undefined;
  },
): Promise<{ inputs: LocalInput[]; version: number; epoch: number | null } | undefined> {
  if (!remote.snapshot || !storage.deleteSession || !storage.importRaw) return undefined;
  const snapshot = parseSnapshot(await remote.snapshot()); // checked before anything here is deleted
  const { remoteVersion } = options;
  if (remoteVersion !== undefined && snapshot.meta.version !== remoteVersion)
    throw new ReplicationDivergedError(
      `session ${id}: the other host's snapshot is at version ${snapshot.meta.version}, not ${remoteVersion} as granted`,
      remoteVersion,
    );
  const inputs = options.own
    ? lacking(snapshot, await inputsAfter(storage, id, await lastWriterAfter(storage, id)))
    : [];
  await options.keep?.(inputs);
  await storage.deleteSession(id);
  const imported = await importSession(storage, id, snapshot, options.epoch);
  return { inputs, version: imported.version, epoch: snapshot.head?.epoch ?? null };
}

/** The version after which every commit this copy logs is of its head's epoch (its last writer's). */
async function lastWriterAfter(storage: Storage, id: string): Promise<number> {
  const { oldestRetained } = await storage.readChanges(id, 0, 1);
  let since = Math.max(0, oldestRetained - 1);
  let epoch: number | undefined;
  for (let after = since; ; ) {
    const { changes } = await storage.readChanges(id, after, WINDOW);
    if (changes.length === 0) return since;
    for (const { value } of changes) {
      const commit = value as CommitRecord;
      if (commit.epoch !== epoch) [since, epoch] = [commit.version - 1, commit.epoch];
      after = commit.version;
    }
  }
}

/** The inputs the snapshot shows its host lacks (see `rebuildFromSnapshot`). */
function lacking(snapshot: SessionSnapshot, inputs: LocalInput[]): LocalInput[] {
  if (inputs.length === 0) return inputs;
  const requests = new Set<unknown>();
  const signals = new Map<unknown, unknown>();
  for (const row of snapshot.rows)
    if (row.table === "requests") requests.add(row.key[0]);
    else if (row.table === "signals")
      signals.set(row.key[0], (row.value as { requestId?: unknown } | null)?.requestId);
  return inputs.filter((input) => {
    if (input.kind === "submit") return input.cancelled !== undefined || !requests.has(input.input.requestId);
    if (input.kind === "signal") return signals.get(input.key) !== input.requestId;
    return true;
  });
}
