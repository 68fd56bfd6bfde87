/** Tools: what a model may call. Arguments are validated with zod; the model sees the JSON Schema. */
import { z } from "zod";
import { DefinitionError, ensureError } from "../errors.ts";
import { CHECKPOINT_VALUE_DEPTH } from "../records/json.ts";
import { compiled, findNonJson, type Json } from "../records/schemas.ts";
import type { ToolSpec } from "./model.ts";

/** What a running tool gets besides its arguments. */
export interface ToolContext {
  /**
   * Stable across re-entries of this tool call: pass it to the service as an idempotency key, and look
   * the operation up by it in `confirm`.
   */
  readonly operationId: string;
  readonly signal: AbortSignal;
  /** Live output or progress: kept as deferred, loss-tolerant state (shown if the call is interrupted). */
  reportProgress(progress: Json): void;
}

export interface ToolDefinition<Args = unknown> {
  readonly name: string;
  readonly description: string;
  readonly input: z.ZodType<Args>;
  /**
   * `safe`: re-running after a crash cannot do harm (reads, idempotent writes). `unsafe`: never re-run
   * blindly; recovery asks `confirm`, or records the call as interrupted.
   */
  readonly replay: "safe" | "unsafe";
  /** Did the operation with this id happen? Its result if so, undefined if it did not. */
  readonly confirm?: (operationId: string, args: Args) => Promise<Json | undefined> | Json | undefined;
  /**
   * How many times a call of this tool may be cut off by a crash and re-entered before it gives up, asking
   * `confirm` what happened (default: the session's `maxRestarts`, else 3).
   */
  readonly maxRestarts?: number;
  /**
   * Checks before the intent is committed; a returned string rejects the call with that message. One that
   * throws rejects it too, "precheck failed: …": the tool does not run.
   */
  readonly precheck?: (args: Args) => string | undefined | Promise<string | undefined>;
  /**
   * Ask a person before the call runs: `true`, or a function of the validated arguments. The tool task
   * commits its intent, then waits for a decision on key `approval:<tool task id>` (listed in
   * `view().pending` with the tool and its arguments). `{ approved: false, reason }` ends the call as
   * `rejected` without running it; `{ approved: true, arguments }` runs it with edited arguments, validated
   * again (invalid ones are refused when the decision is sent). A pending approval survives reloads.
   */
  readonly approval?: boolean | ((args: Args) => boolean | Promise<boolean>);
  /**
   * Calls that must not overlap: `true` runs this tool's calls of one model response one after another, in
   * the order the model gave them; a group name does the same for every tool that names it (tools that
   * share a file, an account, a rate limit). Across turns and conversations running at once, no two of
   * them run at the same time either. Other calls still run alongside. Default: all in parallel.
   */
  readonly exclusive?: boolean | string;
  /**
   * Where the tool may run: `anywhere` (default), `browser` (it needs the page, the user's credentials or
   * local files) or `edge`. On a host of another kind (`openSession({ host })`) the call waits, durably and
   * visibly in `view().pending`, until a host of this kind leads the session and runs it.
   */
  readonly runsOn?: "anywhere" | "browser" | "edge";
  /** Runs the tool. Give either `execute` or `task`. */
  readonly execute?: (args: Args, context: ToolContext) => Promise<Json> | Json;
  /**
   * A task kind that does the work instead of `execute`: the tool call spawns it (its input is the
   * validated arguments), waits for it durably, and its result becomes the tool result. For work that
   * needs phases of its own, such as one child task per email.
   */
  readonly task?: string;
}

/**
 * Declares a tool.
 *
 * @example
 * const sendEmail = defineTool({
 *   name: "send_email",
 *   description: "Send one email",
 *   input: z.object({ to: z.string().email(), body: z.string() }),
 *   replay: "unsafe",
 *   confirm: (operationId) => mail.lookup(operationId),
 *   execute: ({ to, body }, { operationId, signal }) => mail.send({ to, body, idempotencyKey: operationId }, { signal }),
 * });
 */
export function defineTool<Args>(definition: ToolDefinition<Args>): ToolDefinition<Args> {
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(definition.name)) {
    throw new DefinitionError(`tool name "${definition.name}" must be 1-64 letters, digits, _ or -`);
  }
  if ((definition.execute === undefined) === (definition.task === undefined)) {
    throw new DefinitionError(`tool "${definition.name}" needs exactly one of execute or task`);
  }
  if (
    definition.maxRestarts !== undefined &&
    !(Number.isInteger(definition.maxRestarts) && definition.maxRestarts >= 0)
  ) {
    throw new DefinitionError(`tool "${definition.name}": maxRestarts must be a non-negative integer`);
  }
  // Arguments are validated on every call: compiled here (see `compiled`).
  return { ...definition, input: compiled(definition.input) };
}

/**
 * What a tool's `precheck` says of validated `args`: the problem that rejects the call, or undefined. A
 * precheck that throws (its database unreachable, say) rejects the call too: it never ran, so the model is
 * told so, never that its outcome is unknown.
 */
export async function precheckProblem(
  tool: ToolDefinition<unknown>,
  args: unknown,
): Promise<string | undefined> {
  try {
    return (await tool.precheck?.(args)) || undefined;
  } catch (error) {
    const why = ensureError(error).message;
    return `precheck failed: ${why}. ${tool.name} did not run.`;
  }
}

/**
 * A model's raw arguments as JSON, or what is wrong with them, for the model to read: not JSON, or JSON no
 * record holds (an escaped lone surrogate such as "\ud83d", half of an emoji). The call's intent stores them
 * two levels deep (a checkpoint's `data.args`), so they are refused here, never found by the commit, which
 * would fail the whole turn.
 */
export function readArguments(
  tool: ToolDefinition<unknown>,
  rawArgs: string,
): { raw: Json } | { error: string } {
  let raw: unknown;
  try {
    raw = rawArgs.trim() === "" ? {} : JSON.parse(rawArgs);
  } catch (error) {
    return { error: `arguments are not valid JSON: ${(error as Error).message}` };
  }
  const unstorable = findNonJson(raw, CHECKPOINT_VALUE_DEPTH);
  if (unstorable !== undefined) return { error: `invalid arguments for ${tool.name}: ${unstorable}` };
  return { raw: raw as Json };
}

/** The tool as a model sees it, with the JSON Schema generated from its zod schema by zod itself. */
export function toolSpec(tool: ToolDefinition<unknown>): ToolSpec {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(tool.input, { io: "input" }) as Record<
    string,
    unknown
  >;
  return { name: tool.name, description: tool.description, parameters };
}

/** The key under which an exclusive tool's calls never run at once in a session (`exclusive`), if any. */
export function exclusiveKeyOfTool(tool: ToolDefinition<unknown> | undefined): string | undefined {
  if (tool?.exclusive === true) return `tool:${tool.name}`;
  return typeof tool?.exclusive === "string" ? `group:${tool.exclusive}` : undefined;
}

/** A tool task's exclusive key while it runs its tool (its `execute` phase), else undefined. */
export function exclusiveCallKey(
  tools: ReadonlyMap<string, ToolDefinition<unknown>>,
  task: { readonly input: unknown; readonly checkpoint: { readonly phase: string } },
): string | undefined {
  if (task.checkpoint.phase !== "execute") return undefined;
  return exclusiveKeyOfTool(tools.get((task.input as { name?: string } | null)?.name ?? ""));
}
