/**
 * Token usage of a turn. Usage per model call lives on the entry it wrote (a model response, or a summary
 * the turn's model wrote), which is append-only; the turn's running totals travel in its checkpoint and
 * end in its result, so no per-turn record outlives the turn.
 */
import type { ModelUsage } from "./model.ts";

/** Token usage of a turn: how many model calls and rounds, and the totals. Part of the turn's result. */
export interface TurnUsage {
  calls: number;
  rounds: number;
  total: { inputTokens: number; outputTokens: number };
}

/** A turn that has made no model call yet. */
export function emptyUsage(): TurnUsage {
  return { calls: 0, rounds: 0, total: { inputTokens: 0, outputTokens: 0 } };
}

/** `before` plus one more model call that used `call` (none reported: counted, with no tokens). */
export function addCall(
  before: TurnUsage | undefined,
  call: ModelUsage | undefined,
  rounds: number,
): TurnUsage {
  const used = call ?? { inputTokens: 0, outputTokens: 0 };
  const { calls, total } = before ?? emptyUsage();
  return {
    calls: calls + 1,
    rounds,
    total: {
      inputTokens: total.inputTokens + used.inputTokens,
      outputTokens: total.outputTokens + used.outputTokens,
    },
  };
}
