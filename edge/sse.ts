/**
 * Committed changes as Server-Sent Events. Each commit is one `commit` event whose `id` is its version, so
 * a client that reconnects with `Last-Event-ID` (EventSource does it by itself) continues after the last
 * change it saw: the session's subscription replays the missing ones from the change log, then live ones,
 * with no gap and no duplicate. A stream lasts at most `maxStreamMs`; a client that falls more than
 * {@link MAX_QUEUED_BYTES} behind is cut off rather than buffered without bound. Either way it reconnects and
 * resumes from its last id.
 */
import { type CommitRecord, type Session, serializeError } from "../src/index.ts";

/** A comment line this often keeps proxies from closing an idle stream, and finds clients that left. */
const HEARTBEAT_MS = 5_000;
/** Bytes queued for one slow client before its stream is closed (the bound counts bytes, not events). */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

/** The stream of `session`'s commits after `since`; `onClose` runs once when it ends, however it ends. */
export function commitEventStream(
  session: Session,
  since: number,
  maxStreamMs: number,
  onClose: () => void = () => undefined,
  previews = false,
): Response {
  const encoder = new TextEncoder();
  let finish: () => void = () => undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        let open = true;
        const send = (text: string) => {
          if (!open) return;
          const bytes = encoder.encode(text);
          if ((controller.desiredSize ?? 0) - bytes.byteLength < -MAX_QUEUED_BYTES) return finish();
          controller.enqueue(bytes);
        };
        const stop = session.subscribe(since, (change: CommitRecord) => send(commitEvent(change)), {
          onError: (error) => {
            send(`event: error\ndata: ${JSON.stringify(serializeError(error))}\n\n`);
            finish();
          },
          // The object closed this session (it reopens one from storage): end here so the client reconnects.
          onEnd: () => finish(),
          // Asked for (`?previews=1`): the model's text as it streams, as `preview` events without an id (a
          // reconnect resumes from commits; previews it missed are covered by the committed text).
          ...(previews && {
            onPreview: (preview) => send(`event: preview\ndata: ${JSON.stringify(preview)}\n\n`),
          }),
        });
        const heartbeat = setInterval(() => send(": keep-alive\n\n"), HEARTBEAT_MS);
        const deadline = setTimeout(() => finish(), maxStreamMs);
        finish = () => {
          if (!open) return;
          open = false;
          onClose();
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
    new ByteLengthQueuingStrategy({ highWaterMark: 64 * 1024 }),
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
