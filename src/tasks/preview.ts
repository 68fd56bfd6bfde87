/**
 * Previews: what a phase produces before it is committed — the model's text as it streams — sent at once
 * to the session's live subscribers (`subscribe(…, { onPreview })`), never stored, never part of a view.
 * Durable progress follows at a coarser pace (stream checkpoints) and the committed answer at the end; a
 * preview may therefore be lost in a crash, and a UI shows it as text still streaming.
 */

/** A piece of a model round's streamed text: `text` starts at `offset` of that round and attempt's text. */
export interface TextPreview {
  readonly type: "text";
  /** The generation task streaming it (the run's root task). */
  readonly taskId: string;
  readonly conversationId: string;
  readonly round: number;
  /** The phase entry that streams it (each retried attempt streams afresh, from offset 0). */
  readonly attempt: number;
  readonly offset: number;
  readonly text: string;
}

export type Preview = TextPreview;
