/**
 * A model on any OpenAI-compatible chat-completions endpoint, over `fetch`, with SSE streaming and
 * incremental tool-call assembly. Rate limits and server errors become retryable ModelErrors (with the
 * server's retry-after); a stream cut mid-way keeps what arrived as `partialText`.
 */
import type { ToolCall } from "../records/schemas.ts";
import { serverEvents } from "../server-events.ts";
import type { GenerateOptions, Model, ModelMessage, ModelRequest, ModelResponse } from "./model.ts";
import { ModelError } from "./model.ts";

export interface OpenAiCompatibleOptions {
  /** e.g. `https://api.openai.com/v1` or a local server's `/v1`. */
  readonly baseUrl: string;
  readonly apiKey?: string;
  readonly model: string;
  /** Injected for tests and for runtimes with their own fetch; default `globalThis.fetch`. */
  readonly fetch?: typeof fetch;
  readonly headers?: Record<string, string>;
}

/** @example const model = openAiCompatibleModel({ baseUrl: "http://localhost:11434/v1", model: "llama3.1" }); */
export function openAiCompatibleModel(options: OpenAiCompatibleOptions): Model {
  const doFetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  return {
    id: `openai-compatible:${options.model}`,
    async generate(request: ModelRequest, { signal, onText }: GenerateOptions): Promise<ModelResponse> {
      let response: Response;
      try {
        response = await doFetch(`${options.baseUrl.replace(/\/$/, "")}/chat/completions`, {
          method: "POST",
          signal,
          headers: {
            "content-type": "application/json",
            accept: "text/event-stream",
            ...(options.apiKey !== undefined && { authorization: `Bearer ${options.apiKey}` }),
            ...options.headers,
          },
          body: JSON.stringify(toWire(options.model, request)),
        });
      } catch (error) {
        if (signal.aborted) throw error;
        throw new ModelError(`cannot reach ${options.baseUrl}: ${(error as Error).message}`, {
          retryable: true,
          cause: error,
        });
      }
      if (!response.ok) throw await httpError(response);
      if (!response.body) throw new ModelError("the endpoint returned no body", { retryable: true });
      return readStream(response.body, signal, onText);
    },
  };
}

async function httpError(response: Response): Promise<ModelError> {
  const body = await response.text().catch(() => "");
  const retryAfter = response.headers.get("retry-after");
  const seconds = retryAfter !== null ? Number(retryAfter) : Number.NaN;
  const retryable = response.status === 429 || response.status === 408 || response.status >= 500;
  return new ModelError(`model endpoint answered ${response.status}: ${body.slice(0, 300)}`, {
    retryable,
    status: response.status,
    ...(Number.isFinite(seconds) && { retryAfterMs: seconds * 1_000 }),
  });
}

/** A tool-call delta. `index` is missing on some servers (Gemini's sends each call whole, with its id). */
interface WireToolCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

interface WireChunk {
  choices?: {
    delta?: {
      content?: string | null;
      tool_calls?: WireToolCall[];
    };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

async function readStream(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
  onText: ((delta: string) => void) | undefined,
): Promise<ModelResponse> {
  let text = "";
  let finishReason: string | undefined;
  let usage: ModelResponse["usage"];
  const calls = new Map<number, { id: string; name: string; args: string }>();
  let done = false;
  try {
    for await (const event of serverEvents(body)) {
      const data = event.data.trim();
      if (data === "") continue;
      if (data === "[DONE]") {
        done = true;
        break;
      }
      const chunk = JSON.parse(data) as WireChunk;
      for (const choice of chunk.choices ?? []) {
        const delta = choice.delta;
        if (delta?.content) {
          text += delta.content;
          onText?.(delta.content);
        }
        for (const call of delta?.tool_calls ?? []) {
          const key = call.index ?? unindexedKey(calls, call);
          const current = calls.get(key) ?? { id: "", name: "", args: "" };
          calls.set(key, {
            id: call.id ?? current.id,
            name: current.name + (call.function?.name ?? ""),
            args: current.args + (call.function?.arguments ?? ""),
          });
        }
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
      if (chunk.usage) {
        usage = {
          inputTokens: chunk.usage.prompt_tokens ?? 0,
          outputTokens: chunk.usage.completion_tokens ?? 0,
        };
      }
    }
  } catch (error) {
    if (signal.aborted) throw error;
    throw new ModelError(`the response stream broke: ${(error as Error).message}`, {
      retryable: true,
      partialText: text,
      cause: error,
    });
  }
  if (!done && finishReason === undefined) {
    throw new ModelError("the response stream ended before it was complete", {
      retryable: true,
      partialText: text,
    });
  }
  // A call the server gave no id keeps it empty: the kernel gives it one unique in its conversation (a
  // per-response `call_<index>` would repeat every round, and pair results with the wrong calls).
  const toolCalls: ToolCall[] = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, call]) => ({ id: call.id, name: call.name, args: call.args }));
  return { text, toolCalls, ...(usage && { usage }), ...(finishReason !== undefined && { finishReason }) };
}

/**
 * Where a tool-call delta without `index` belongs: the call with its id; a new call when it brings a new
 * id, or a name while the latest call has one (names do not come in pieces); else the latest call (a piece
 * of its arguments).
 */
function unindexedKey(calls: ReadonlyMap<number, { id: string; name: string }>, call: WireToolCall): number {
  const keys = [...calls.keys()];
  const last = keys.length === 0 ? undefined : Math.max(...keys);
  if (call.id !== undefined) {
    for (const [key, known] of calls) if (known.id === call.id) return key;
    return last === undefined ? 0 : last + 1;
  }
  const latest = last === undefined ? undefined : calls.get(last);
  if (latest === undefined || last === undefined) return 0;
  return call.function?.name && latest.name !== "" ? last + 1 : last;
}

function toWire(model: string, request: ModelRequest) {
  return {
    model,
    stream: true,
    stream_options: { include_usage: true },
    messages: request.messages.map(toWireMessage),
    ...(request.tools.length > 0 && {
      tools: request.tools.map((tool) => ({
        type: "function",
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      })),
    }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.maxOutputTokens !== undefined && { max_tokens: request.maxOutputTokens }),
  };
}

function toWireMessage(message: ModelMessage) {
  switch (message.role) {
    case "assistant":
      return {
        role: "assistant",
        content: message.content || null,
        ...(message.toolCalls.length > 0 && {
          tool_calls: message.toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.args },
          })),
        }),
      };
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
    default:
      return { role: message.role, content: message.content };
  }
}
