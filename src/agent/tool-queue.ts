/**
 * Which of a model response's tool calls start now, and which wait their turn. A tool may be exclusive
 * (`defineTool({ exclusive: true })`, or a group name shared by tools that must not overlap), and an agent
 * may run every call one at a time (`createAgent({ toolCalls: "sequential" })`): exclusive calls of one
 * group run in the order the model gave them, one after another; other calls run alongside them. The calls
 * still to start are kept in the turn's checkpoint, so a crash never loses or repeats one: each is spawned
 * (its intent fixed) in the commit that also starts the wait on it.
 */
import type { ToolCall } from "../records/schemas.ts";
import type { PhaseContext } from "../tasks/define-task.ts";
import { exclusiveKeyOfTool, type ToolDefinition } from "./define-tool.ts";
import { rejected, toolCallTaskId } from "./tool-answers.ts";
import { resolveToolCall, TOOL_TASK } from "./tool-task.ts";

/** How an agent runs the tool calls of one model response. */
export type ToolCallMode = "parallel" | "sequential";

/** The exclusive group of a tool's calls, if any (every call is in one group when the agent is sequential). */
export function exclusiveGroup(tool: ToolDefinition<unknown>, mode: ToolCallMode): string | undefined {
  return mode === "sequential" ? "" : exclusiveKeyOfTool(tool);
}

/**
 * Spawns the calls at `indices` (of `calls`, the response of round `round`) that may start now, and
 * appends a rejected result for any the model got wrong. Returns the spawned task ids and the indices
 * left for later (calls of a group that already has one started here).
 */
export async function spawnCalls(
  // biome-ignore lint/suspicious/noExplicitAny: the generation task's own context, of any phase data
  ctx: PhaseContext<{ conversationId: string }, any>,
  tools: ReadonlyMap<string, ToolDefinition<unknown>>,
  mode: ToolCallMode,
  calls: readonly ToolCall[],
  round: number,
  indices: readonly number[],
): Promise<{ children: string[]; queued: number[] }> {
  const conversationId = ctx.input.conversationId;
  const children: string[] = [];
  const queued: number[] = [];
  const started = new Set<string>();
  for (const index of indices) {
    const call = calls[index];
    if (!call) continue;
    const tool = tools.get(call.name);
    const group = tool ? exclusiveGroup(tool, mode) : undefined;
    if (group !== undefined && started.has(group)) {
      queued.push(index); // validated when it starts: its precheck sees the world as it is then
      continue;
    }
    const id = toolCallTaskId(ctx.task.id, round, index);
    const resolved = await resolveToolCall(tools, call.name, call.args, id);
    if (!resolved.ok) {
      ctx.appendEntry(conversationId, rejected(call, resolved.error));
      continue;
    }
    if (group !== undefined) started.add(group);
    const input = { toolCallId: call.id, name: call.name, args: call.args, conversationId };
    if (resolved.tool.task !== undefined || resolved.tool.approval) {
      // Task-backed, or asking a person first: its call phase spawns the work or starts the wait.
      children.push(ctx.spawn(TOOL_TASK, input, { id }));
      continue;
    }
    children.push(ctx.spawn(TOOL_TASK, input, { id, phase: "execute", data: resolved.intent as never }));
  }
  return { children, queued };
}

/** A call of a response still to start, as its turn keeps it: a turn cancelled first answers it. */
export interface QueuedCall {
  readonly id: string;
  readonly name: string;
  /** Its index in the response (its tool task's id, once spawned, is made of it). */
  readonly index: number;
}

/** A round's `queue` (indices of the response's calls still to start) and the calls it names. */
export function queueOf(
  calls: readonly ToolCall[],
  indices: readonly number[],
): { queue?: number[]; queuedCalls?: QueuedCall[] } {
  if (indices.length === 0) return {};
  const queuedCalls = indices.map((index) => {
    const { id, name } = calls[index] as ToolCall;
    return { id, name, index };
  });
  return { queue: [...indices], queuedCalls };
}
