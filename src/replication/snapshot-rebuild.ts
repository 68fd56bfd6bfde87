/** A copy rebuilt from its other host's snapshot (DESIGN §6): what the change log can no longer bring up to date. */
import { ReplicationDivergedError } from "../errors.ts";
import { importChecked, parseSnapshot, type SessionSnapshot } from "../storage/session-export.ts";
import type { Storage } from "../storage/storage.ts";
import { inputsAfter, type LocalInput, type OnKept, type WithheldSignal } from "./local-inputs.ts";
import type { ReplicaRemote } from "./protocol.ts";

/**
 * Rebuilds this copy from the other host's snapshot (`ReplicaRemote.snapshot`) when its change log no
 * longer reaches back to what the copy holds. What the copy keeps to give again (`keep`): nothing when it
 * is merely behind (`"none"`: empty, or its head known to be the other host's); every input of its commits
 * after a version both copies hold the same (a number: those commits are its own, never received there);
 * and when that cannot be told (`"unchecked"`: the other host's log no longer reaches where the copies
 * part, if they do), of every commit it still logs, the
 * Submissions the snapshot shows the other host lacks (or that were cancelled here: given again, the cancel
 * reaches the one there) and the drops of early signals the snapshot holds (the same key, accepted at the
 * same version, by the same request where the copy shows it: a withdrawn approval stays withdrawn). Not its
 * signals: one the snapshot lacks was either
 * given here and never sent, or received there and dropped since (a withdrawn approval) — nothing tells
 * which, and giving a withdrawn answer again is worse than asking for it again (its wait stays pending
 * there, to be answered): those are told as `withheld`. The snapshot is checked first, and refused when it is not at `remoteVersion`
 * (the version a claim was granted at); undefined when the other host or this store cannot move a session
 * whole. Nothing is changed then.
 */
export async function rebuildFromSnapshot(
  storage: Storage,
  remote: Pick<ReplicaRemote, "snapshot">,
  id: string,
  options: {
    readonly keep: "none" | "unchecked" | number;
    readonly epoch?: number | undefined;
    readonly remoteVersion?: number | undefined;
    /** Told of the inputs, and awaited, before the copy is deleted (to store them where they survive). */
    readonly onKept?: OnKept | undefined;
  },
): Promise<
  { inputs: LocalInput[]; withheld: WithheldSignal[]; version: number; epoch: number | null } | undefined
> {
  if (!remote.snapshot || !storage.importRaw) return undefined;
  const snapshot = parseSnapshot(await remote.snapshot()); // checked before anything here is deleted
  const { remoteVersion } = options;
  if (remoteVersion !== undefined && snapshot.meta.version !== remoteVersion)
    throw new ReplicationDivergedError(
      `session ${id}: the other host's snapshot is at version ${snapshot.meta.version}, not ${remoteVersion} as granted`,
      remoteVersion,
    );
  const { keep } = options;
  const logged =
    keep === "unchecked" ? await inputsAfter(storage, id, await logStart(storage, id), true) : [];
  const inputs =
    keep === "none"
      ? []
      : keep === "unchecked"
        ? lacking(snapshot, logged)
        : await inputsAfter(storage, id, keep);
  const withheld = withheldOf(snapshot, logged);
  await options.onKept?.(inputs, withheld);
  // The copy and its replacement in one transaction: a crash leaves one or the other, never neither.
  const imported = await importChecked(storage, id, snapshot, options.epoch, true);
  return { inputs, withheld, version: imported.version, epoch: snapshot.head?.epoch ?? null };
}

/** The copy's signals (still kept or taken: not dropped) that the snapshot does not hold as the same request. */
function withheldOf(snapshot: SessionSnapshot, inputs: readonly LocalInput[]): WithheldSignal[] {
  const held = new Set<string>();
  for (const row of snapshot.rows)
    if (row.table === "signals" && typeof row.value === "object" && row.value !== null)
      held.add(JSON.stringify([row.key[0], (row.value as { requestId?: unknown }).requestId]));
  return inputs.flatMap((input) =>
    input.kind === "signal" && !held.has(JSON.stringify([input.key, input.requestId]))
      ? [{ key: input.key, payload: input.payload, requestId: input.requestId }]
      : [],
  );
}

/** The version before the first commit this copy's change log holds. */
async function logStart(storage: Storage, id: string): Promise<number> {
  return Math.max(0, (await storage.readChanges(id, 0, 1)).oldestRetained - 1);
}

/** What of `inputs` is given again (see `rebuildFromSnapshot`): looked up by key, once. */
function lacking(snapshot: SessionSnapshot, inputs: LocalInput[]): LocalInput[] {
  if (inputs.length === 0) return inputs;
  const requests = new Set<unknown>();
  const signals = new Map<unknown, { version?: unknown; requestId?: unknown }>();
  for (const row of snapshot.rows) {
    if (row.table === "requests") requests.add(row.key[0]);
    else if (row.table === "signals" && typeof row.value === "object" && row.value !== null)
      signals.set(row.key[0], row.value);
  }
  return inputs.filter((input) => {
    if (input.kind === "submit") return input.cancelled !== undefined || !requests.has(input.input.requestId);
    if (input.kind === "signal") return false;
    // A drop of the very signal the other host holds; of another (given here and never sent), nothing.
    const held = signals.get(input.key);
    return (
      held?.version === input.version && (input.requestId === undefined || held.requestId === input.requestId)
    );
  });
}
