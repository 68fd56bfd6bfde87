/**
 * The model-generation task (DESIGN §5). A turn runs in rounds:
 * - the context position is fixed before the model is asked (`prepare`; for a Submission's root task it is
 *   fixed by the Submission's own commit, so no extra commit is paid);
 * - `request` asks the model; streamed text is deferred progress; `retry` backs off in task state
 *   (retry-after honoured); `poll` follows a stored async handle across restarts instead of re-asking;
 * - the response entry, the tool tasks it asks for (arguments already validated, intents and operation ids
 *   fixed) and the wait on them commit together — the design's "tools" step — and the next round starts
 *   when they have all ended.
 * The context of every round is rebuilt from committed entries: the conversation up to the turn's start,
 * plus everything this turn itself produced.
 */
import { z } from "zod";
import { compiled, type Entry, type Json } from "../records/schemas.ts";
import { defineTask, type PhaseContext, type TaskDefinition, type Transition } from "../tasks/define-task.ts";
import type { FollowUp } from "../tasks/task-events.ts";

export { followUpOf } from "./follow-ups.ts";
export { STREAM_DOCUMENT, type StreamDocument, streamDocumentId } from "./stream-record.ts";
export type { TurnUsage } from "./turn-usage.ts";

import { withCallIds } from "./call-ids.ts";
import { type CompactionOptions, cutPoint, needsCompaction, summarizerOf } from "./compaction.ts";
import { buildMessages, DEFAULT_MAX_TOOL_RESULT_CHARS } from "./context.ts";
import type { ToolDefinition } from "./define-tool.ts";
import { followUpOf, steeredAnswer, withdrawnOf } from "./follow-ups.ts";
import type { ToolSpec } from "./model.ts";
import { type Model, ModelError, type ModelResponse, storableResponse } from "./model.ts";
import { noteInterruptedStream, streamDocumentId, streamer } from "./stream-record.ts";
import { answerEndedCalls, answerUnstartedCalls, notStarted } from "./tool-answers.ts";
import { type QueuedCall, queueOf, spawnCalls, type ToolCallMode } from "./tool-queue.ts";
import { addCall, emptyUsage, type TurnUsage } from "./turn-usage.ts";

export const GENERATE_TASK = "agent.generate";

// Compiled here, at module level: createAgent may run inside a request, where workerd refuses code generation.
export const GenerateInputSchema = compiled(
  z.object({
    conversationId: z.string(),
    /** Entries with seq below this are the conversation before the turn; omitted: fixed by `prepare`. */
    throughSeq: z.number().int().nonnegative().optional(),
  }),
);
type GenerateInput = z.infer<typeof GenerateInputSchema>;

interface Round {
  round: number;
  /** The conversation before this turn: entries [0, throughSeq). */
  throughSeq: number;
  model: string;
  attempt: number;
  handle?: Json;
  retryAfterMs?: number;
  lastError?: string;
  /** Token usage of the turn's model calls so far (each call's own is on the entry it wrote). */
  usage?: TurnUsage;
  /** This turn already compacted its conversation (or tried to). */
  compacted?: boolean;
  /** The last entry the round's request read, and the steering messages among them (for a polled request). */
  readThroughSeq?: number;
  steered?: number[];
  /** Calls of the previous round's response still to start (exclusive ones wait their turn). */
  queue?: number[];
  /** The calls `queue` names: a turn cancelled before they start answers them (never run). */
  queuedCalls?: QueuedCall[];
}

/** What a generation task ends with (and its Submission's `result`). */
export interface TurnResult {
  text: string;
  round: number;
  usage: TurnUsage;
}

