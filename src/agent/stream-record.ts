/**
 * The model's streamed text while a round runs. Every piece goes at once to the session's live subscribers
 * as a preview (`subscribe(…, { onPreview })`); durably, a progress record per round and attempt
 * (`stream:<generation task id>`) takes the text in checkpoints — the first piece at once, then at most
 * one append per `checkpointMs` (default 1 s) — and is deleted by the commit that holds the answer. A crash
 * keeps what was checkpointed as an interrupted record. Checkpoints instead of a write per flush: a
 * 2,000-character answer streamed over a second costs two small writes, not twenty.
 */
import type { PhaseContext } from "../tasks/define-task.ts";

export const STREAM_DOCUMENT = "model-stream";

export const streamDocumentId = (taskId: string) => `stream:${taskId}`;

/** How often streamed text is checkpointed durably unless the agent says otherwise. */
export const DEFAULT_STREAM_CHECKPOINT_MS = 1_000;

// biome-ignore lint/suspicious/noExplicitAny: the generation task's context, whatever its phase data
type StreamingContext = PhaseContext<{ conversationId: string }, any>;

/**
 * The model's streamed text: each delta previewed at once, and checkpointed as loss-tolerant progress,
 * appended as chunks (a checkpoint stores only the text that is new since the last one).
 */
export function streamer(
  ctx: StreamingContext,
  round: number,
  checkpointMs = DEFAULT_STREAM_CHECKPOINT_MS,
): (delta: string) => void {
  const id = streamDocumentId(ctx.task.id);
  const attempt = ctx.attempt;
  const { conversationId } = ctx.input;
  let pending = "";
  let queued = false;
  let offset = 0;
  let checkpointed = Number.NEGATIVE_INFINITY;
  return (delta) => {
    if (delta === "") return;
    ctx.preview({ type: "text", taskId: ctx.task.id, conversationId, round, attempt, offset, text: delta });
    offset += delta.length;
    pending += delta;
    if (queued) return;
    const now = ctx.clock.now();
    if (now - checkpointed < checkpointMs) return;
    checkpointed = now;
    queued = true;
    // The build runs when the deferred commit is made: it takes whatever text arrived by then.
    ctx.progress((draft) => {
      queued = false;
      const chunk = pending;
      pending = "";
      const current = draft.document(id)?.value as StreamDocument | undefined;
      // A retried attempt never appends to the record of the one a crash cut off (that one is still there
      // until this attempt's transition turns it into an interrupted record): it starts its own.
      if (current?.round === round && current.attempt === attempt)
        draft.patchDocument(id, [{ op: "add", path: "/chunks/-", value: chunk }]);
      else
        draft.setDocument(id, STREAM_DOCUMENT, { round, attempt, chunks: [chunk] } satisfies StreamDocument);
    });
  };
}

/** A round's streamed text so far: its chunks, in order. */
export interface StreamDocument {
  round: number;
  /** The phase entry that streamed it (`ctx.attempt`): each retried attempt has a record of its own. */
  attempt?: number;
  chunks: string[];
}

/**
 * A request re-entered after a crash may have streamed part of an answer before: keep that partial text
 * as an interrupted record (it never drives tool calls), committed with this attempt's transition.
 */
export function noteInterruptedStream(ctx: StreamingContext, round: { readonly round: number }): void {
  if (ctx.restarts === 0) return;
  const stream = ctx.document(streamDocumentId(ctx.task.id))?.value as StreamDocument | undefined;
  const text = stream?.chunks.join("") ?? "";
  ctx.deleteDocument(streamDocumentId(ctx.task.id)); // this attempt streams afresh
  if (!stream || stream.round !== round.round || text === "") return;
  ctx.appendEntry(ctx.input.conversationId, {
    kind: "interrupted",
    of: "model",
    partialText: text,
    reason: "the process stopped while the model was streaming",
  });
}
