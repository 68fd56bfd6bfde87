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
import { type AwaitMoves, moveWait, receiveSignal, startAwaiting } from "./awaiting.ts";
import type { Transition } from "./define-task.ts";

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
  let behind: Submission | undefined = before;
  if (policy === "interrupt") {
    // Everything still queued or running in the conversation gives way: the chain of turns queued one
    // behind the other, walked before any ends. Queued ones end now; the running one when its phase returns.
    const chain: Submission[] = [];
    for (
      let at: Submission | undefined = before;
      at && !isSubmissionFinished(at);
      at = queuedBehind(draft, at)
    )
      chain.push(at);
    for (const at of chain) cancelIt(draft, at, `interrupted by a follow-up (${submission.id})`, moves);
    behind = chain.map((at) => draft.submission(at.id)).find((at) => at && !isSubmissionFinished(at));
    if (!behind) return; // every one ended at once: it starts now
  }
  startAwaiting(draft, root, waitOn(root, behind.id, policy), moves);
}

/** The wait of a turn queued behind Submission `after`. */
function waitOn(root: Task, after: string, policy: FollowUp): Extract<Transition, { type: "await" }> {
  return {
    type: "await",
    keys: [turnKey(after)],
    mode: "any",
    thenPhase: root.checkpoint.phase,
    about: { followUp: policy, after },
    data: root.checkpoint.data,
  };
}

/** The Submission a queued one waits for (undefined when it does not wait for one). */
function queuedBehind(draft: KernelDraft, submission: Submission): Submission | undefined {
  const task = submission.taskId === undefined ? undefined : draft.task(submission.taskId);
  return task ? turnBefore(draft, task) : undefined;
}

/** The Submission a root task waits for, as the turn before it. */
function turnBefore(draft: KernelDraft, task: Task): Submission | undefined {
  const id = turnWaitedFor(task);
  return id === undefined ? undefined : draft.submission(id);
}

/** The id of the Submission whose turn `task` waits for (a queued turn), if it waits for one. */
export function turnWaitedFor(task: Task): string | undefined {
  if (task.state.status !== "awaiting") return undefined;
  return task.state.keys.map(submissionOfTurnKey).find((key) => key !== undefined);
}

function cancelIt(draft: KernelDraft, submission: Submission, reason: string, moves: AwaitMoves): void {
  const task = submission.taskId === undefined ? undefined : draft.task(submission.taskId);
  if (task && task.cancelRequested === undefined) moves.cancel(draft, task, reason);
}

/**
 * A Submission ended (its root task was `before`): the turn queued behind it (if any) starts, in this same
 * commit. One cancelled before its turn started has its message withdrawn from later contexts.
 */
export function releaseNext(draft: KernelDraft, ended: Submission, before: Task, moves: AwaitMoves): void {
  if (ended.status === "cancelled" && !hasStarted(draft, before)) {
    withdraw(draft, ended);
    // A queued turn cancelled: the turn behind it waits for the one it waited for, if that one is unfinished.
    const prior = turnBefore(draft, before);
    if (prior && !isSubmissionFinished(prior)) {
      splice(draft, ended, prior);
      return;
    }
  }
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

/**
 * Whether a root task's turn started: not when it still waited for the turn before it, nor when it ends in
 * the commit that created it (accepted already cancelled).
 */
function hasStarted(draft: KernelDraft, task: Task): boolean {
  return task.createdVersion !== draft.version && turnWaitedFor(task) === undefined;
}

/**
 * The most user entries a conversation keeps withdrawn: those at or past its context's start (a summary
 * covers the ones before), and of those the latest.
 */
const MAX_WITHDRAWN = 10_000;

/** Leaves a Submission's user entry out of every later model context (its turn never started). */
function withdraw(draft: KernelDraft, submission: Submission): void {
  const conversation = draft.conversation(submission.conversationId);
  if (!conversation || conversation.withdrawn?.includes(submission.entrySeq)) return;
  const start = conversation.contextStart ?? 0;
  const kept = (conversation.withdrawn ?? []).filter((seq) => seq >= start);
  const withdrawn = [...kept, submission.entrySeq].slice(-MAX_WITHDRAWN);
  draft.writeConversation({ ...conversation, withdrawn });
}

/** Takes the ended queued turn out of its conversation's line: what waited for it waits for `prior`. */
function splice(draft: KernelDraft, ended: Submission, prior: Submission): void {
  const next = draft.awaiter(turnKey(ended.id));
  if (next?.state.status === "awaiting")
    moveWait(draft, next, [turnKey(prior.id)], { ...(next.state.about as object), after: prior.id });
  const conversation = draft.conversation(ended.conversationId);
  if (conversation?.lastTurn === ended.id) draft.writeConversation({ ...conversation, lastTurn: prior.id });
}