export interface GenerationOptions {
  readonly model: Model;
  readonly tools: ReadonlyMap<string, ToolDefinition<unknown>>;
  readonly toolSpecs: readonly ToolSpec[];
  readonly system?: string;
  readonly maxRounds?: number;
  /** `sequential`: a response's tool calls run one at a time, in order (default `parallel`; see `exclusive`). */
  readonly toolCalls?: ToolCallMode;
  readonly maxAttempts?: number;
  readonly backoffMs?: number;
  readonly pollIntervalMs?: number;
  /** Keep each conversation's model context bounded by summarizing its oldest part (see `compaction.ts`). */
  readonly compaction?: CompactionOptions;
  /** A tool result whose JSON is longer than this reaches the model cut (default 20,000 characters). */
  readonly maxToolResultChars?: number;
  /**
   * What a message sent while a turn runs in the same conversation does: `queue` (default: its turn runs
   * after, in order), `interrupt` (the running turn is cancelled, then it runs), `steer` (the running turn
   * reads it before its next model round; its own turn then finds it answered). Per conversation.
   */
  readonly followUp?: FollowUp | ((conversationId: string) => FollowUp);
  /**
   * How often streamed text is stored as progress (default 1,000 ms; the first piece at once). Subscribers
   * with `onPreview` get every piece as it streams; a crash loses the text since the last checkpoint (one
   * is taken with the next piece once this long has passed, so a model that pauses keeps its last text
   * unstored until it goes on or answers).
   */
  readonly streamCheckpointMs?: number;
}

/** The checkpoint data of each phase of a generation task. */
type RoundPhases = { prepare: null; request: Round | null; compact: Round; retry: Round; poll: Round };
type GenerateContext = PhaseContext<GenerateInput, RoundPhases>;

