/**
 * Our small model interface. Adapters turn AI SDK models, OpenAI-compatible endpoints and scripted test
 * models into it; the generation task only ever talks to this.
 */
import { KernelError } from "../errors.ts";
import { isWellFormedText, wellFormedText } from "../records/json.ts";
import type { Json, ToolCall } from "../records/schemas.ts";

/** One message of the context sent to a model. */
export type ModelMessage =
  | { readonly role: "system"; readonly content: string }
  | { readonly role: "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content: string; readonly toolCalls: readonly ToolCall[] }
  | {
      readonly role: "tool";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly content: string;
    };

/** A tool as the model sees it: name, description, JSON Schema of its arguments. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly parameters: Record<string, unknown>;
}

export interface ModelRequest {
  readonly messages: readonly ModelMessage[];
  readonly tools: readonly ToolSpec[];
  readonly temperature?: number;
  readonly maxOutputTokens?: number;
}

export interface ModelUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

export interface ModelResponse {
  readonly text: string;
  /**
   * The calls the model made. A call whose provider gave no id has an empty `id`: the kernel gives it one
   * unique in its conversation when it commits the response.
   */
  readonly toolCalls: readonly ToolCall[];
  readonly usage?: ModelUsage;
  readonly finishReason?: string;
}

export interface GenerateOptions {
  readonly signal: AbortSignal;
  /** Streamed text as it arrives (the kernel keeps it as loss-tolerant progress). */
  readonly onText?: (delta: string) => void;
}

/** A model. `start`/`poll` are for providers with async response handles (background jobs). */
export interface Model {
  readonly id: string;
  generate(request: ModelRequest, options: GenerateOptions): Promise<ModelResponse>;
  /** Starts a background response; the returned handle is stored, and polled after a restart. */
  start?(request: ModelRequest, options: { signal: AbortSignal }): Promise<Json>;
  /** The response for a handle, or undefined while it is not ready. */
  poll?(handle: Json, options: { signal: AbortSignal }): Promise<ModelResponse | undefined>;
}

/** A model call failed. `retryable` failures are retried with backoff kept in task state. */
export class ModelError extends KernelError {
  override readonly name = "ModelError";
  override readonly retryable: boolean;
  constructor(
    message: string,
    options: {
      retryable: boolean;
      retryAfterMs?: number;
      status?: number;
      partialText?: string;
      cause?: unknown;
    },
  ) {
    super("internal", message, { cause: options.cause });
    this.retryable = options.retryable;
    this.retryAfterMs = options.retryAfterMs;
    this.status = options.status;
    this.partialText = options.partialText;
  }
  readonly retryAfterMs: number | undefined;
  readonly status: number | undefined;
  /** Text streamed before the failure, if any. */
  readonly partialText: string | undefined;
}

/**
 * A model's response as a record can hold it: a lone surrogate (half of an emoji, from a model that
 * produced broken text) in its text or a call's name, id or raw arguments becomes U+FFFD, as a UTF-8
 * decoder reads it, rather than failing the turn whose commit the store would refuse.
 */
export function storableResponse(response: ModelResponse): ModelResponse {
  const calls = response.toolCalls;
  const fine = (c: ToolCall) => isWellFormedText(c.id + c.name + c.args);
  if (isWellFormedText(response.text) && calls.every(fine)) return response;
  return {
    ...response,
    text: wellFormedText(response.text),
    toolCalls: calls.map((c) =>
      fine(c)
        ? c
        : { ...c, id: wellFormedText(c.id), name: wellFormedText(c.name), args: wellFormedText(c.args) },
    ),
  };
}
