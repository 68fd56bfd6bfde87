/**
 * Compaction (DESIGN §9): a conversation's model context stays bounded however long it lives. When a turn
 * starts and its context is past a token budget, the generation task runs its `compact` phase: it asks
 * the summarizer (the turn's own model by default) to summarize the oldest part, then commits a `summary`
 * entry covering it and moves the conversation's context start past it — one commit. The covered entries
 * stay stored. A crash re-enters the phase from its start; a summarizer that fails leaves the context as
 * it was (the turn goes on, with a note).
 */
import type { Entry } from "../records/schemas.ts";
import { buildMessages, type ContextPolicy, pairResults } from "./context.ts";
import type { Model, ModelMessage, ModelUsage } from "./model.ts";

export interface CompactionOptions {
  /** Compact once the context is estimated past this many tokens. */
  readonly budgetTokens: number;
  /** How much of the latest context to keep verbatim after compacting (default half the budget). */
  readonly keepTokens?: number;
  /** Token estimate of a context (default: its JSON length / 4). */
  readonly estimate?: (messages: readonly ModelMessage[]) => number;
  /** Writes the summary (default: asks the turn's model). */
  readonly summarize?: (
    messages: readonly ModelMessage[],
    options: { signal: AbortSignal },
  ) => Promise<string>;
}

/** The default estimate: about four characters a token. */
export function estimateTokens(messages: readonly ModelMessage[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}

const SUMMARY_PROMPT =
  "Summarize the conversation above for your own later use: the user's goals, decisions made, facts learned, " +
  "actions taken with their outcomes (note any that are uncertain), and what is still open. Be concise and exact.";

/**
 * A summary as written: by the app's summarizer, or by the turn's own model — a model call of the turn,
 * billed like any other, so its usage counts in the turn's totals.
 */
interface WrittenSummary {
  readonly text: string;
  readonly byModel: boolean;
  readonly usage?: ModelUsage;
}

/** The summarizer: the app's, or the turn's own model asked for a summary (no tools). */
export function summarizerOf(
  compaction: CompactionOptions,
  model: Model,
): (messages: readonly ModelMessage[], signal: AbortSignal) => Promise<WrittenSummary> {
  const summarize = compaction.summarize;
  if (summarize)
    return async (messages, signal) => ({ text: await summarize(messages, { signal }), byModel: false });
  return async (messages, signal) => {
    const response = await model.generate(
      { messages: [...messages, { role: "user", content: SUMMARY_PROMPT }], tools: [] },
      { signal },
    );
    const { text, usage } = response;
    return usage ? { text, byModel: true, usage: { ...usage } } : { text, byModel: true };
  };
}

/** Whether a context is past the budget. */
export function needsCompaction(compaction: CompactionOptions, messages: readonly ModelMessage[]): boolean {
  return (compaction.estimate ?? estimateTokens)(messages) > compaction.budgetTokens;
}

/**
 * Where to cut a context so that what follows is at most `keepTokens`: the seq of a user entry after the
 * context start and no later than the turn's own input. A cut never separates a tool call from its result,
 * even when a message sent while the call ran was stored between them: the summary would say the call was
 * never answered, and its real result would be lost to the context. Undefined when nothing can be cut.
 */
export function cutPoint(
  compaction: CompactionOptions,
  entries: readonly Entry[],
  throughSeq: number,
  policy: ContextPolicy,
): number | undefined {
  const keep = compaction.keepTokens ?? Math.floor(compaction.budgetTokens / 2);
  const estimate = compaction.estimate ?? estimateTokens;
  const users = entries.filter((e) => e.content.kind === "user" && e.seq < throughSeq).map((e) => e.seq);
  const first = entries.find((e) => e.content.kind !== "summary")?.seq ?? 0;
  const spans = callSpans(entries);
  let cut: number | undefined;
  for (const seq of users.sort((a, b) => b - a)) {
    if (seq <= first) break;
    if (spans.some(([call, result]) => call < seq && seq <= result)) continue;
    const kept = entries.filter((e) => e.seq >= seq && e.content.kind !== "summary");
    if (cut !== undefined && estimate(buildMessages(kept, undefined, policy)) > keep) break;
    cut = seq;
  }
  return cut;
}

/**
 * The seqs of each tool call (its model entry) and its result, where other entries lie between them: paired
 * as the model's context pairs them (`pairResults`), so a cut never falls inside a pair the context shows.
 */
function callSpans(entries: readonly Entry[]): [call: number, result: number][] {
  const spans: [number, number][] = [];
  for (const [call, results] of pairResults(
    [...entries].sort((a, b) => a.seq - b.seq),
    [],
  ))
    for (const result of results)
      if (result !== undefined && "content" in result && result.seq - call.seq > 1)
        spans.push([call.seq, result.seq]);
  return spans;
}
