/**
 * A copy that diverged from its other host (DESIGN §6): this tab wrote commits the other host never
 * received, and the other host has since written past them under a newer owner — a tab closed or cut off
 * mid-run, taken over by its edge. Those commits were never acknowledged, so no unsafe effect started from
 * them (effects wait for the other host); what they may hold that a person gave is the inputs: Submissions
 * and signals. Rebasing keeps those, discards the copy, copies the other host's history and then submits
 * and signals them again (idempotent by requestId), in their order.
 */
import { ReplicationDivergedError } from "../errors.ts";
import type { CommitRecord, Json } from "../records/schemas.ts";
import type { Session } from "../session/session.ts";
import type { SubmitInput } from "../session/submit.ts";
import type { Storage } from "../storage/storage.ts";
import type { ReplicaRemote } from "./protocol.ts";

/** What people gave in the discarded commits, to be given again. */
export type LocalInput =
  | { readonly kind: "submit"; readonly input: SubmitInput }
  | { readonly kind: "signal"; readonly key: string; readonly payload: Json; readonly requestId: string };

const WINDOW = 256;

/**
 * The highest version both copies hold with the same commit (same epoch), looking back at most `WINDOW`
 * versions from `upTo`; 0 when none is found there.
 */
async function commonVersion(
  storage: Storage,
  remote: ReplicaRemote,
  id: string,
  upTo: number,
): Promise<number> {
  const from = Math.max(0, upTo - WINDOW);
  const [mine, theirs] = await Promise.all([
    storage.readChanges(id, from, WINDOW),
    remote.changes(from, WINDOW),
  ]);
  const theirEpochs = new Map((theirs.changes as CommitRecord[]).map((c) => [c.version, c.epoch]));
  let common = 0;
  for (const { value } of mine.changes) {
    const commit = value as CommitRecord;
    if (commit.version > upTo || theirEpochs.get(commit.version) !== commit.epoch) break;
    common = commit.version;
  }
  return common;
}

/** The inputs of this copy's commits after `version`, first appearance each, in commit order. */
async function inputsAfter(storage: Storage, id: string, version: number): Promise<LocalInput[]> {
  const inputs: LocalInput[] = [];
  const seen = new Set<string>();
  for (let after = version; ; ) {
    const { changes } = await storage.readChanges(id, after, WINDOW);
    if (changes.length === 0) return inputs;
    for (const { value } of changes) {
      const commit = value as CommitRecord;
      after = commit.version;
      for (const s of commit.submissions) {
        if (seen.has(`r:${s.requestId}`)) continue;
        seen.add(`r:${s.requestId}`);
        const input = {
          requestId: s.requestId,
          conversationId: s.conversationId,
          input: s.input as SubmitInput["input"],
        };
        inputs.push({ kind: "submit", input });
      }
      for (const s of commit.signals ?? []) {
        if (seen.has(`s:${s.key}`)) continue;
        seen.add(`s:${s.key}`);
        inputs.push({ kind: "signal", key: s.key, payload: s.payload, requestId: s.requestId });
      }
    }
  }
}

/**
 * Discards this diverged copy after keeping its inputs, and copies the other host's history into a fresh
 * one (through `copyFrom`, which applies the other host's commits from version 0). Refused — nothing
 * deleted — when the store cannot delete a session or the other host no longer keeps its whole history.
 */
export async function rebaseDiverged(
  storage: Storage,
  remote: ReplicaRemote,
  id: string,
  localVersion: number,
  remoteVersion: number,
  diverged: ReplicationDivergedError,
  copyFrom: () => Promise<void>,
): Promise<LocalInput[]> {
  if (!storage.deleteSession) throw diverged;
  const { oldestRetained } = await remote.changes(0, 1);
  if (oldestRetained > 1)
    throw new ReplicationDivergedError(
      `${diverged.message}; this copy cannot be rebuilt: the other host keeps its history only from version ${oldestRetained}`,
      diverged.version,
    );
  const common = await commonVersion(storage, remote, id, Math.min(localVersion, remoteVersion));
  const inputs = await inputsAfter(storage, id, common);
  await storage.deleteSession(id);
  await copyFrom();
  return inputs;
}

/** Gives the kept inputs again; one the session no longer takes (a wait that ended) is dropped. */
export async function replayInputs(session: Session, inputs: readonly LocalInput[]): Promise<void> {
  for (const input of inputs) {
    if (input.kind === "submit") await session.submit(input.input);
    else
      await session.signal(input.key, input.payload, { requestId: input.requestId }).catch(() => undefined);
  }
}
