/**
 * Reading Server-Sent Events, the one way the kernel does it (the OpenAI-compatible adapter, the edge
 * follower, the devtools): `eventsource-parser` handles the spec's line endings, multi-line data and comments.
 */
import { EventSourceParserStream } from "eventsource-parser/stream";

/** One event: its type (default `message`), id when the server sent one, and data. */
export interface ServerEvent {
  readonly event: string;
  readonly id?: string;
  readonly data: string;
}

/** The events of a `text/event-stream` body, in order; events without data are skipped. */
export async function* serverEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerEvent> {
  const reader = body
    .pipeThrough(new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>)
    .pipeThrough(new EventSourceParserStream())
    .getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      if (value.data === "") continue;
      yield {
        event: value.event ?? "message",
        ...(value.id !== undefined && { id: value.id }),
        data: value.data,
      };
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
