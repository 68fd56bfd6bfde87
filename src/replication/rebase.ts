/**
 * A copy that diverged from its other host (DESIGN §6): this tab wrote commits the other host never
 * received, and the other host has since written past them under a newer owner — a tab closed or cut off
 * mid-run, taken over by its edge. Those commits were never acknowledged, so no unsafe effect started from
 * them (effects wait for the other host); what they may hold that a person gave is the inputs: Submissions,
 * signals and drops of early signals. Rebasing keeps those, discards the copy, copies the other host's
 * history and then gives them again (idempotent: by requestId, a drop by the version that accepted its
 * signal), in their order.
 */
import { DuplicateRequestError, ReplicationDivergedError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { Session } from "../session/session.ts";
import type { Storage } from "../storage/storage.ts";
import { inputsAfter, type LocalInput, type OnKept, WINDOW } from "./local-inputs.ts";
import type { ReplicaRemote } from "./protocol.ts";
import { applyAsReplica, remoteHistory, sameCommit } from "./reconcile.ts";
import { rebuildFromSnapshot } from "./snapshot-rebuild.ts";

/**
 * The highest version both copies hold with the same commit (same epoch and time), at most `upTo`, from the other
 * host's `history` (read already: all of it, or from the oldest commit its log retains). 0 when they share
 * none, or when this copy's log no longer holds the commits that would say (a linked copy keeps every
 * commit its edge has not acknowledged, so the version they share is never below its log); undefined when
 * `history` starts past version 1 and does not show it (the copies part before it, or this copy's log
 * does not reach it). Copies that diverged agree up to a version and differ after it: each look back of
 * `WINDOW` versions that starts past that version ends it; one that starts with a commit the copies do not
 * share moves further back.
 */
export async function commonVersion(
  storage: Storage,
  history: readonly CommitRecord[],
  id: string,
  upTo: number,
): Promise<number | undefined> {
  const theirs = new Map(history.map((c) => [c.version, c]));
  // Below the first commit of `history` nothing can be compared.
  const floor = Math.max(0, (history[0]?.version ?? 1) - 1);
  const unknown = floor === 0 ? 0 : undefined;
  for (let to = upTo; to > floor; ) {
    const from = Math.max(floor, to - WINDOW);
    const commits = (await storage.readChanges(id, from, WINDOW)).changes.map((c) => c.value as CommitRecord);
    let common = 0;
    for (const commit of commits) {
      if (commit.version > to || !sameCommit(commit, theirs.get(commit.version))) break;
      common = commit.version;
    }
    // Found; or there is nothing further back to look at (this copy's log was pruned past `from`).
    if (common > 0) return common;
    if (from === floor || commits[0]?.version !== from + 1) return unknown;
    to = from;
  }
  return unknown;
}

/**
 * Discards this diverged copy after keeping its inputs, and rebuilds it from the other host's history
 * through `remoteVersion` (undefined: to its head). `recreate` makes the fresh copy; the commits go in under
 * `epoch` (undefined: the newest writer's). Everything is read first — the other host's history, this copy's
 * inputs — so that between deleting the copy and giving the inputs again there is only local work. Refused,
 * nothing deleted, when the store cannot delete a session or the other host no longer keeps its whole
 * history. Returns the inputs and the rebuilt copy's head.
 */
export async function rebaseDiverged(
  storage: Storage,
  remote: Pick<ReplicaRemote, "changes" | "snapshot">,
  id: string,
  localVersion: number,
  remoteVersion: number | undefined,
  diverged: ReplicationDivergedError,
  epoch: number | undefined,
  recreate: () => Promise<unknown>,
  /** Told of the inputs, and awaited, before the copy is deleted (to store them where they survive). */
  keep?: OnKept,
): Promise<{ inputs: LocalInput[]; version: number; epoch: number | null }> {
  if (!storage.deleteSession) throw diverged;
  const history = await remoteHistory(remote, id, 0, remoteVersion, true);
  const head = history.at(-1);
  const common = await commonVersion(storage, history, id, Math.min(localVersion, head?.version ?? 0));
  if ((history[0]?.version ?? 1) > 1) {
    // Its log no longer reaches back to the start: its snapshot, keeping what that log shows is this copy's.
    const rebuilt = await rebuildFromSnapshot(storage, remote, id, {
      keep: common ?? "unchecked",
      epoch,
      remoteVersion,
      onKept: keep,
    });
    if (rebuilt) return rebuilt;
    throw new ReplicationDivergedError(
      `${diverged.message}; this copy cannot be rebuilt: the other host's change log starts at version ${history[0]?.version}`,
      diverged.version,
    );
  }
  const inputs = await inputsAfter(storage, id, common ?? 0);
  await keep?.(inputs, []); // every signal of its own commits is given again
  await storage.deleteSession(id);
  await recreate();
  await applyAsReplica(storage, id, epoch ?? Math.max(0, ...history.map((c) => c.epoch)), history);
  return { inputs, version: head?.version ?? 0, epoch: head?.epoch ?? null };
}

/**
 * Gives the kept inputs again; one the session no longer takes (a wait that ended) is dropped, and a drop
 * of a signal no longer kept there (a wait took it) does nothing. A Submission whose requestId the other
 * host accepted and its retention has since removed (finished: the requestId index refuses it) is not
 * given again either — it is not new work, and the inputs after it must still be given.
 */
export async function replayInputs(session: Session, inputs: readonly LocalInput[]): Promise<void> {
  for (const input of inputs) {
    if (input.kind === "submit")
      await session
        .submit(input.input, input.cancelled === undefined ? {} : { cancelled: input.cancelled })
        .catch((error: unknown) => {
          if (!(error instanceof DuplicateRequestError)) throw error;
        });
    else if (input.kind === "drop") await session.dropEarlySignal(input.key, { version: input.version });
    else
      await session.signal(input.key, input.payload, { requestId: input.requestId }).catch(() => undefined);
  }
}
