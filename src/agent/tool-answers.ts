/**
 * Answers for tool calls that ended without a result of their own, so every call the model made is answered
 * in the context it sees next — never as an error when the call may have taken effect.
 */
import { clip } from "../records/json.ts";
import type { Entry, EntryContent, Json, Task, ToolCall } from "../records/schemas.ts";
import type { CancelStage, PhaseContext } from "../tasks/define-task.ts";
import type { ToolOutcome } from "./tool-finish.ts";

/** What answering needs of the generation task's phase. */
export type AnsweringContext = Pick<PhaseContext, "task" | "child" | "appendEntry">;

/**
 * Tool calls of the previous round whose task ended without writing a result (it failed: its result could
 * not be stored, it hit the restart limit; or it was cancelled) get a result now, committed with this
 * phase's transition: every call the model made is answered in the context it sees next.
 */
export function answerEndedCalls(
  ctx: AnsweringContext,
  conversationId: string,
  previousRound: number,
  entries: readonly Entry[],
): EntryContent[] {
  const own = ctx.task.id;
  const at = entries.findLastIndex((e) => e.taskId === own && e.content.kind === "model");
  const asked = entries[at];
  if (asked?.content.kind !== "model" || asked.content.toolCalls.length === 0) return [];
  // Only what follows the asking entry can answer it (entries of other turns placed before it cannot).
  const answered = new Set<string>();
  for (let i = at + 1; i < entries.length; i++) {
    const entry = entries[i] as Entry;
    if (entry.seq > asked.seq && entry.content.kind === "tool-result") answered.add(entry.content.toolCallId);
  }
  const added: EntryContent[] = [];
  for (const [index, call] of asked.content.toolCalls.entries()) {
    if (answered.has(call.id)) continue;
    const id = toolCallTaskId(own, previousRound, index);
    const content = endedAnswer(call, ctx.child(id));
    if (content === undefined) continue;
    ctx.appendEntry(conversationId, content, { taskId: id });
    added.push(content);
  }
  return added;
}

/** The id of the tool task for call `index` of a round's model response. */
export function toolCallTaskId(generationTaskId: string, round: number, index: number): string {
  return `${generationTaskId}/r${round}/${index}`;
}

/** The answer to a call that never started: its turn was cancelled (for `reason`) before it did. */
export function notRunAnswer(call: Pick<ToolCall, "id" | "name">, reason: string) {
  return notStarted(call, `the tool call ended without a result: ${cancelledBeforeRun(reason)}`);
}

const cancelledBeforeRun = (reason: string) => `cancelled before it ran (${reason})`;

/** The answer to a call its turn ended without starting, saying why. */
export function notStarted(call: Pick<ToolCall, "id" | "name">, why: string) {
  return { ...rejected(call, why), outcome: "not-run" as const };
}

/**
 * The answer to `call` when its tool task ended without writing a result, or undefined while it has not.
 * `started` is whether its work may have begun (by default read from its checkpoint, see `mayHaveStarted`).
 */
export function endedAnswer(
  call: Pick<ToolCall, "id" | "name">,
  task: Task | undefined,
  started = task !== undefined && mayHaveStarted(task),
) {
  const ended = endedWithout(task, started);
  if (ended === undefined) return undefined;
  return { ...rejected(call, `the tool call ended without a result: ${ended.why}`), outcome: ended.outcome };
}

/**
 * Phases a tool call is in once its work may have begun: running here (`execute`), settling a cut-off run
 * (`settle`), its own task running (`collect`), taken by an executor (`completed`, `unreported`).
 */
const STARTED_PHASES = new Set(["execute", "settle", "collect", "completed", "unreported"]);

/** Whether a tool task's work may have begun, by its checkpoint: never claimed not to have when it may have. */
export function mayHaveStarted(task: Task): boolean {
  const { phase, data } = task.checkpoint;
  if (STARTED_PHASES.has(phase)) return true;
  // Waiting for a host to take it: one that had started before it waited (`recovering`) may have run.
  return (
    phase === "placed" && (data as { data?: { recovering?: boolean } } | null)?.data?.recovering === true
  );
}