export function generationTask(options: GenerationOptions): TaskDefinition<GenerateInput, RoundPhases> {
  const maxRounds = options.maxRounds ?? 16;
  const mode = options.toolCalls ?? "parallel";
  const policy = { maxToolResultChars: options.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS };
  const maxAttempts = options.maxAttempts ?? 4;
  const backoffMs = options.backoffMs ?? 1_000;
  const pollIntervalMs = options.pollIntervalMs ?? 2_000;

  return defineTask<GenerateInput, RoundPhases>({
    kind: GENERATE_TASK,
    version: 1,
    input: GenerateInputSchema,
    start: "request",
    // Calls that never started when the turn ends cancelled or failed are answered by it: those still
    // queued, and those of a response the phase that returned after the cancel recorded.
    onCancelled: answerUnstartedCalls,
    onFailed: answerUnstartedCalls,
    phases: {
      prepare: (ctx) => {
        const throughSeq = ctx.conversation(ctx.input.conversationId)?.entryCount ?? 0;
        return ctx.next("request", firstRound(throughSeq));
      },
      request: async (ctx) => {
        let round = ctx.data;
        if (!round) {
          // A turn without a fixed position (spawned by an app, not by a Submission) fixes it first.
          if (ctx.input.throughSeq === undefined) return ctx.next("prepare");
          round = firstRound(ctx.input.throughSeq);
        }
        noteInterruptedStream(ctx, round);
        if (round.queue?.length) return startQueued(ctx, round);
        const steer = followUpOf(options, ctx.input.conversationId) === "steer";
        const entries = await turnEntries(ctx, round, steer);
        // A steering message the turn before read and answered: nothing is left to do.
        const answeredBy =
          steer && round.round === 1 ? steeredAnswer(entries, ctx.task.id, round.throughSeq - 1) : undefined;
        if (answeredBy)
          return ctx.complete({ text: answeredBy, round: 0, usage: emptyUsage() } as unknown as Json);
        // Calls of the last round that ended without a result are answered now (committed with this phase).
        const answered = answerEndedCalls(ctx, ctx.input.conversationId, round.round - 1, entries);
        const messages = buildMessages(entries, options.system, policy, answered);
        // A turn's first request compacts the conversation first if its context is past the budget.
        if (
          options.compaction &&
          round.round === 1 &&
          !round.compacted &&
          needsCompaction(options.compaction, messages)
        )
          return ctx.next("compact", round);
        const request = { messages, tools: options.toolSpecs };
        // What the request's context holds, up to which entry: a steering message it read is answered.
        const read = readOf(entries, round);
        let response: ModelResponse;
        try {
          if (options.model.start && options.model.poll) {
            const handle = await options.model.start(request, { signal: ctx.signal });
            return ctx.next("poll", { ...round, handle, ...read });
          }
          const stream = streamer(ctx, round.round, options.streamCheckpointMs);
          try {
            // A getter: the phase's AbortController is made only for a model that looks at its signal.
            response = await options.model.generate(request, {
              get signal() {
                return ctx.signal;
              },
              onText: stream.onText,
            });
          } finally {
            stream.stop();
          }
        } catch (error) {
          return failedAttempt(ctx, round, error);
        }
        // Only the model's own failures are retried: the model has answered, and is not asked (nor paid) again.
        return respond(ctx, { ...round, ...read }, response);
      },
      compact: async (ctx) => {
        let round: Round = { ...ctx.data, compacted: true };
        const compaction = options.compaction;
        if (!compaction) return ctx.next("request", round);
        const entries = await turnEntries(ctx, round);
        const cut = cutPoint(compaction, entries, round.throughSeq, policy);
        if (cut === undefined) return ctx.next("request", round);
        const covered = buildMessages(
          entries.filter((e) => e.seq < cut),
          undefined,
          policy,
        );
        try {
          const summary = await summarizerOf(compaction, options.model)(covered, ctx.signal);
          ctx.appendSummary(ctx.input.conversationId, summary.text, cut - 1, summary.usage);
          // Written by the turn's model: a model call of the turn, billed, so counted in its usage.
          if (summary.byModel)
            round = { ...round, usage: addCall(round.usage, summary.usage, round.usage?.rounds ?? 0) };
        } catch (error) {
          if (ctx.signal.aborted) throw error;
          // The context stays as it was; the turn goes on, and the failure is on record (not sent to the model).
          ctx.appendEntry(ctx.input.conversationId, {
            kind: "note",
            text: `compaction failed, the context was kept whole: ${error instanceof Error ? error.message : String(error)}`,
          });
        }
        return ctx.next("request", round);
      },
      retry: (ctx) => {
        const round = ctx.data;
        const delay = round.retryAfterMs ?? backoffMs * 2 ** (round.attempt - 2);
        return ctx.sleep(ctx.clock.now() + delay, "request", round);
      },
      poll: async (ctx) => {
        const round = ctx.data;
        let response: ModelResponse | undefined;
        try {
          response = await options.model.poll?.(round.handle ?? null, { signal: ctx.signal });
        } catch (error) {
          return failedAttempt(ctx, round, error);
        }
        if (!response) return ctx.sleep(ctx.clock.now() + pollIntervalMs, "poll", round);
        return respond(ctx, round, response);
      },
    },
  });

  /** The next calls of the previous response whose turn it is; the model is asked once all have run. */
  async function startQueued(ctx: GenerateContext, round: Round): Promise<Transition> {
    const asked = (await turnEntries(ctx, round)).findLast(
      (e) => e.taskId === ctx.task.id && e.content.kind === "model",
    );
    const calls = asked?.content.kind === "model" ? asked.content.toolCalls : [];
    const { queue = [], queuedCalls: _started, ...rest } = round;
    const { children, queued } = await spawnCalls(ctx, options.tools, mode, calls, round.round - 1, queue);
    const next: Round = { ...rest, ...queueOf(calls, queued) };
    if (children.length === 0) return ctx.next("request", next); // every one left was refused
    return ctx.wait(children, { policy: "allSettled", next: "request" }, next);
  }

  function firstRound(throughSeq: number): Round {
    return { round: 1, throughSeq, model: options.model.id, attempt: 1 };
  }

  function failedAttempt(ctx: GenerateContext, round: Round, error: unknown): Transition {
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
      // The run ends here: its stream record goes with it (what it streamed is the interrupted entry above).
      ctx.deleteDocument(streamDocumentId(ctx.task.id));
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
    return ctx.next("retry", next);
  }

  /**
   * The response, its tool calls (validated now, their intents fixed) and the wait on them, in one commit;
   * or the final answer. Calls the model got wrong become error results it will see next round.
   */
  async function respond(ctx: GenerateContext, round: Round, given: ModelResponse): Promise<Transition> {
    const conversationId = ctx.input.conversationId;
    const response = storableResponse(given);
    const toolCalls = withCallIds(response.toolCalls, ctx.task.id, round.round);
    ctx.appendEntry(conversationId, {
      kind: "model",
      text: response.text,
      toolCalls,
      model: round.model,
      ...(round.readThroughSeq !== undefined && { readThroughSeq: round.readThroughSeq }),
      ...(round.steered?.length && { steered: round.steered }),
      ...(response.usage && { usage: { ...response.usage } }),
    });
    const usage = addCall(round.usage, response.usage, round.round);
    // The streamed text is in the model entry now: the stream record of this round goes.
    ctx.deleteDocument(streamDocumentId(ctx.task.id));
    if (toolCalls.length === 0)
      return ctx.complete({
        text: response.text,
        round: round.round,
        usage,
      } satisfies TurnResult as unknown as Json);
    if (round.round >= maxRounds) {
      const why = `stopped after ${maxRounds} model rounds without a final answer`;
      // The response's calls never start: each is answered so, and the next turn's context says it.
      for (const call of toolCalls)
        ctx.appendEntry(conversationId, notStarted(call, `not run: the turn ${why}`));
      return ctx.fail(why);
    }
    const all = toolCalls.map((_, index) => index);
    const { children, queued } = await spawnCalls(ctx, options.tools, mode, toolCalls, round.round, all);
    const next: Round = {
      round: round.round + 1,
      throughSeq: round.throughSeq,
      model: options.model.id,
      attempt: 1,
      usage,
      ...queueOf(toolCalls, queued),
    };
    return ctx.wait(children, { policy: "allSettled", next: "request" }, next);
  }
}

