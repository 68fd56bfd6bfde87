/**
 * The chat transport's backend over the edge HTTP API (a session in a Durable Object): submits with
 * `POST …/submissions`, finds a Submission by requestId, reads the view, and follows committed changes as
 * Server-Sent Events (`GET …/events`, `Last-Event-ID`), reconnecting from the last change seen when the
 * server ends a stream or the connection drops. `chatTransport(edgeChatBackend({ … }))` gives `useChat`
 * a session at the edge.
 */

import type { ExecutorTarget } from "../agent/executor.ts";
import { systemTimers, type Timers } from "../clock.ts";
import type { CommitRecord, Json, Submission } from "../records/schemas.ts";
import { serverEvents } from "../server-events.ts";
import type { PendingWait } from "../session/pending.ts";
import type { SubmitInput } from "../session/submit.ts";
import type { SessionView } from "../session/view.ts";
import type { Preview } from "../tasks/preview.ts";
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

/** An HTTP error of the edge API, with its status, the problem's detail and its `code` (when it has one). */
export class EdgeRequestError extends Error {
  constructor(
    readonly status: number,
    detail: string,
    /** The problem's stable code (`signal-conflict`, `owned-elsewhere`, …), if the answer named one. */
    readonly code?: string,
  ) {
    super(`edge API: ${status} ${detail}`);
    this.name = "EdgeRequestError";
  }
}

/** Calls of the edge API with the session's root and the caller's token; JSON answers or typed errors. */
function edgeCalls(options: EdgeChatOptions) {
  const root = `${options.baseUrl.replace(/\/+$/, "")}/sessions/${encodeURIComponent(options.sessionId)}`;
  const send = options.fetch ?? ((input, init) => fetch(input, init));
  const headers = { authorization: `Bearer ${options.token}` };
  const call = (path: string, init: { method?: string; body?: unknown } = {}) =>
    send(`${root}${path}`, {
      method: init.method ?? "GET",
      headers: init.body === undefined ? headers : { ...headers, "content-type": "application/json" },
      ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
    });
  const json = async <T>(response: Response): Promise<T> => {
    if (!response.ok) throw await requestError(response);
    return (await response.json()) as T;
  };
  const signal = async (key: string, payload: Json, { requestId }: { requestId: string }) =>
    json(await call(`/signals/${encodeURIComponent(key)}`, { method: "POST", body: { requestId, payload } }));
  return { root, send, headers, call, json, signal };
}

/**
 * An executor's view of a session at the edge (`executePlacedCalls`): its pending waits over
 * `GET …/pending?prefix=` (placed calls' waits are never parked: one page holds them, however many other
 * waits the session has), and its acceptances and reports over `POST …/signals/:key` (a 409 means another
 * took the call first, or its lease ended).
 */
export function edgeExecutorTarget(options: EdgeChatOptions): ExecutorTarget {
  const { call, json, signal } = edgeCalls(options);
  return {
    pending: async (prefix) => {
      const filter = prefix === undefined ? "" : `&prefix=${encodeURIComponent(prefix)}`;
      return (await json<{ pending: PendingWait[] }>(await call(`/pending?limit=500${filter}`))).pending;
    },
    signal,
  };
}

export function edgeChatBackend(options: EdgeChatOptions): ChatBackend {
  const { root, send, headers, call, json, signal } = edgeCalls(options);
  const timers = options.timers ?? systemTimers;
  return {
    submit: async (input: SubmitInput) =>
      json<Submission>(await call("/submissions", { method: "POST", body: input })),
    async submissionForRequest(requestId) {
      const response = await call(`/requests/${encodeURIComponent(requestId)}`);
      if (response.status === 404) return undefined;
      return json<Submission>(response);
    },
    view: async () => json<SessionView>(await call("/view")),
    signal,
    cancelSubmission: async (submissionId, reason) =>
      json(
        await call(`/submissions/${encodeURIComponent(submissionId)}/cancel`, {
          method: "POST",
          body: { reason },
        }),
      ),
    subscribe: (fromVersion, listener, onError, onPreview) =>
      followEdgeChanges({
        url: `${root}/events`,
        headers,
        after: fromVersion,
        fetch: send,
        timers,
        onChange: listener,
        ...(onError && { onError }),
        ...(onPreview && { onPreview }),
      }),
  };
}

