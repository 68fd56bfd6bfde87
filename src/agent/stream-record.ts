/**
 * The model's streamed text while a round runs. Every piece goes at once to the session's live subscribers
 * as a preview (`subscribe(…, { onPreview })`); durably, a progress record per round and attempt
 * (`stream:<generation task id>`) takes the text in checkpoints — the first piece at once, then at most
 * one append per `checkpointMs` (default 1 s), text held back in a window stored when the window ends even
 * if the model streams nothing more meanwhile — and is deleted by the commit that holds the answer. A crash
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

/** The model's streamed text as it arrives (`onText`); `stop()` once the model call has returned. */
export interface Streamer {
  readonly onText: (delta: string) => void;
  /** No checkpoint after this: the phase's own commit holds the answer (or its failure) from here. */
  stop(): void;
}

/** The first half of a UTF-16 surrogate pair (an emoji is two code units). */
const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

/**
 * The model's streamed text: each delta previewed at once, and checkpointed as loss-tolerant progress,
 * appended as chunks (a checkpoint stores only the text that is new since the last one). Text that arrives
 * within a checkpoint's window is stored when the window ends (a timer on the session's timers), so a
 * model that pauses mid-answer does not keep it unstored until it goes on.
 */
export function streamer(
  ctx: StreamingContext,
  round: number,
  checkpointMs = DEFAULT_STREAM_CHECKPOINT_MS,
): Streamer {
  const id = streamDocumentId(ctx.task.id);
  const attempt = ctx.attempt;
  const { conversationId } = ctx.input;
  let pending = "";
  let queued = false;
  let offset = 0;
  let checkpointed = Number.NEGATIVE_INFINITY;
  let stopped = false;
  let windowEnd: ReturnType<typeof ctx.timers.setTimeout> | undefined;
  const checkpoint = () => {
    if (stopped || queued || pending === "" || ctx.signal.aborted) return;
    const now = ctx.clock.now();
    if (now - checkpointed < checkpointMs) {
      // Held back: stored when this window ends, whether or not more text comes.
      windowEnd ??= ctx.timers.setTimeout(
        () => {
          windowEnd = undefined;
          checkpoint();
        },
        checkpointed + checkpointMs - now,
      );
      return;
    }
    checkpointed = now;
    queued = true;
    // The build runs when the deferred commit is made: it takes whatever text arrived by then.
    ctx.progress((draft) => {
      queued = false;
      // A first half of a surrogate pair at the end waits for its second (a model may cut its text between
      // them): stored alone, it is not well-formed text, and the store refuses the whole checkpoint.
      const end = isHighSurrogate(pending.charCodeAt(pending.length - 1))
        ? pending.length - 1
        : pending.length;
      const chunk = pending.slice(0, end);
      pending = pending.slice(end);
      if (chunk === "") return;
      const current = draft.document(id)?.value as StreamDocument | undefined;
      // A retried attempt never appends to the record of the one a crash cut off (that one is still there
      // until this attempt's transition turns it into an interrupted record): it starts its own.
      if (current?.round === round && current.attempt === attempt)
        draft.patchDocument(id, [{ op: "add", path: "/chunks/-", value: chunk }]);
      else
        draft.setDocument(id, STREAM_DOCUMENT, { round, attempt, chunks: [chunk] } satisfies StreamDocument);
    });
  };
  return {
    onText: (delta) => {
      if (delta === "" || stopped) return;
      ctx.preview({ type: "text", taskId: ctx.task.id, conversationId, round, attempt, offset, text: delta });
      offset += delta.length;
      pending += delta;
      checkpoint();
    },
    stop: () => {
      stopped = true;
      if (windowEnd !== undefined) ctx.timers.clearTimeout(windowEnd);
      windowEnd = undefined;
    },
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
