/**
 * Committed changes as Server-Sent Events. Each commit is one `commit` event whose `id` is its version, so
 * a client that reconnects with `Last-Event-ID` (EventSource does it by itself) continues after the last
 * change it saw: the session's subscription replays the missing ones from the change log, then live ones,
 * with no gap and no duplicate. A stream lasts at most `maxStreamMs`; a client that falls too far behind is
 * cut off rather than buffered without bound. Either way it reconnects and resumes from its last id.
 */
import { type CommitRecord, type Session, serializeError } from "../src/index.ts";

const HEARTBEAT_MS = 15_000;
/** Events queued for one slow client before its stream is closed. */
const MAX_QUEUED_EVENTS = 2_000;

export function commitEventStream(session: Session, since: number, maxStreamMs: number): Response {
  const encoder = new TextEncoder();
  let finish: () => void = () => undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        let open = true;
        const send = (text: string) => {
          if (!open) return;
          if ((controller.desiredSize ?? 0) < -MAX_QUEUED_EVENTS) return finish();
          controller.enqueue(encoder.encode(text));
        };
        const stop = session.subscribe(since, (change: CommitRecord) => send(commitEvent(change)), {
          onError: (error) => {
            send(`event: error\ndata: ${JSON.stringify(serializeError(error))}\n\n`);
            finish();
          },
        });
        const heartbeat = setInterval(() => send(": keep-alive\n\n"), HEARTBEAT_MS);
        const deadline = setTimeout(() => finish(), maxStreamMs);
        finish = () => {
          if (!open) return;
          open = false;
          stop();
          clearInterval(heartbeat);
          clearTimeout(deadline);
          try {
            controller.close();
          } catch {
            // already cancelled by the client: nothing left to close
          }
        };
        // Reconnect promptly after the server ends a stream.
        send("retry: 1000\n\n");
      },
      cancel() {
        finish();
      },
    },
    new CountQueuingStrategy({ highWaterMark: 64 }),
  );
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
    },
  });
}

function commitEvent(change: CommitRecord): string {
  return `id: ${change.version}\nevent: commit\ndata: ${JSON.stringify(change)}\n\n`;
}
