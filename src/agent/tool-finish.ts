/**
 * How a tool call runs and ends (DESIGN §5): the replay rules that run a call whose intent is committed,
 * its outcome and how it was obtained, committed as its result entry and its task's end together —
 * wherever the tool ran (the owner, or an executor that reported it back).
 */

import { ensureError } from "../errors.ts";
import { checkedCopy } from "../records/json.ts";
import type { EntryContent, Json } from "../records/schemas.ts";
import { findNonJson, utf8Length } from "../records/schemas.ts";
import type { Transition } from "../tasks/define-task.ts";
import type { ToolDefinition } from "./define-tool.ts";

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
 * cut off again and again and nothing could confirm whether it took effect, or it ran and what it returned
 * could not be stored); `rejected` (a person declined the call it asked approval for: it never ran).
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

/** What `call` commits with the intent: everything recovery needs, without the tool's code. */
export interface Intent {
  args: Json;
  replay: "safe" | "unsafe";
  operationId: string;
}

/**
 * What re-entering `execute` after a crash does with a call whose outcome is unknown: run it again (both the
 * call and the tool are replay-safe), ask the tool whether it already happened, or give up as interrupted.
 * One rule for the recovery itself and for the preview that describes it.
 */
export function recoveryOf(
  intent: Intent,
  tool: ToolDefinition<unknown>,
): "replay" | "confirm" | "interrupted" {
  if (intent.replay === "safe" && tool.replay === "safe") return "replay";
  return tool.confirm ? "confirm" : "interrupted";
}

/** How a run of a call reaches its tool, and what `interrupted` means where it runs. */
export interface CallRun {
  readonly signal: AbortSignal;
  /** Whether it was asked to stop, read without making the AbortController (default `signal.aborted`). */
  readonly aborted?: boolean;
  readonly reportProgress?: (progress: Json) => void;
  /** Awaited before an unsafe call reaches the outside world (every host that could take over knows it). */
  readonly beforeEffect?: () => Promise<void>;
  /** The result of a call that may have run and can be neither re-run nor confirmed. */
  readonly interrupted: () => ToolResult;
}

/** Whether a call may not be repeated blindly: its intent or its tool says `unsafe`. */
export const isUnsafe = (
  intent: { readonly replay?: string },
  tool: Pick<ToolDefinition<unknown>, "replay">,
): boolean => intent.replay === "unsafe" || tool.replay === "unsafe";

/**
 * Runs a call whose intent is committed, by its replay rules: one that may have run before (`recovering`)
 * is confirmed by its operation id, or re-run when both the call and the tool are replay-safe, or ends
 * interrupted; then the tool runs under the intent's operation id. A tool that throws is an `error` result
 * the model can act on; an aborted run rethrows — but one stopped before its effect gate let it start is
 * `not-run`, and an unsafe call stopped before it starts (its cancel is committed: the phase began aborted)
 * is only confirmed, never started again. What the tool returns is stored as JSON (see {@link storedResult}).
 */
export async function runByRules(
  tool: ToolDefinition<unknown>,
  args: unknown,
  intent: Intent,
  recovering: boolean,
  run: CallRun,
): Promise<ToolResult> {
  const recovery = recovering ? recoveryOf(intent, tool) : undefined;
  if (recovery === "interrupted") return run.interrupted();
  const unsafe = isUnsafe(intent, tool);
  if (unsafe) {
    try {
      await run.beforeEffect?.();
    } catch (error) {
      // Stopped while it waited until it was safe to start: it never reached the outside world (unless
      // it had run before, `recovering`: then its outcome stays open).
      if (!run.signal.aborted || recovering) throw error;
      const why = "the tool call was cancelled before it ran (it was waiting until it was safe to start)";
      return { outcome: "not-run", output: { error: why }, via: "run" };
    }
  }
  if (recovery === "confirm") {
    const found = await tool.confirm?.(intent.operationId, args);
    if (found !== undefined)
      return storedResult({ outcome: "ok", output: found, via: "confirm" }, tool, intent);
  }
  // Stopped (its cancel committed, or an executor's lease ended) before an unsafe call started again: no
  // new effect starts, even for a tool that would ignore its signal. It did not happen (`confirm` said so).
  if (unsafe && (run.aborted ?? run.signal.aborted))
    return notStartedAfterStop(tool, recovery === "confirm", run.signal);
  // After a confirmation that found nothing, the call runs under the same operation id: say so.
  const via = recovery === "confirm" ? "run-after-confirm" : recovering ? "replay" : "run";
  try {
    const output = await (tool.execute as NonNullable<typeof tool.execute>)(args, {
      operationId: intent.operationId,
      // A getter: the phase's AbortController is made only for a tool that looks at its signal.
      get signal() {
        return run.signal;
      },
      reportProgress: run.reportProgress ?? (() => undefined),
    });
    return storedResult({ outcome: "ok", output, via }, tool, intent);
  } catch (error) {
    if (run.signal.aborted) throw error;
    return { outcome: "error", output: { error: ensureError(error).message }, via };
  }
}

