/** The committed conversation as `useChat`'s initial messages (AI SDK UI). */
import { approvalKey } from "../agent/tool-task.ts";
import type { Submission, Task } from "../records/schemas.ts";
import { isSubmissionFinished } from "../records/schemas.ts";
import type { SessionView } from "../session/view.ts";
import { assistantMessageId, type ChatMessage } from "./chat-transport.ts";
import { declinedByPerson, errorText, parseArgs, toolCallOf } from "./run-follower.ts";

/**
 * The conversation as `useChat`'s initial `messages`: each user entry, and each Submission's answer (its
 * text and tool calls with their results), from committed entries — what a reloaded page shows before it
 * resumes the stream of a run still going.
 */
export function chatMessages(view: SessionView, conversationId: string): ChatMessage[] {
  const conversation = view.conversations.find((c) => c.id === conversationId);
  if (!conversation) return [];
  const bySeq = new Map(
    view.submissions.filter((s) => s.conversationId === conversationId).map((s) => [s.entrySeq, s]),
  );
  // Each entry goes to the answer of the run whose task tree wrote it (runs can interleave: a message
  // queued behind a running turn lands before that turn's last entries).
  const children = new Map<string, string[]>();
  for (const task of view.tasks)
    if (task.parentId !== undefined)
      children.set(task.parentId, [...(children.get(task.parentId) ?? []), task.id]);
  const owner = new Map<string, { submission: Submission; parts: unknown[] }>();
  const messages: ChatMessage[] = [];
  for (const entry of conversation.entries) {
    const c = entry.content;
    const submission = bySeq.get(entry.seq);
    if (c.kind === "user" && submission) {
      messages.push({ id: submission.requestId, role: "user", parts: [{ type: "text", text: c.text }] });
      // A run still going is left to the resumed stream (it rebuilds its message from the start).
      if (!isSubmissionFinished(submission) || submission.taskId === undefined) continue;
      const answer = { submission, parts: [] as unknown[] };
      messages.push({ id: assistantMessageId(submission), role: "assistant", parts: answer.parts });
      const tree = [submission.taskId];
      for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i] as string) ?? []));
      for (const id of tree) owner.set(id, answer);
      continue;
    }
    const answer = entry.taskId === undefined ? undefined : owner.get(entry.taskId);
    if (!answer) continue;
    if (c.kind === "model") {
      if (c.text) answer.parts.push({ type: "text", text: c.text, state: "done" });
      for (const call of c.toolCalls)
        answer.parts.push({
          type: "dynamic-tool",
          toolName: call.name,
          toolCallId: call.id,
          state: "input-available",
          input: parseArgs(call.args),
        });
    } else if (c.kind === "interrupted" && c.of === "model" && c.partialText !== "") {
      // Text a crash or reload cut off, committed: a part of its own before the answer then given whole,
      // as the resumed stream shows it (the page marks it cut off), not lost at the next reload.
      answer.parts.push({ type: "text", text: c.partialText, state: "done" });
    } else if (c.kind === "tool-result") {
      const part = answer.parts.find((p) => (p as { toolCallId?: string }).toolCallId === c.toolCallId) as
        | Record<string, unknown>
        | undefined;
      const denied = deniedBy(view.tasks, c.toolCallId);
      if (part && denied) {
        part.state = "output-denied";
        part.approval = { id: approvalKey(denied.id), approved: false };
      } else if (part) {
        part.state = c.outcome === "ok" ? "output-available" : "output-error";
        if (c.outcome === "ok") part.output = c.output;
        else part.errorText = `${c.outcome}: ${errorText(c.output)}`;
      }
    }
  }
  // A finished run whose tasks left the view's working set has no parts to show: it is left out.
  return messages.filter((m) => m.role !== "assistant" || m.parts.length > 0);
}

/** The tool task of a call a person declined (its result says so), if it was. */
function deniedBy(tasks: readonly Task[], toolCallId: string): Task | undefined {
  const task = tasks.find((t) => toolCallOf(t) === toolCallId);
  return task && declinedByPerson(task) ? task : undefined;
}