/** How `followEdgeChanges` follows a session's committed changes over `GET …/events`. */
export interface EdgeFollowOptions {
  /** The events URL (`…/sessions/:id/events`). */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Deliver changes after this version. */
  readonly after: number;
  readonly fetch?: typeof fetch;
  readonly timers?: Timers;
  onChange(change: CommitRecord): void;
  /** Previews (the model's text as it streams, uncommitted), in order with the changes: asks for them. */
  onPreview?(preview: Preview): void;
  /** Following ended for good: the server refused the stream (401, 403, 404, 410) or reported an error. */
  onError?(error: Error): void;
  /** `live` once a stream is open; `reconnecting` after it dropped, while backing off. */
  onStatus?(status: "live" | "reconnecting"): void;
}

/**
 * Follows a session's committed changes as Server-Sent Events, in order, from `after`. The server ends each
 * stream after a while: it reconnects with `Last-Event-ID` from the last change seen; a dropped connection
 * or a busy answer (429, 5xx) is retried with backoff. Returns the stop function.
 */
export function followEdgeChanges(options: EdgeFollowOptions): () => void {
  const send = options.fetch ?? ((input, init) => fetch(input, init));
  const timers = options.timers ?? systemTimers;
  const controller = new AbortController();
  let last = options.after;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const handle = timers.setTimeout(() => resolve(), ms);
      controller.signal.addEventListener("abort", () => {
        timers.clearTimeout(handle);
        resolve();
      });
    });
  const follow = async (): Promise<void> => {
    let failures = 0;
    while (!controller.signal.aborted) {
      try {
        const url = options.onPreview
          ? `${options.url}${options.url.includes("?") ? "&" : "?"}previews=1`
          : options.url;
        const response = await send(url, {
          headers: { ...options.headers, "last-event-id": String(last) },
          signal: controller.signal,
        });
        if (!response.ok || !response.body) {
          const error = await requestError(response);
          if (response.status < 500 && response.status !== 429) return options.onError?.(error);
          throw error;
        }
        options.onStatus?.("live");
        failures = 0;
        for await (const event of serverEvents(response.body)) {
          if (event.event === "error")
            return options.onError?.(
              new Error((JSON.parse(event.data) as { message?: string }).message ?? event.data),
            );
          if (event.event === "preview") {
            options.onPreview?.(JSON.parse(event.data) as Preview);
            continue;
          }
          if (event.event !== "commit") continue;
          const change = JSON.parse(event.data) as CommitRecord;
          if (change.version <= last) continue;
          last = change.version;
          options.onChange(change);
        }
      } catch {
        if (controller.signal.aborted) return;
        options.onStatus?.("reconnecting");
        failures += 1;
        await pause(Math.min(10_000, 250 * 2 ** failures));
      }
    }
  };
  void follow();
  return () => controller.abort();
}

/** The error a failed answer stands for: its status, and its problem's detail and code. */
async function requestError(response: Response): Promise<EdgeRequestError> {
  const text = await response.text().catch(() => "");
  let problem: { detail?: unknown; code?: unknown } = {};
  try {
    problem = (JSON.parse(text) as typeof problem | null) ?? {};
  } catch {
    // Not problem+json (a proxy's page, say): its text is the detail.
  }
  const detail = typeof problem.detail === "string" ? problem.detail : text;
  const code = typeof problem.code === "string" ? problem.code : undefined;
  return new EdgeRequestError(response.status, detail, code);
}
