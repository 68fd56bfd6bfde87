/**
 * Follow-up inputs (DESIGN §5): a Submission accepted while an earlier one in the same conversation is
 * unfinished follows the conversation's policy —
 * - `queue` (default): its root task waits, durably, until the earlier one ends, then starts;
 * - `interrupt`: the earlier unfinished ones are cancelled in the same commit (committed results stay, tool
 *   calls in flight follow their replay rules), and it starts once they have ended;
 * - `steer`: it waits like `queue`, while the running turn reads its message before its next model round
 *   (the agent's generation task); once that turn ends, it finds its message answered.
 * The wait is an ordinary `awaiting` state on the kernel's own key `turn:<earlier submission id>`, taken
 * in the commit that ends the earlier Submission: crash-safe like every other wait, and never open to
 * outside signals.
 */
import type { Submission, Task } from "../records/schemas.ts";
import { isSubmissionFinished } from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";
import { type AwaitMoves, receiveSignal, startAwaiting } from "./awaiting.ts";

import type { FollowUp } from "./task-events.ts";

export type { FollowUp };

/** The kernel's key a queued turn waits on: the end of the Submission before it. */
export const turnKey = (submissionId: string) => `turn:${submissionId}`;

/** The Submission a turn key names, or undefined for any other key. */
export const submissionOfTurnKey = (key: string): string | undefined =>
  key.startsWith("turn:") ? key.slice("turn:".length) : undefined;

/**
 * Applies the follow-up policy to a Submission just accepted with its root task: queues the root behind the
 * conversation's previous Submission if that one is unfinished (cancelling it first for `interrupt`).
 */
export function followUp(
  draft: KernelDraft,
  submission: Submission,
  previous: string | undefined,
  policy: FollowUp,
  moves: AwaitMoves,
): void {
  const before = previous === undefined ? undefined : draft.submission(previous);
  const root = submission.taskId === undefined ? undefined : draft.task(submission.taskId);
  if (!before || isSubmissionFinished(before) || !root) return;
  if (policy === "interrupt") {
    // Everything still queued or running in the conversation gives way (each queued one waits on the one
    // before it, so the whole chain is walked).
    for (let at: Submission | undefined = before; at && !isSubmissionFinished(at); ) {
      cancelIt(draft, at, `interrupted by a follow-up (${submission.id})`, moves);
      const waiting: Task | undefined = at.taskId === undefined ? undefined : draft.task(at.taskId);
      const behind: string | undefined =
        waiting?.state.status === "awaiting" ? waiting.state.keys[0] : undefined;
      const earlier: string | undefined = behind === undefined ? undefined : submissionOfTurnKey(behind);
      at = earlier === undefined ? undefined : draft.submission(earlier);
    }
  }
  startAwaiting(
    draft,
    root,
    {
      type: "await",
      keys: [turnKey(before.id)],
      mode: "any",
      thenPhase: root.checkpoint.phase,
      about: { followUp: policy, after: before.id },
      data: root.checkpoint.data,
    },
    moves,
  );
}

function cancelIt(draft: KernelDraft, submission: Submission, reason: string, moves: AwaitMoves): void {
  const task = submission.taskId === undefined ? undefined : draft.task(submission.taskId);
  if (task && task.cancelRequested === undefined) moves.cancel(draft, task, reason);
}

/** A Submission ended: the turn queued behind it (if any) starts, in this same commit. */
export function releaseNext(draft: KernelDraft, ended: Submission, moves: AwaitMoves): void {
  const key = turnKey(ended.id);
  if (!draft.awaiter(key)) return;
  receiveSignal(
    draft,
    {
      key,
      requestId: key,
      payload: { status: ended.status },
      receivedAt: draft.at,
      version: draft.version,
    },
    moves,
  );
}