/**
 * The result of a call whose intent is committed that this version cannot run: its tool no longer takes the
 * stored arguments (an upgrade changed its schema) or no longer runs by `execute`. A call that never started
 * is an error; one that may have run before the process stopped (`recovering`) is never called an error
 * when it is unsafe — the model, told "error", would call it again — but `unknown`.
 */
export function unavailableResult(
  name: string,
  intent: Intent,
  tool: Pick<ToolDefinition<unknown>, "replay"> | undefined,
  recovering: boolean,
): ToolResult {
  const why = `this version of ${name} cannot run the call (it no longer takes these arguments, or is not run here)`;
  if (!recovering) return { outcome: "error", output: { error: `${why}. It did not run.` }, via: "unknown" };
  if (!isUnsafe(intent, tool ?? intent))
    return { outcome: "error", output: { error: `${why}; it is safe to call again` }, via: "unknown" };
  const open = "it may have run before the process stopped: do not call it again without checking";
  return { outcome: "unknown", output: { error: `${why}, and ${open}` }, via: "unknown" };
}

function notStartedAfterStop(tool: ToolDefinition<unknown>, confirmed: boolean, signal: AbortSignal) {
  const reason = (signal.reason as Error | undefined)?.message ?? String(signal.reason);
  const before = confirmed
    ? `confirmed by operation id not to have happened, and stopped before it ran again`
    : "stopped before it ran";
  return {
    outcome: "not-run",
    output: { error: `${tool.name} was not run: ${before} (${reason})` },
    via: confirmed ? "confirm" : "run",
  } satisfies ToolResult;
}

/**
 * A result whose output is what a record can hold: the JSON its output stands for (`JSON.stringify`
 * semantics: an `undefined` field is dropped, a Date becomes its ISO string, NaN becomes null; a tool that
 * returns nothing returns null). Output JSON cannot hold (a BigInt, a cycle, a lone surrogate, a function)
 * never makes a call that ran look like one that failed: an unsafe call is `unknown` (it ran, and may have
 * taken effect), a replay-safe one an `error` that says it is safe to call again.
 */
export function storedResult(
  result: { readonly outcome: ToolOutcome; readonly output: unknown; readonly via: ToolResult["via"] },
  tool: Pick<ToolDefinition<unknown>, "name" | "replay">,
  intent: Pick<Intent, "replay">,
): ToolResult {
  const stored = toStoredJson(result.output);
  if ("json" in stored) return { ...result, output: stored.json };
  const why = `${tool.name} ran, but its output could not be stored (${stored.why})`;
  if (isUnsafe(intent, tool))
    return {
      outcome: "unknown",
      output: { error: `${why}: it may have taken effect: do not call it again without checking` },
      via: result.via,
    };
  return { outcome: "error", output: { error: `${why}; it is safe to call again` }, via: result.via };
}

function toStoredJson(value: unknown): { json: Json } | { why: string } {
  if (value === undefined) return { json: null };
  // Copied as checked: the commit's record validation then does not walk it again.
  if (findNonJson(value) === undefined) return { json: checkedCopy(value as Json) };
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    return { why: ensureError(error).message };
  }
  if (text === undefined) return { why: `it returned a ${typeof value}, not a JSON value` };
  const json = JSON.parse(text) as Json;
  const bad = findNonJson(json);
  return bad === undefined ? { json: checkedCopy(json) } : { why: bad };
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
