/**
 * How a tool call ends (DESIGN §5): its outcome and how it was obtained, committed as its result entry and
 * its task's end together — wherever the tool ran (the owner, or an executor that reported it back).
 */
import type { EntryContent, Json } from "../records/schemas.ts";
import { utf8Length } from "../records/schemas.ts";
import type { Transition } from "../tasks/define-task.ts";

/**
 * Live output a running tool reported: loss-tolerant progress, deleted by the commit that ends the call.
 * (The call's intent is its task's checkpoint and its outcome its result entry: no other per-call record.)
 */
export const TOOL_PROGRESS_DOCUMENT = "tool-progress";

/**
 * A tool output whose JSON is longer than this is kept once, in its result entry; the tool task's result
 * records its size instead of a second copy. A commit row has a size limit (about 2 MB on a Durable Object),
 * and every copy counts against it.
 */
export const RESULT_INLINE_MAX_OUTPUT = 4096;

/**
 * How a tool call ended, as the model and the views see it: `ok`; `error` (the tool said so, or the call
 * was refused before it ran); `interrupted` (cut off by a crash, unsafe to re-run, no way to confirm);
 * `not-run` (it never took effect: it never started, or `confirm` said it did not happen); `unknown` (it was
 * cut off again and again and nothing could confirm whether it took effect); `rejected` (a person declined
 * the call it asked approval for: it never ran).
 */
export type ToolOutcome = "ok" | "error" | "interrupted" | "not-run" | "unknown" | "rejected";

export interface ToolResult {
  readonly outcome: ToolOutcome;
  readonly output: Json;
  /**
   * How the result was obtained: `run`; `replay` (re-run after a crash: the call and the tool are both
   * replay-safe); `confirm` (found by its operation id, or confirmed not to have happened);
   * `run-after-confirm` (an unsafe tool whose `confirm` found nothing, so it ran, under the same operation
   * id); `rejected` (refused before it ran); `approval` (a person declined it); `unknown` (no way to find
   * out).
   */
  readonly via: "run" | "replay" | "confirm" | "run-after-confirm" | "rejected" | "approval" | "unknown";
  /** The executor that ran it and reported back, when that was not the session's owner. */
  readonly executor?: string;
}

export const progressDocumentId = (taskId: string) => `tool-progress:${taskId}`;

/** What ending a call needs of its tool task's phase. */
export interface EndingCall {
  readonly input: { readonly conversationId: string; readonly toolCallId: string; readonly name: string };
  readonly task: { readonly id: string };
  appendEntry(conversationId: string, content: EntryContent): void;
  deleteDocument(id: string): void;
  complete(result?: Json): Transition;
}

/**
 * Commits the result entry and the task's end together, and deletes the call's progress document. A large
 * output is kept once, in the entry; the task's result then records its size instead.
 */
export function finish(ctx: EndingCall, result: ToolResult): Transition {
  ctx.appendEntry(ctx.input.conversationId, {
    kind: "tool-result",
    toolCallId: ctx.input.toolCallId,
    toolName: ctx.input.name,
    outcome: result.outcome,
    output: result.output,
  });
  ctx.deleteDocument(progressDocumentId(ctx.task.id));
  const json = JSON.stringify(result.output);
  const { output, ...rest } = result;
  const kept = json.length <= RESULT_INLINE_MAX_OUTPUT ? { output } : { outputBytes: utf8Length(json) };
  return ctx.complete({ ...rest, ...kept, toolCallId: ctx.input.toolCallId } as unknown as Json);
}
