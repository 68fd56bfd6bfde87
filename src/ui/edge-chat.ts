/**
 * The chat transport's backend over the edge HTTP API (a session in a Durable Object): submits with
 * `POST …/submissions`, finds a Submission by requestId, reads the view, and follows committed changes as
 * Server-Sent Events (`GET …/events`, `Last-Event-ID`), reconnecting from the last change seen when the
 * server ends a stream or the connection drops. `chatTransport(edgeChatBackend({ … }))` gives `useChat`
 * a session at the edge.
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import { systemTimers, type Timers } from "../clock.ts";
import type { CommitRecord, Submission } from "../records/schemas.ts";
import type { SubmitInput } from "../session/submit.ts";
import type { SessionView } from "../session/view.ts";
import type { ChatBackend } from "./chat-transport.ts";

export interface EdgeChatOptions {
  /** The API's base URL (the Worker's origin, or where it is mounted). */
  readonly baseUrl: string;
  /** A bearer token allowed to read, submit and cancel in this session. */
  readonly token: string;
  readonly sessionId: string;
  /** Default `globalThis.fetch`. */
  readonly fetch?: typeof fetch;
  /** For the pause before reconnecting (default the system's). */
  readonly timers?: Timers;
}

/** An HTTP error of the edge API, with its status and the problem's detail. */
export class EdgeRequestError extends Error {
  constructor(
    readonly status: number,
    detail: string,
  ) {
    super(`edge API: ${status} ${detail}`);
    this.name = "EdgeRequestError";
  }
}

export function edgeChatBackend(options: EdgeChatOptions): ChatBackend {
  const root = `${options.baseUrl.replace(/\/+$/, "")}/sessions/${encodeURIComponent(options.sessionId)}`;
  const send = options.fetch ?? ((input, init) => fetch(input, init));
  const timers = options.timers ?? systemTimers;
  const headers = { authorization: `Bearer ${options.token}` };
  const call = async (path: string, init: { method?: string; body?: unknown } = {}) => {
    const response = await send(`${root}${path}`, {
      method: init.method ?? "GET",
      headers: init.body === undefined ? headers : { ...headers, "content-type": "application/json" },
      ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
    });
    return response;
  };
  const json = async <T>(response: Response): Promise<T> => {
    if (!response.ok) throw new EdgeRequestError(response.status, await detailOf(response));
    return (await response.json()) as T;
  };
  return {
    submit: async (input: SubmitInput) =>
      json<Submission>(await call("/submissions", { method: "POST", body: input })),
    async submissionForRequest(requestId) {
      const response = await call(`/requests/${encodeURIComponent(requestId)}`);
      if (response.status === 404) return undefined;
      return json<Submission>(response);
    },
    view: async () => json<SessionView>(await call("/view")),
    cancelSubmission: async (submissionId, reason) =>
      json(
        await call(`/submissions/${encodeURIComponent(submissionId)}/cancel`, {
          method: "POST",
          body: { reason },
        }),
      ),
    subscribe(
      fromVersion: number,
      listener: (change: CommitRecord) => void,
      onError?: (error: Error) => void,
    ) {
      const controller = new AbortController();
      let last = fromVersion;
      const follow = async () => {
        let failures = 0;
        while (!controller.signal.aborted) {
          try {
            const response = await send(`${root}/events`, {
              headers: { ...headers, "last-event-id": String(last) },
              signal: controller.signal,
            });
            if (!response.ok || !response.body) {
              const error = new EdgeRequestError(response.status, await detailOf(response));
              // Refused (401, 403, 404, 410 history pruned): following ends, and says why.
              if (response.status < 500 && response.status !== 429) return onError?.(error);
              throw error;
            }
            failures = 0;
            const reader = response.body
              .pipeThrough(new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>)
              .pipeThrough(new EventSourceParserStream())
              .getReader();
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              if (value.event !== "commit") continue;
              const change = JSON.parse(value.data) as CommitRecord;
              if (change.version <= last) continue;
              last = change.version;
              listener(change);
            }
          } catch {
            if (controller.signal.aborted) return;
            failures += 1;
            // A dropped connection or a busy server: back off, then continue from the last change seen.
            await new Promise<void>((resolve) =>
              timers.setTimeout(() => resolve(), Math.min(10_000, 250 * 2 ** failures)),
            );
          }
        }
      };
      void follow();
      return () => controller.abort();
    },
  };
}

async function detailOf(response: Response): Promise<string> {
  const text = await response.text().catch(() => "");
  try {
    return (JSON.parse(text) as { detail?: string }).detail ?? text;
  } catch {
    return text;
  }
}
