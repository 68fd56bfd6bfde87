/**
 * A scripted model: deterministic, declared turn by turn. The turn is chosen by how many assistant
 * messages the context already holds, so a re-asked request after a crash gets the same answer.
 */
import type { Timers } from "../clock.ts";
import type { Json } from "../records/schemas.ts";
import type { Model, ModelMessage, ModelRequest, ModelResponse } from "./model.ts";

/** One scripted turn: fixed text and tool calls, or a function of the request (it may be async). */
export type ScriptedTurn =
  | { readonly text?: string; readonly toolCalls?: readonly { name: string; args: Json | string }[] }
  | ((request: ModelRequest) => ScriptedTurn | Promise<ScriptedTurn>);

export interface ScriptedModelOptions {
  readonly id?: string;
  /** Split text into chunks streamed through `onText` (default: whole text at once). */
  readonly chunkSize?: number;
  /** Wait this long before each chunk (demos: time to watch, or to reload mid-stream). Needs `timers`. */
  readonly chunkDelayMs?: number;
  /** Timers for `chunkDelayMs`. */
  readonly timers?: Timers;
}

/**
 * @example
 * const model = scriptedModel([
 *   { toolCalls: [{ name: "send_email", args: { to: "ana@example.com", body: "Hi" } }] },
 *   { text: "Sent." },
 * ]);
 */
export function scriptedModel(turns: readonly ScriptedTurn[], options: ScriptedModelOptions = {}): Model {
  return {
    id: options.id ?? "scripted",
    async generate(request, { signal, onText }): Promise<ModelResponse> {
      signal.throwIfAborted();
      const index = request.messages.filter((m) => m.role === "assistant").length;
      let turn = turns[Math.min(index, turns.length - 1)] ?? { text: "" };
      while (typeof turn === "function") turn = await turn(request);
      const text = turn.text ?? "";
      const size = options.chunkSize ?? Math.max(1, text.length);
      for (let i = 0; i < text.length; i += size) {
        if (options.chunkDelayMs && options.timers) {
          const timers = options.timers;
          await new Promise<void>((resolve) => timers.setTimeout(resolve, options.chunkDelayMs ?? 0));
          signal.throwIfAborted();
        }
        onText?.(text.slice(i, i + size));
      }
      return {
        text,
        toolCalls: (turn.toolCalls ?? []).map((call, i) => ({
          id: `call_${index}_${i}`,
          name: call.name,
          args: typeof call.args === "string" ? call.args : JSON.stringify(call.args),
        })),
        usage: {
          inputTokens: estimateTokens(request.messages),
          outputTokens: Math.ceil(text.length / 4),
        },
        finishReason: turn.toolCalls?.length ? "tool-calls" : "stop",
      };
    },
  };
}

/** About four characters a token, from the messages' text (no serialization of the whole context). */
function estimateTokens(messages: readonly ModelMessage[]): number {
  let chars = 0;
  for (const message of messages) {
    chars += message.content.length + 16;
    if (message.role === "assistant")
      for (const call of message.toolCalls) chars += call.name.length + call.args.length + call.id.length;
  }
  return chars >> 2;
}
