/**
 * AI SDK UI on a durable session: a `ChatTransport` for `useChat` (`ai` / `@ai-sdk/react`). A message is a
 * Submission (its UI message id is the requestId: sending it again after a reload returns the same run);
 * what the UI streams is read from committed changes — the model's streamed chunks, its answer, each tool
 * call and its result — plus, while a round streams, its text previews (a backend that offers them): text
 * parts still streaming, which the committed answer then completes. A reloaded page that calls
 * `resumeStream()` replays the run from its Submission's first commit, exactly as storage holds it, then
 * follows it live. Structurally typed (no import from `ai`): `chatTransport(backend)` is assignable to
 * `ChatTransport<UIMessage>`.
 */
import { streamDocumentId } from "../agent/stream-record.ts";
import { applyJsonPatch } from "../documents/json-patch.ts";
import type { CommitRecord, DocumentChange, Entry, Json, Submission } from "../records/schemas.ts";
import { isSubmissionFinished } from "../records/schemas.ts";
import type { SubmitInput } from "../session/submit.ts";
import type { SessionView, ViewOptions } from "../session/view.ts";
import type { Preview } from "../tasks/preview.ts";

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
}

/** The UI message chunks this transport emits (a subset of the AI SDK's `UIMessageChunk`). */
export type ChatChunk =
  | { type: "start"; messageId?: string }
  | { type: "finish" }
  | { type: "abort"; reason?: string }
  | { type: "error"; errorText: string }
  | { type: "text-start"; id: string }
  | { type: "text-delta"; id: string; delta: string }
  | { type: "text-end"; id: string }
  | { type: "tool-input-available"; toolCallId: string; toolName: string; input: unknown; dynamic: true }
  | { type: "tool-output-available"; toolCallId: string; output: unknown; dynamic: true }
  | { type: "tool-output-error"; toolCallId: string; errorText: string; dynamic: true };

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
    /** A reconnected stream starts from the run's first commit: the UI resets and rebuilds the message. */
    resumeStreamIsReplay: true,
    async sendMessages(request: {
      trigger: "submit-message" | "regenerate-message";
      chatId: string;
      messageId: string | undefined;
      messages: readonly ChatMessage[];
      abortSignal: AbortSignal | undefined;
    }): Promise<ReadableStream<ChatChunk>> {
      const last = request.messages.findLast((m) => m.role === "user");
      if (!last) throw new Error("chatTransport: there is no user message to send");
      const requestId =
        request.trigger === "submit-message" ? last.id : `${last.id}:again:${crypto.randomUUID()}`;
      const submission = await backend.submit({
        requestId,
        conversationId: request.chatId,
        input: textOf(last),
      });
      return runStream(backend, submission, request.abortSignal, cancelOnStop);
    },
    async reconnectToStream(request: {
      chatId: string;
      abortSignal?: AbortSignal;
    }): Promise<ReadableStream<ChatChunk> | null> {
      const view = await backend.view({ entries: 0, tasks: "active" });
      const open = view?.submissions
        .filter((s) => s.conversationId === request.chatId && !isSubmissionFinished(s))
        .sort((a, b) => (a.acceptedVersion ?? 0) - (b.acceptedVersion ?? 0))
        .at(-1);
      return open ? runStream(backend, open, request.abortSignal, cancelOnStop) : null;
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
): ReadableStream<ChatChunk> {
  let stop: (() => unknown) | undefined;
  let closed = false;
  return new ReadableStream<ChatChunk>({
    async start(controller) {
      const follow = new RunFollower(submission);
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
      const from = Math.max(0, (submission.acceptedVersion ?? 1) - 1);
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

/** Turns a run's committed changes into UI chunks, in order. */
class RunFollower {
  ended = false;
  private readonly root: string | undefined;
  /** The open text part (one per model round's answer) and how much of it was sent. */
  private text: { id: string; sent: string; round?: string } | undefined;
  private parts = 0;
  /** Tool calls the model made in this run (their input was sent). */
  private readonly announced = new Set<string>();
  /** The stream record's value as of the last change read. */
  private stream: Json | undefined;

  /** The run's task tree: its root, and every task created under it. */
  private readonly tree = new Set<string>();

  constructor(private readonly submission: Submission) {
    this.root = submission.taskId;
    if (this.root !== undefined) this.tree.add(this.root);
  }

  private ours(entry: Entry): boolean {
    if (entry.conversationId !== this.submission.conversationId || entry.taskId === undefined) return false;
    return this.tree.has(entry.taskId);
  }

  private *say(delta: string, round?: string): Generator<ChatChunk> {
    if (delta === "") return;
    if (!this.text) {
      this.text = {
        id: `${this.submission.id}:text:${this.parts++}`,
        sent: "",
        ...(round !== undefined && { round }),
      };
      yield { type: "text-start", id: this.text.id };
    }
    this.text.sent += delta;
    yield { type: "text-delta", id: this.text.id, delta };
  }

  private *endText(): Generator<ChatChunk> {
    if (!this.text) return;
    yield { type: "text-end", id: this.text.id };
    this.text = undefined;
  }

  *chunks(change: CommitRecord): Generator<ChatChunk> {
    if (this.ended) return;
    // The run's tasks, by their parent links (a task is created before any entry names it).
    for (const task of change.tasks)
      if (task.parentId !== undefined && this.tree.has(task.parentId)) this.tree.add(task.id);
    for (const doc of change.documents) yield* this.streamed(doc);
    for (const entry of change.entries) {
      if (!this.ours(entry)) continue;
      const c = entry.content;
      if (c.kind === "model") {
        // The answer as committed: what streaming did not already send, then its tool calls.
        const sent = this.text?.sent ?? "";
        if (c.text.startsWith(sent)) yield* this.say(c.text.slice(sent.length));
        else {
          // The answer is not what was streamed (a crash cut that attempt off): a part of its own.
          yield* this.endText();
          yield* this.say(c.text);
        }
        yield* this.endText();
        for (const call of c.toolCalls) {
          this.announced.add(call.id);
          yield {
            type: "tool-input-available",
            toolCallId: call.id,
            toolName: call.name,
            input: parseArgs(call.args),
            dynamic: true,
          };
        }
      } else if (c.kind === "tool-result" && this.announced.has(c.toolCallId)) {
        // Only calls the model made (announced with their input): a result of a call made inside a task
        // (a campaign's own sends) has no input part for the UI to attach it to.
        yield c.outcome === "ok"
          ? { type: "tool-output-available", toolCallId: c.toolCallId, output: c.output, dynamic: true }
          : {
              type: "tool-output-error",
              toolCallId: c.toolCallId,
              errorText: `${c.outcome}: ${errorText(c.output)}`,
              dynamic: true,
            };
      }
    }
    const mine = change.submissions.find((s) => s.id === this.submission.id);
    if (mine && isSubmissionFinished(mine)) {
      yield* this.endText();
      if (mine.status === "failed")
        yield { type: "error", errorText: mine.error?.message ?? "the run failed" };
      else if (mine.status === "cancelled") yield { type: "abort", reason: "the run was cancelled" };
      else yield { type: "finish" };
      this.ended = true;
    }
  }

  /**
   * A preview of the text a round is streaming: sent as it comes when it continues what this part has
   * sent; a piece that skips ahead (one missed while the follow caught up) waits for the committed text.
   */
  *previewed(preview: Preview): Generator<ChatChunk> {
    if (this.ended || preview.type !== "text" || preview.taskId !== this.root) return;
    const key = `${preview.round}:${preview.attempt}`;
    if (this.text?.round !== key) {
      if (preview.offset !== 0) return;
      yield* this.endText();
      yield* this.say(preview.text, key);
      return;
    }
    const sent = this.text.sent.length;
    if (preview.offset > sent || preview.offset + preview.text.length <= sent) return;
    yield* this.say(preview.text.slice(sent - preview.offset), key);
  }

  /**
   * Streamed text: the kernel's stream record of this run's generation task (one per round and attempt),
   * followed as a value — whatever patch encodes each change — and sent as the text that is new in it. A
   * retried attempt (after a crash cut one off) starts a part of its own.
   */
  private *streamed(doc: DocumentChange): Generator<ChatChunk> {
    if (this.root === undefined || doc.id !== streamDocumentId(this.root)) return;
    if (doc.deleted) {
      this.stream = undefined;
      return;
    }
    if (doc.baseline !== undefined) this.stream = doc.baseline;
    else if (this.stream !== undefined) this.stream = applyJsonPatch(this.stream, doc.patch);
    else return; // its start is older than this run's first commit: nothing to follow
    const { round, attempt, chunks } = this.stream as { round?: number; attempt?: number; chunks?: unknown };
    const key = `${round}:${attempt}`;
    const text = Array.isArray(chunks) ? chunks.filter((c) => typeof c === "string").join("") : "";
    const sent = this.text?.sent;
    if (sent !== undefined && this.text?.round === key) {
      if (sent.startsWith(text)) return; // previews already sent this much (and maybe more)
      if (text.startsWith(sent)) {
        yield* this.say(text.slice(sent.length), key);
        return;
      }
    }
    yield* this.endText();
    yield* this.say(text, key);
  }
}

function parseArgs(args: string): unknown {
  try {
    return args.trim() === "" ? {} : JSON.parse(args);
  } catch {
    return args;
  }
}

function errorText(output: unknown): string {
  const error = (output as { error?: unknown } | null)?.error;
  return typeof error === "string" ? error : JSON.stringify(output);
}

/**
 * The conversation as `useChat`'s initial `messages`: each user entry, and each Submission's answer (its
 * text and tool calls with their results), from committed entries — what a reloaded page shows before it
 * resumes the stream of a run still going.
 */
export function chatMessages(view: SessionView, conversationId: string): ChatMessage[] {
  const conversation = view.conversations.find((c) => c.id === conversationId);
  if (!conversation) return [];
  const bySeq = new Map(
    view.submissions.filter((s) => s.conversationId === conversationId).map((s) => [s.entrySeq, s]),
  );
  // Each entry goes to the answer of the run whose task tree wrote it (runs can interleave: a message
  // queued behind a running turn lands before that turn's last entries).
  const children = new Map<string, string[]>();
  for (const task of view.tasks)
    if (task.parentId !== undefined)
      children.set(task.parentId, [...(children.get(task.parentId) ?? []), task.id]);
  const owner = new Map<string, { submission: Submission; parts: unknown[] }>();
  const messages: ChatMessage[] = [];
  for (const entry of conversation.entries) {
    const c = entry.content;
    const submission = bySeq.get(entry.seq);
    if (c.kind === "user" && submission) {
      messages.push({ id: submission.requestId, role: "user", parts: [{ type: "text", text: c.text }] });
      // A run still going is left to the resumed stream (it rebuilds its message from the start).
      if (!isSubmissionFinished(submission) || submission.taskId === undefined) continue;
      const answer = { submission, parts: [] as unknown[] };
      messages.push({ id: assistantMessageId(submission), role: "assistant", parts: answer.parts });
      const tree = [submission.taskId];
      for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i] as string) ?? []));
      for (const id of tree) owner.set(id, answer);
      continue;
    }
    const answer = entry.taskId === undefined ? undefined : owner.get(entry.taskId);
    if (!answer) continue;
    if (c.kind === "model") {
      if (c.text) answer.parts.push({ type: "text", text: c.text, state: "done" });
      for (const call of c.toolCalls)
        answer.parts.push({
          type: "dynamic-tool",
          toolName: call.name,
          toolCallId: call.id,
          state: "input-available",
          input: parseArgs(call.args),
        });
    } else if (c.kind === "tool-result") {
      const part = answer.parts.find((p) => (p as { toolCallId?: string }).toolCallId === c.toolCallId) as
        | Record<string, unknown>
        | undefined;
      if (part) {
        part.state = c.outcome === "ok" ? "output-available" : "output-error";
        if (c.outcome === "ok") part.output = c.output;
        else part.errorText = `${c.outcome}: ${errorText(c.output)}`;
      }
    }
  }
  // A finished run whose tasks left the view's working set has no parts to show: it is left out.
  return messages.filter((m) => m.role !== "assistant" || m.parts.length > 0);
}