/**
 * The turn's context: the conversation before it, plus every entry the turn produced — its own (model
 * responses, answers for calls that ended without one) and those of the tasks under it (tool results),
 * each entry naming the task that wrote it. A turn that was queued behind another also reads what that one
 * answered after its message arrived (placed before its message); later messages are read only when
 * steering, and are otherwise left to their own turns.
 */
async function turnEntries(ctx: GenerateContext, round: Round, steer = false): Promise<Entry[]> {
  const own = ctx.task.id;
  const conversation = ctx.conversation(ctx.input.conversationId);
  // Read from where the context starts: a compacted conversation's older entries are never read again.
  const entries = await ctx.conversationEntries(ctx.input.conversationId, conversation?.contextStart ?? 0);
  const withdrawn = withdrawnOf(conversation?.withdrawn, entries);
  const asked = round.throughSeq - 1; // the turn's own message (its Submission's entry)
  const before: Entry[] = [];
  const earlier: Entry[] = [];
  const mine: Entry[] = [];
  for (const e of entries) {
    if (withdrawn?.has(e.seq)) continue;
    if (e.seq < asked) before.push(e);
    else if (e.seq === asked || e.taskId === own || (e.taskId !== undefined && ctx.isBelow(e.taskId)))
      mine.push(e);
    // Steering: a message sent while this turn runs is read by its next round (its own turn waits).
    else if (e.content.kind === "user") {
      if (steer) mine.push(e);
    }
    // What the turn(s) it queued behind answered after its message arrived comes before that message.
    else earlier.push(e);
  }
  return earlier.length === 0 ? [...before, ...mine] : [...before, ...earlier, ...mine];
}

/**
 * What a request reads, up to which entry, and which steering messages (user entries after the turn's own
 * message): a steered message read is answered, and stays in later contexts even if it is withdrawn.
 */
function readOf(entries: readonly Entry[], round: Round): Pick<Round, "readThroughSeq" | "steered"> {
  const steered = entries
    .filter((e) => e.content.kind === "user" && e.seq >= round.throughSeq)
    .map((e) => e.seq);
  const readThroughSeq = entries.at(-1)?.seq ?? round.throughSeq - 1;
  return steered.length > 0 ? { readThroughSeq, steered } : { readThroughSeq };
}
