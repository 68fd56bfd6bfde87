/**
 * The model-generation task (DESIGN §5): `prepare` fixes the context position and model, `request` calls
 * the model (streamed text is deferred progress), `retry` backs off in task state, `poll` follows an async
 * response handle across restarts. The transition out of `request`/`poll` is the design's "tools" step:
 * the response entry, the tool tasks it asks for and the wait on them commit together. When the tools
 * end, the next round starts from `prepare` again.
 */
import { z } from "zod";
import type { Json, ToolCall } from "../records/schemas.ts";
import { defineTask, type PhaseContext, type TaskDefinition, type Transition } from "../tasks/define-task.ts";
import { buildMessages } from "./context.ts";
import type { ToolSpec } from "./model.ts";
import { type Model, ModelError, type ModelResponse } from "./model.ts";
import { TOOL_TASK } from "./tool-task.ts";

export const GENERATE_TASK = "agent.generate";
export const STREAM_DOCUMENT = "model-stream";
export const USAGE_DOCUMENT = "usage";

export const GenerateInputSchema = z.object({ conversationId: z.string() });
type GenerateInput = z.infer<typeof GenerateInputSchema>;

interface Round {
  round: number;
  /** Entries the request is built from: [0, throughSeq). Fixed in `prepare`, so a re-asked request is the same. */
  throughSeq: number;
  model: string;
  attempt: number;
  handle?: Json;
  retryAfterMs?: number;
  lastError?: string;
}

export interface GenerationOptions {
  readonly model: Model;
  readonly tools: readonly ToolSpec[];
  readonly system?: string;
  readonly maxRounds?: number;
  readonly maxAttempts?: number;
  readonly backoffMs?: number;
  readonly pollIntervalMs?: number;
}

