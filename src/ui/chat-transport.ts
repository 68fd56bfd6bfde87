/**
 * AI SDK UI on a durable session: a `ChatTransport` for `useChat` (`ai` / `@ai-sdk/react`). A message is a
 * Submission (its UI message id is the requestId: sending it again after a reload returns the same run);
 * what the UI streams is read from committed changes — the model's streamed chunks, its answer, each tool
 * call and its result — plus, while a round streams, its text previews (a backend that offers them): text
 * parts still streaming, which the committed answer then completes. A reloaded page that calls
 * `resumeStream()` replays the run from its Submission's first commit, exactly as storage holds it, then
 * follows it live: the AI SDK rebuilds a resumed message from its stream's start (`resumeStreamIsReplay`).
 * While a stream is open, a backend whose connection drops goes on from the last change it delivered. A tool call that asks for approval becomes an `approval-requested` part, and the stream
 * ends while the run waits for the decision; the page's answer (`addToolApprovalResponse` with
 * `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses`) is sent as the durable
 * approval signal, and the same assistant message goes on from there. Structurally typed (no import from
 * `ai`): `chatTransport(backend)` is assignable to `ChatTransport<UIMessage>`.
 */
import { isSettledElsewhere } from "../errors.ts";
import type { Json } from "../records/json.ts";
import type { CommitRecord, Submission } from "../records/schemas.ts";
import { isSubmissionFinished } from "../records/schemas.ts";
import type { SubmitInput } from "../session/submit.ts";
import type { SessionView, ViewOptions } from "../session/view.ts";
import { turnWaitedFor } from "../tasks/follow-up.ts";
import type { Preview } from "../tasks/preview.ts";
import { type ChatChunk, type FollowStart, RunFollower } from "./run-follower.ts";

export type { ChatChunk } from "./run-follower.ts";

/** What the transport needs of a session host: the worker client (`connectSessionWorker`) has it all. */
export interface ChatBackend {
  submit(input: SubmitInput): Promise<Submission>;
  submissionForRequest(requestId: string): Promise<Submission | undefined>;
  view(options?: ViewOptions): Promise<SessionView | undefined>;
  /**
   * Every committed change after `fromVersion`, in order; resolves to a stop function. `onPreview`, where
   * the backend has it, hears the model's text as it streams, in order with the changes.
   */
  subscribe(
    fromVersion: number,
    listener: (change: CommitRecord) => void,
    onError?: (error: Error) => void,
    onPreview?: (preview: Preview) => void,
  ): Promise<() => unknown> | (() => unknown);
  cancelSubmission?(submissionId: string, reason?: string): Promise<unknown>;
  /** Outside input for a key a task awaits: how a person's approval decision reaches the run. */
  signal?(key: string, payload: Json, options: { requestId: string }): Promise<unknown>;
}

/** A UI message as `useChat` holds it (structurally the AI SDK's `UIMessage`). */
export interface ChatMessage {
  readonly id: string;
  readonly role: "system" | "user" | "assistant";
  readonly parts: readonly unknown[];
}

export interface ChatTransportOptions {
  /** Ask the session to cancel the run when the UI stops it (`stop()`). Default true. */
  readonly cancelOnStop?: boolean;
}

/** The AI SDK transport over a durable session. */
export function chatTransport(backend: ChatBackend, options: ChatTransportOptions = {}) {
  const cancelOnStop = options.cancelOnStop ?? true;
  return {
    /**
     * Read by the AI SDK: a reconnected stream starts from the run's first commit, so the UI resets the
     * message at its first `start` and rebuilds it (after a reload, it starts from an empty one anyway).
     */
    resumeStreamIsReplay: true,
    async sendMessages(request: {
      trigger: "submit-message" | "regenerate-message";
      chatId: string;
      messageId: string | undefined;
      messages: readonly ChatMessage[];
      abortSignal: AbortSignal | undefined;
    }): Promise<ReadableStream<ChatChunk>> {
      const lastMessage = request.messages.at(-1);
      if (lastMessage?.role === "assistant" && decisionsIn(lastMessage).length > 0)
        return continueAfterDecisions(backend, lastMessage, request.abortSignal, cancelOnStop);
      const last = request.messages.findLast((m) => m.role === "user");
      if (!last) throw new Error("chatTransport: there is no user message to send");
      const requestId =
        request.trigger === "submit-message" ? last.id : `${last.id}:again:${crypto.randomUUID()}`;
      const submission = await backend.submit({
        requestId,
        conversationId: request.chatId,
        input: textOf(last),
      });
      const head = (await backend.view({ entries: 0, tasks: "active" }))?.version;
      const from = Math.max(0, (submission.acceptedVersion ?? 1) - 1);
      return runStream(backend, submission, request.abortSignal, cancelOnStop, from, {
        head: head ?? submission.acceptedVersion ?? 0,
      });
    },
    async reconnectToStream(request: {
      chatId: string;
      abortSignal?: AbortSignal;
    }): Promise<ReadableStream<ChatChunk> | null> {
      const view = await backend.view({ entries: 0, tasks: "active" });
      // The run going on: the newest one neither queued behind another nor being cancelled, else the newest
      // open one (an interrupting turn, queued until the one it cancels ends). Not simply the newest open
      // one: queued behind a run that waits for an approval, it would stream nothing, and the approval that
      // run waits for would not be shown.
      const open = view?.submissions
        .filter((s) => s.conversationId === request.chatId && !isSubmissionFinished(s))
        .sort((a, b) => (a.acceptedVersion ?? 0) - (b.acceptedVersion ?? 0));
      const roots = new Map(view?.tasks.map((t) => [t.id, t]));
      const going = (s: Submission) => {
        const root = s.taskId === undefined ? undefined : roots.get(s.taskId);
        return root !== undefined && root.cancelRequested === undefined && turnWaitedFor(root) === undefined;
      };
      const resumed = open?.findLast(going) ?? open?.at(-1);
      if (!view || !resumed) return null;
      const from = Math.max(0, (resumed.acceptedVersion ?? 1) - 1);
      return runStream(backend, resumed, request.abortSignal, cancelOnStop, from, { head: view.version });
    },
  };
}

