/** What people gave in a copy's commits (DESIGN §6): what a copy that is discarded keeps to give again. */
import type { CommitRecord, Json, Submission } from "../records/schemas.ts";
import { SubmissionSchema } from "../records/schemas.ts";
import { validateRecord } from "../records/validate.ts";
import type { SubmitInput } from "../session/submit.ts";
import type { Storage } from "../storage/storage.ts";

/**
 * What people gave in the discarded commits, to be given again: Submissions, signals, and drops of early
 * signals the other host holds too (the one accepted at `version`, a commit both copies share).
 */
export type LocalInput =
  | { readonly kind: "submit"; readonly input: SubmitInput; readonly cancelled?: string }
  | { readonly kind: "signal"; readonly key: string; readonly payload: Json; readonly requestId: string }
  | {
      readonly kind: "drop";
      readonly key: string;
      readonly version: number;
      /** The dropped signal's requestId, where these commits show it (see `inputsAfter`'s `everyDrop`). */
      readonly requestId?: string;
    };

/**
 * A signal a discarded copy took that its replacement does not hold and that is not given again (see
 * `rebuildFromSnapshot`): a wait still open for its key on the other host asks for it again.
 */
export interface WithheldSignal {
  readonly key: string;
  readonly payload: Json;
  readonly requestId: string;
}

/**
 * Told of a discarded copy's inputs, to be given again, before it is discarded (awaited: to store them
 * where they survive), and of the signals it took that are not (`withheld`: for the app to ask again).
 */
export type OnKept = (
  inputs: readonly LocalInput[],
  withheld: readonly WithheldSignal[],
) => Promise<void> | void;

/** Commits read at a time from the copy's log. */
export const WINDOW = 256;

/**
 * The inputs of this copy's commits after `version`, first appearance each, in commit order; a Submission
 * cancelled there (or asked to be) is cancelled again after it is given again; a signal dropped there is
 * not given again, and the drop of one accepted before `version` (the other host holds it too) is given
 * again. With `everyDrop` (where those commits may hold the other host's too: nothing tells which), every
 * drop is given, with the dropped signal's requestId when the commits show it: the caller keeps those of
 * signals the other host holds.
 */
export async function inputsAfter(
  storage: Storage,
  id: string,
  version: number,
  everyDrop = false,
): Promise<LocalInput[]> {
  const inputs: LocalInput[] = [];
  const seen = new Set<string>();
  // Each key's signal to give again, by the version that accepted it: one dropped in these commits is not
  // given again, and a key may take a new signal after its drop.
  const signals = new Map<string, { version: number; input: LocalInput }>();
  const dropped = new Set<LocalInput>();
  const cancelled = new Map<string, string>();
  const requestOf = new Map<string, string>();
  const give = (s: Submission) => {
    requestOf.set(s.id, s.requestId);
    if (s.status === "cancelled") cancelled.set(s.requestId, s.error?.message ?? "cancelled");
    if (seen.has(`r:${s.requestId}`)) return;
    seen.add(`r:${s.requestId}`);
    const input = {
      requestId: s.requestId,
      conversationId: s.conversationId,
      input: s.input as SubmitInput["input"],
    };
    inputs.push({ kind: "submit", input });
  };
  for (let after = version; ; ) {
    const { changes } = await storage.readChanges(id, after, WINDOW);
    if (changes.length === 0)
      return inputs
        .filter((i) => !dropped.has(i))
        .map((i) => {
          const reason = i.kind === "submit" ? cancelled.get(i.input.requestId) : undefined;
          return reason === undefined ? i : { ...i, cancelled: reason };
        });
    for (const { value } of changes) {
      const commit = value as CommitRecord;
      after = commit.version;
      for (const s of commit.submissions) give(s);
      // A cancellation asked for but not yet carried out: the Submission's root task holds the request. Its
      // children carry the Submission's id too, and one may be cancelled alone (its parent failed fast).
      for (const task of commit.tasks) {
        const { submissionId, cancelRequested } = task;
        if (task.parentId !== undefined || submissionId === undefined || cancelRequested === undefined)
          continue;
        // Accepted before `version`, the other host has the Submission; the cancel is given again with it.
        if (!requestOf.has(submissionId)) {
          const row = await storage.readSubmission(id, submissionId);
          if (row) give(validateRecord(SubmissionSchema, row.value, row.key));
        }
        const requestId = requestOf.get(submissionId);
        if (requestId !== undefined) cancelled.set(requestId, cancelRequested);
      }
      for (const drop of commit.droppedSignals ?? []) {
        const held = signals.get(drop.key);
        if (held?.version === drop.version) {
          dropped.add(held.input);
          signals.delete(drop.key);
          const { requestId } = held.input as Extract<LocalInput, { kind: "signal" }>;
          if (everyDrop) inputs.push({ kind: "drop", key: drop.key, version: drop.version, requestId });
        } else if (everyDrop || drop.version <= version) {
          const { key, version: accepted, requestId } = drop;
          inputs.push({
            kind: "drop",
            key,
            version: accepted,
            ...(requestId !== undefined && { requestId }),
          });
        }
      }
      for (const s of commit.signals ?? []) {
        if (signals.has(s.key)) continue; // the same signal again (a wait took it)
        const input: LocalInput = { kind: "signal", key: s.key, payload: s.payload, requestId: s.requestId };
        signals.set(s.key, { version: s.version, input });
        inputs.push(input);
      }
    }
  }
}