export function generationTask(options: GenerationOptions): TaskDefinition<GenerateInput> {
  const maxRounds = options.maxRounds ?? 16;
  const maxAttempts = options.maxAttempts ?? 4;
  const backoffMs = options.backoffMs ?? 1_000;
  const pollIntervalMs = options.pollIntervalMs ?? 2_000;

  return defineTask<GenerateInput>({
    kind: GENERATE_TASK,
    version: 1,
    input: GenerateInputSchema,
    phases: {
      prepare: (ctx) => {
        const previous = ctx.data as unknown as Round | null;
        const round = previous ? previous.round + 1 : 1;
        if (round > maxRounds)
          return ctx.fail(`stopped after ${maxRounds} model rounds without a final answer`);
        const throughSeq = ctx.conversation(ctx.input.conversationId)?.entryCount ?? 0;
        const next: Round = { round, throughSeq, model: options.model.id, attempt: 1 };
        return ctx.next("request", next as unknown as Json);
      },
      request: async (ctx) => {
        const round = ctx.data as unknown as Round;
        noteInterruptedStream(ctx, round);
        const messages = buildMessages(
          (await ctx.conversationEntries(ctx.input.conversationId)).filter((e) => e.seq < round.throughSeq),
          options.system,
        );
        const request = { messages, tools: options.tools };
        try {
          if (options.model.start && options.model.poll) {
            const handle = await options.model.start(request, { signal: ctx.signal });
            return ctx.next("poll", { ...round, handle } as unknown as Json);
          }
          const streamId = streamDocumentId(ctx.task.id);
          let streamed = "";
          const response = await options.model.generate(request, {
            signal: ctx.signal,
            onText: (delta) => {
              streamed += delta;
              const text = streamed;
              ctx.progress((draft) =>
                draft.setDocument(streamId, STREAM_DOCUMENT, { round: round.round, text }),
              );
            },
          });
          return respond(ctx, round, response);
        } catch (error) {
          return failedAttempt(ctx, round, error);
        }
      },
      retry: (ctx) => {
        const round = ctx.data as unknown as Round;
        const delay = round.retryAfterMs ?? backoffMs * 2 ** (round.attempt - 2);
        return ctx.sleep(ctx.clock.now() + delay, "request", round as unknown as Json);
      },
      poll: async (ctx) => {
        const round = ctx.data as unknown as Round;
        try {
          const response = await options.model.poll?.(round.handle ?? null, { signal: ctx.signal });
          if (!response) return ctx.sleep(ctx.clock.now() + pollIntervalMs, "poll", round as unknown as Json);
          return respond(ctx, round, response);
        } catch (error) {
          return failedAttempt(ctx, round, error);
        }
      },
    },
  });

  function failedAttempt(ctx: PhaseContext<GenerateInput>, round: Round, error: unknown): Transition {
    const retryable = error instanceof ModelError ? error.retryable : !ctx.signal.aborted;
    if (error instanceof ModelError && error.partialText) {
      ctx.appendEntry(ctx.input.conversationId, {
        kind: "interrupted",
        of: "model",
        partialText: error.partialText,
        reason: error.message,
      });
    }
    if (!retryable || round.attempt >= maxAttempts) {
      return ctx.fail(error instanceof Error ? error : String(error));
    }
    // A fresh attempt: no stale handle, and a retry-after only if this failure gave one.
    const { handle: _handle, retryAfterMs: _retryAfter, ...rest } = round;
    const next: Round = {
      ...rest,
      attempt: round.attempt + 1,
      lastError: error instanceof Error ? error.message : String(error),
      ...(error instanceof ModelError &&
        error.retryAfterMs !== undefined && { retryAfterMs: error.retryAfterMs }),
    };
    return ctx.next("retry", next as unknown as Json);
  }

  /** The response, its tool tasks and the wait on them, in one commit; or the final answer. */
  function respond(ctx: PhaseContext<GenerateInput>, round: Round, response: ModelResponse): Transition {
    const conversationId = ctx.input.conversationId;
    ctx.appendEntry(conversationId, {
      kind: "model",
      text: response.text,
      toolCalls: [...response.toolCalls],
      model: round.model,
    });
    recordUsage(ctx, round, response);
    if (response.toolCalls.length === 0) {
      return ctx.complete({ text: response.text, round: round.round });
    }
    const ids = response.toolCalls.map((call: ToolCall) =>
      ctx.spawn(TOOL_TASK, { toolCallId: call.id, name: call.name, args: call.args, conversationId }),
    );
    // When every tool task has ended (their results are entries by then), the next round prepares.
    return ctx.wait(ids, { policy: "allSettled", next: "prepare" }, round as unknown as Json);
  }

  function recordUsage(ctx: PhaseContext<GenerateInput>, round: Round, response: ModelResponse): void {
    const usage = response.usage ?? { inputTokens: 0, outputTokens: 0 };
    const id = usageDocumentId(ctx.task.submissionId ?? ctx.task.id);
    const current = ctx.document(id)?.value as UsageDocument | undefined;
    const calls = [
      ...(current?.calls ?? []),
      { taskId: ctx.task.id, round: round.round, model: round.model, ...usage },
    ];
    ctx.setDocument(id, USAGE_DOCUMENT, {
      calls,
      total: {
        inputTokens: (current?.total.inputTokens ?? 0) + usage.inputTokens,
        outputTokens: (current?.total.outputTokens ?? 0) + usage.outputTokens,
      },
    } satisfies UsageDocument as unknown as Json);
  }
}

/** Token usage of a Submission: per call (one per round, i.e. per turn of the loop) and in total. */
export interface UsageDocument {
  calls: { taskId: string; round: number; model: string; inputTokens: number; outputTokens: number }[];
  total: { inputTokens: number; outputTokens: number };
}

export const usageDocumentId = (submissionOrTaskId: string) => `usage:${submissionOrTaskId}`;
export const streamDocumentId = (taskId: string) => `stream:${taskId}`;

/**
 * A request re-entered after a crash may have streamed part of an answer before: keep that partial text
 * as an interrupted record (it never drives tool calls), committed with this attempt's transition.
 */
function noteInterruptedStream(ctx: PhaseContext<GenerateInput>, round: Round): void {
  if (ctx.restarts === 0) return;
  const stream = ctx.document(streamDocumentId(ctx.task.id))?.value as
    | { round: number; text: string }
    | undefined;
  if (!stream || stream.round !== round.round || stream.text === "") return;
  ctx.appendEntry(ctx.input.conversationId, {
    kind: "interrupted",
    of: "model",
    partialText: stream.text,
    reason: "the process stopped while the model was streaming",
  });
  ctx.setDocument(streamDocumentId(ctx.task.id), STREAM_DOCUMENT, { round: round.round, text: "" });
}
