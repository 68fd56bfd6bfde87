/** Follow-up messages in the agent loop: each conversation's policy, and how a steered message was answered. */
import type { Entry } from "../records/schemas.ts";
import type { FollowUp } from "../tasks/task-events.ts";

/** The follow-up policy of a conversation. */
export function followUpOf(
  options: { readonly followUp?: FollowUp | ((conversationId: string) => FollowUp) },
  conversationId: string,
): FollowUp {
  const policy = options.followUp;
  return typeof policy === "function" ? policy(conversationId) : (policy ?? "queue");
}

/**
 * A steered turn's message, already read by the turn it was sent during: the text of the first answer of
 * that turn given after reading it (the final one, when the turn went on), or undefined.
 */
export function steeredAnswer(entries: readonly Entry[], own: string, mine: number): string | undefined {
  let answer: { text: string; final: boolean } | undefined;
  for (const e of entries) {
    if (e.seq <= mine || e.taskId === own || e.content.kind !== "model") continue;
    if ((e.content.readThroughSeq ?? -1) >= mine || answer !== undefined)
      answer = { text: e.content.text, final: e.content.toolCalls.length === 0 };
  }
  // Only a final answer (the turn ended with it): one whose tool calls were cut off by a cancel answered nothing.
  return answer?.final ? answer.text : undefined;
}

/**
 * The user entries no context reads: those whose turn was cancelled before it started (`withdrawn`) — but
 * not one a request read before (steering a running turn): its answer keeps its question.
 */
export function withdrawnOf(
  withdrawn: readonly number[] | undefined,
  entries: readonly Entry[],
): ReadonlySet<number> | undefined {
  if (!withdrawn?.length) return undefined;
  const left = new Set(withdrawn);
  for (const e of entries)
    if (e.content.kind === "model") for (const seq of e.content.steered ?? []) left.delete(seq);
  return left;
}
