/**
 * Committed changes as Server-Sent Events, written with Hono's SSE helper (`hono/streaming`). Each commit is
 * one `commit` event whose `id` is its version, so a client that reconnects with `Last-Event-ID`
 * (EventSource does it by itself) continues after the last change it saw: the session's subscription
 * replays the missing ones from the change log, then live ones, with no gap and no duplicate. A stream
 * lasts at most `maxStreamMs`; a client that falls more than {@link MAX_QUEUED_BYTES} behind is cut off
 * rather than buffered without bound (Hono's writer queues every write it is given, so the bytes not yet
 * taken by the client are counted here). Either way it reconnects and resumes from its last id.
 */
import { Hono } from "hono";
import { type SSEMessage, type SSEStreamingApi, streamSSE } from "hono/streaming";
import type { CommitRecord, Session } from "../src/index.ts";
import { publicError } from "./problem.ts";

/** A comment line this often keeps proxies from closing an idle stream, and finds clients that left. */
const HEARTBEAT_MS = 5_000;
/** Bytes queued for one slow client before its stream is closed (the bound counts bytes, not events). */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

export interface CommitStreamOptions {
  /** The version after which the stream starts. */
  readonly since: number;
  /** How long the stream lasts before the server ends it (the client reconnects). */
  readonly maxStreamMs: number;
  /** Runs once when the stream ends, however it ends. */
  readonly onClose?: () => void;
  /** Also send the model's text as it streams, as `preview` events without an id. */
  readonly previews?: boolean;
}

/** The response streaming `session`'s commits for `request`. */
export function commitEventStream(
  request: Request,
  session: Session,
  options: CommitStreamOptions,
): Response | Promise<Response> {
  const app = new Hono();
  app.all("*", (c) => {
    const response = streamSSE(c, (stream) => followCommits(stream, session, options));
    response.headers.set("cache-control", "no-cache, no-transform");
    response.headers.set("x-accel-buffering", "no");
    return response;
  });
  return app.fetch(request);
}

const encoder = new TextEncoder();

/** Writes the commits to `stream` until it ends; resolves (so Hono closes it) once all was written. */
function followCommits(
  stream: SSEStreamingApi,
  session: Session,
  options: CommitStreamOptions,
): Promise<void> {
  return new Promise((resolve) => {
    let open = true;
    let queued = 0;
    // One write at a time, in order: each waits for the one before it to be taken by the stream.
    let tail = Promise.resolve();
    const write = (bytes: number, put: () => Promise<unknown>) => {
      if (!open) return;
      // Cut off once the backlog is past the bound, not for the message that would cross it: a commit
      // larger than the bound would be refused on every reconnect, and its client never get past it.
      if (queued > MAX_QUEUED_BYTES) return finish();
      queued += bytes;
      tail = tail.then(put).then(
        () => {
          queued -= bytes;
        },
        () => undefined,
      );
    };
    const send = (message: SSEMessage & { data: string }) =>
      write(encoder.encode(message.data).byteLength + 32, () => stream.writeSSE(message));
    // What a problem response would show of it: a storage failure's own text stays in the log.
    const sendError = (error: unknown) => {
      const { name, code, message } = publicError(error);
      send({ event: "error", data: JSON.stringify({ name, code, message }) });
    };
    const comment = (text: string) => write(text.length, () => stream.write(text));

    let stop: () => void = () => undefined;
    const follow = () =>
      session.subscribe(
        options.since,
        (change: CommitRecord) =>
          send({ id: String(change.version), event: "commit", data: JSON.stringify(change) }),
        {
          onError: (error) => {
            sendError(error);
            finish();
          },
          // The object closed this session (it reopens one from storage): end here so the client reconnects.
          onEnd: () => finish(),
          // Asked for (`?previews=1`): previews carry no id (a reconnect resumes from commits; previews it
          // missed are covered by the committed text).
          ...(options.previews === true && {
            onPreview: (preview) => send({ event: "preview", data: JSON.stringify(preview) }),
          }),
        },
      );
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    let deadline: ReturnType<typeof setTimeout> | undefined;
    function finish() {
      if (!open) return;
      open = false;
      options.onClose?.();
      stop();
      clearInterval(heartbeat);
      clearTimeout(deadline);
      // What was queued (an error event last) is written before Hono closes the stream.
      void tail.then(() => resolve());
    }
    // The client went away: stop following.
    stream.onAbort(() => finish());
    // Reconnect promptly after the server ends a stream.
    comment("retry: 1000\n\n");
    try {
      const unsubscribe = follow();
      stop = unsubscribe;
      // It ended while subscribing (an error delivered at once): nothing is left to follow.
      if (!open) return unsubscribe();
    } catch (error) {
      // A session that cannot be followed (closed meanwhile): say why, and free the stream's slot.
      sendError(error);
      finish();
      return;
    }
    heartbeat = setInterval(() => comment(": keep-alive\n\n"), HEARTBEAT_MS);
    deadline = setTimeout(() => finish(), options.maxStreamMs);
  });
}