/**
 * How a tool task that ended without writing a result is answered, or undefined when it has not ended. A
 * call that may have taken effect is never called an error: the model, told "error", would call it again.
 */
function endedWithout(
  task: Task | undefined,
  started: boolean,
): { outcome: ToolOutcome; why: string } | undefined {
  // A replay-safe call may simply be made again; an unsafe one whose fate is open is `unknown`, not `error`.
  const intent =
    task?.checkpoint.phase === "execute"
      ? task.checkpoint.data
      : (task?.checkpoint.data as { data?: Json } | null)?.data;
  const safe = (intent as { replay?: string } | null | undefined)?.replay === "safe";
  const open: ToolOutcome = safe ? "error" : "unknown";
  const unsure = safe
    ? "it is safe to call again"
    : "it may have taken effect: do not call it again without checking";
  switch (task?.state.status) {
    case "failed": {
      const { code, message } = task.state.error;
      // The tool ran, and only storing what it returned failed: say so, the call may have taken effect.
      if (code === "record-too-large")
        return {
          outcome: open,
          why: `it ran, but what it returned is too large to store (${message}); ${unsure}`,
        };
      // Any other failure once its work may have begun (its output could not be stored, the restart limit,
      // a phase that threw while it ran): what it did is open, never an error to be repeated blindly.
      if (started) return { outcome: open, why: `${message}; ${unsure}` };
      return { outcome: "not-run", why: message };
    }
    case "cancelled":
      return started
        ? { outcome: open, why: `cancelled while it ran (${task.state.reason}); ${unsure}` }
        : { outcome: "not-run", why: cancelledBeforeRun(task.state.reason) };
    case "succeeded":
      return { outcome: open, why: `it succeeded, but its result entry is missing; ${unsure}` };
    default:
      return undefined;
  }
}

export function rejected(call: Pick<ToolCall, "id" | "name">, error: string) {
  return {
    kind: "tool-result" as const,
    toolCallId: call.id,
    toolName: call.name,
    outcome: "error" as const,
    output: { error },
  };
}

/**
 * The generation task's `onCancelled` and `onFailed`: the turn `task` ended, and each call it never started is
 * answered not-run in that commit, saying why (see {@link unstartedCalls}).
 */
export function answerUnstartedCalls(task: Task, stage: CancelStage): void {
  const round = task.checkpoint.data as { round?: number; queuedCalls?: QueuedCall[] } | null;
  const { conversationId } = task.input as { conversationId: string };
  const state = task.state;
  // Each answer repeats why: a long error is cut, so answering many calls cannot outgrow a row.
  const answer =
    state.status === "failed"
      ? (call: Call) => notStarted(call, `not run: the turn failed first (${clip(state.error.message)})`)
      : (call: Call) => notRunAnswer(call, state.status === "cancelled" ? state.reason : "cancelled");
  for (const call of unstartedCalls(task.id, round?.round ?? 1, round?.queuedCalls ?? [], stage))
    stage.appendEntry(conversationId, answer(call));
}

type Call = Pick<ToolCall, "id" | "name">;
type QueuedCall = Call & { index: number };

/**
 * The calls an ended turn answers itself, none of them started: those its round (`round`) still queued
 * from the response before, and those of a response recorded in the commit that ends it — unless answered
 * in that commit or spawned as a task (which answers itself).
 */
function unstartedCalls(
  turn: string,
  round: number,
  queued: readonly QueuedCall[],
  stage: CancelStage,
): { id: string; name: string }[] {
  const answered = new Set<string>();
  const calls: { id: string; name: string; taskId: string }[] = [];
  for (const e of stage.appended) {
    if (e.content.kind === "tool-result") answered.add(e.content.toolCallId);
    if (e.content.kind === "model" && e.taskId === turn)
      for (const [index, { id, name }] of e.content.toolCalls.entries())
        calls.push({ id, name, taskId: toolCallTaskId(turn, round, index) });
  }
  for (const { id, name, index } of queued)
    calls.push({ id, name, taskId: toolCallTaskId(turn, round - 1, index) });
  return calls
    .filter((call) => !answered.has(call.id) && !stage.child(call.taskId))
    .map(({ id, name }) => ({ id, name }));
}
