/**
 * Any AI SDK language model (the `@ai-sdk/provider` v3 specification, `LanguageModelV3`) as our Model, so
 * users plug in the providers they already use. Only types come from `@ai-sdk/provider`; errors are
 * recognised by their documented shape (`APICallError`: `statusCode`, `isRetryable`, `responseHeaders`).
 */
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Message,
  LanguageModelV3StreamPart,
} from "@ai-sdk/provider";
import type { ToolCall } from "../records/schemas.ts";
import type {
  GenerateOptions,
  Model,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelUsage,
} from "./model.ts";
import { ModelError } from "./model.ts";

/** @example const model = aiSdkModel(createOpenAI({ apiKey })("gpt-4.1-mini")); */
export function aiSdkModel(model: LanguageModelV3): Model {
  return {
    id: `${model.provider}:${model.modelId}`,
    async generate(request: ModelRequest, { signal, onText }: GenerateOptions): Promise<ModelResponse> {
      let text = "";
      const toolCalls: ToolCall[] = [];
      let usage: ModelUsage | undefined;
      let finishReason: string | undefined;
      try {
        const { stream } = await model.doStream(callOptions(request, signal));
        const reader = stream.getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const part: LanguageModelV3StreamPart = value;
          switch (part.type) {
            case "text-delta":
              text += part.delta;
              onText?.(part.delta);
              break;
            case "tool-call":
              toolCalls.push({ id: part.toolCallId, name: part.toolName, args: part.input });
              break;
            case "finish":
              finishReason = part.finishReason.unified;
              usage = {
                inputTokens: part.usage.inputTokens.total ?? 0,
                outputTokens: part.usage.outputTokens.total ?? 0,
              };
              break;
            case "error":
              throw part.error;
            default:
              break;
          }
        }
      } catch (error) {
        if (signal.aborted) throw error;
        throw toModelError(error, text);
      }
      if (finishReason === undefined) {
        throw new ModelError("the model's stream ended without finishing", {
          retryable: true,
          partialText: text,
        });
      }
      return { text, toolCalls, finishReason, ...(usage && { usage }) };
    },
  };
}

function callOptions(request: ModelRequest, signal: AbortSignal): LanguageModelV3CallOptions {
  return {
    prompt: request.messages.map(toPromptMessage),
    abortSignal: signal,
    ...(request.tools.length > 0 && {
      tools: request.tools.map((tool) => ({
        type: "function" as const,
        name: tool.name,
        description: tool.description,
        inputSchema: tool.parameters as never,
      })),
    }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.maxOutputTokens !== undefined && { maxOutputTokens: request.maxOutputTokens }),
  };
}

function toPromptMessage(message: ModelMessage): LanguageModelV3Message {
  switch (message.role) {
    case "system":
      return { role: "system", content: message.content };
    case "user":
      return { role: "user", content: [{ type: "text", text: message.content }] };
    case "assistant":
      return {
        role: "assistant",
        content: [
          ...(message.content ? [{ type: "text" as const, text: message.content }] : []),
          ...message.toolCalls.map((call) => ({
            type: "tool-call" as const,
            toolCallId: call.id,
            toolName: call.name,
            input: parseArgs(call.args),
          })),
        ],
      };
    case "tool":
      return {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: message.toolCallId,
            toolName: message.toolName,
            output: { type: "text", value: message.content },
          },
        ],
      };
    default:
      return message satisfies never;
  }
}

/**
 * An earlier call's arguments as the prompt's tool-call input: always a JSON object. Anthropic and Bedrock
 * refuse any other input ("Input should be a valid dictionary"), so a call the model got wrong (cut-off
 * JSON, a bare value) sent back as it was would fail every later request of the conversation; its result
 * already tells the model what was wrong. No arguments (empty) are `{}` too.
 */
function parseArgs(args: string): unknown {
  try {
    const parsed: unknown = JSON.parse(args);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/**
 * AI SDK errors (by their `name`) that asking again cannot cure: the provider refused the prompt or the
 * call's settings before sending anything (a system message where it allows none, a part it does not
 * support), or the model or its key is not there.
 */
const NEVER_RETRYABLE = new Set([
  "AI_InvalidPromptError",
  "AI_UnsupportedFunctionalityError",
  "AI_InvalidArgumentError",
  "AI_NoSuchModelError",
  "AI_LoadAPIKeyError",
  "AI_LoadSettingError",
]);

/** Maps AI SDK errors (APICallError and friends) to our retryable/non-retryable ModelError. */
function toModelError(error: unknown, partialText: string): ModelError {
  if (error instanceof ModelError) return error;
  const e = (typeof error === "object" && error !== null ? error : {}) as {
    name?: string;
    message?: string;
    statusCode?: number;
    isRetryable?: boolean;
    responseHeaders?: Record<string, string>;
  };
  const retryAfter = Number(e.responseHeaders?.["retry-after"]);
  const refused = e.name !== undefined && NEVER_RETRYABLE.has(e.name);
  return new ModelError(e.message ?? String(error), {
    retryable:
      !refused &&
      (e.isRetryable ?? (e.statusCode === undefined || e.statusCode === 429 || e.statusCode >= 500)),
    ...(e.statusCode !== undefined && { status: e.statusCode }),
    ...(Number.isFinite(retryAfter) && { retryAfterMs: retryAfter * 1_000 }),
    ...(partialText !== "" && { partialText }),
    cause: error,
  });
}