/** A message's text: its text parts, joined. */
function textOf(message: ChatMessage): string {
  return message.parts
    .flatMap((part) => {
      const p = part as { type?: unknown; text?: unknown };
      return p.type === "text" && typeof p.text === "string" ? [p.text] : [];
    })
    .join("");
}

/** The assistant message id of a Submission's run (stable across reloads). */
export const assistantMessageId = (submission: { readonly id: string }) => `assistant:${submission.id}`;

/** A person's decision on a call, as the UI holds it once answered (`addToolApprovalResponse`). */
interface Decision {
  readonly key: string;
  readonly approved: boolean;
  readonly reason?: string;
}

/** The decisions an assistant message holds that the session may not have yet (durable approval keys). */
function decisionsIn(message: ChatMessage): Decision[] {
  return message.parts.flatMap((part) => {
    const p = part as { state?: unknown; approval?: { id?: unknown; approved?: unknown; reason?: unknown } };
    const id = p.approval?.id;
    if (p.state !== "approval-responded" || typeof id !== "string" || !id.startsWith("approval:")) return [];
    const reason = p.approval?.reason;
    return [
      { key: id, approved: p.approval?.approved === true, ...(typeof reason === "string" && { reason }) },
    ];
  });
}

/**
 * The page answered approvals: each decision goes to the session as its approval signal (idempotent: a
 * retried send repeats the same request), then the same assistant message continues from the session's
 * head. A decision someone else took first (another tab, the devtools), or one for a call the session
 * never had (a stale page), is not an error: the stream shows the one that counts.
 */
async function continueAfterDecisions(
  backend: ChatBackend,
  message: ChatMessage,
  abortSignal: AbortSignal | undefined,
  cancelOnStop: boolean,
): Promise<ReadableStream<ChatChunk>> {
  if (!backend.signal) throw new Error("chatTransport: this backend cannot deliver approval decisions");
  for (const decision of decisionsIn(message)) {
    const payload = { approved: decision.approved, ...(decision.reason && { reason: decision.reason }) };
    try {
      await backend.signal(decision.key, payload, { requestId: `${decision.key}:chat` });
    } catch (error) {
      // Decided elsewhere first, or a call the session does not have (a stale page): the stream shows the run.
      if (!isSettledElsewhere(error)) throw error;
    }
  }
  const view = await backend.view({ entries: 0, tasks: "active" });
  const submission = view?.submissions.find((s) => assistantMessageId(s) === message.id);
  if (!view || !submission) throw new Error(`chatTransport: no run answers message "${message.id}"`);
  const from = Math.max(0, (submission.acceptedVersion ?? 1) - 1);
  return runStream(backend, submission, abortSignal, cancelOnStop, from, {
    head: view.version,
    quietUntilAsked: decisionsIn(message).map((d) => d.key),
  });
}

/**
 * The chunks of one run, from the commit that accepted its Submission until it ends: replayed from the
 * change log, then live. Closes after `finish` (or `abort` / `error`); the UI's abort only stops reading
 * (and, with `cancelOnStop`, asks the session to cancel the run).
 */
function runStream(
  backend: ChatBackend,
  submission: Submission,
  abortSignal: AbortSignal | undefined,
  cancelOnStop: boolean,
  from: number,
  start: FollowStart,
): ReadableStream<ChatChunk> {
  let stop: (() => unknown) | undefined;
  let closed = false;
  return new ReadableStream<ChatChunk>({
    async start(controller) {
      const follow = new RunFollower(submission, start);
      const close = () => {
        if (closed) return;
        closed = true;
        void stop?.();
        controller.close();
      };
      abortSignal?.addEventListener("abort", () => {
        if (cancelOnStop)
          void backend.cancelSubmission?.(submission.id, "stopped in the chat UI")?.catch(() => undefined);
        close();
      });
      controller.enqueue({ type: "start", messageId: assistantMessageId(submission) });
      // A follow that cannot go on (history pruned, access refused) ends the stream with an error chunk,
      // never a stream that stays open forever.
      const fail = (error: Error) => {
        if (closed) return;
        controller.enqueue({ type: "error", errorText: error.message });
        close();
      };
      stop = await backend.subscribe(
        from,
        (change) => {
          if (closed) return;
          for (const chunk of follow.chunks(change)) controller.enqueue(chunk);
          if (follow.ended) close();
        },
        fail,
        (preview) => {
          if (!closed) for (const chunk of follow.previewed(preview)) controller.enqueue(chunk);
        },
      );
      if (closed) void stop();
    },
    cancel() {
      closed = true;
      void stop?.();
    },
  });
}
