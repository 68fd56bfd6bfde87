/**
 * A run's committed changes as AI SDK UI chunks, in order: streamed text, the answer, each tool call and
 * its result, and the approvals its tool calls ask for (a person's decision, `defineTool({ approval })`).
 * Once the follow has caught up with the session and the run can go on only after a person decides, the
 * stream ends (`finish`) with the calls in `approval-requested`: `useChat` then lets the user answer
 * (`addToolApprovalResponse`), and its automatic send continues the run (see `chatTransport`).
 */

import { streamDocumentId } from "../agent/stream-record.ts";
import { approvalKey } from "../agent/tool-task.ts";
import { applyJsonPatch } from "../documents/json-patch.ts";
import type { CommitRecord, DocumentChange, Entry, Json, Submission, Task } from "../records/schemas.ts";
import { isSubmissionFinished } from "../records/schemas.ts";
import type { Preview } from "../tasks/preview.ts";

/** The UI message chunks the transport emits (a subset of the AI SDK's `UIMessageChunk`). */
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
  | { type: "tool-output-error"; toolCallId: string; errorText: string; dynamic: true }
  | { type: "tool-output-denied"; toolCallId: string }
  | { type: "tool-approval-request"; approvalId: string; toolCallId: string }
  | { type: "tool-approval-response"; approvalId: string; approved: boolean; reason?: string };

/** Where a follow starts. */
export interface FollowStart {
  /** The session's version when the follow began: "waiting for a person" counts only from there on. */
  readonly head: number;
  /**
   * The follow continues a UI message that already shows the run up to these approval requests (the
   * page answered them): it replays the run without sending anything until the run waited for all of
   * them, then sends what came after — the same message goes on, with no part twice.
   */
  readonly quietUntilAsked?: readonly string[];
}

/** Turns a run's committed changes into UI chunks, in order. */
export class RunFollower {
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

  /** The latest record of each of the run's tasks (what says whether it waits for a person). */
  private readonly tasks = new Map<string, Task>();
  /** Approval keys whose request was sent, and those whose decision was. */
  private readonly asked = new Set<string>();
  private readonly answered = new Set<string>();
  private readonly head: number;

  /** Replaying what the UI message already shows (see `FollowStart.quietUntilAsked`). */
  private quiet: boolean;

  constructor(
    private readonly submission: Submission,
    private readonly start: FollowStart,
  ) {
    this.root = submission.taskId;
    this.head = start.head;
    this.quiet = (start.quietUntilAsked ?? []).length > 0;
    if (this.root !== undefined) this.tree.add(this.root);
  }

  private track(task: Task): void {
    this.tasks.set(task.id, task);
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
    if (!this.quiet) {
      yield* this.chunksOf(change);
      return;
    }
    // The UI message already has what this replays, except how the run ended, if it ends here.
    const replayed = [...this.chunksOf(change)];
    const shown = this.start.quietUntilAsked ?? [];
    if (shown.every((key) => this.asked.has(key)) && this.waitsForPeople()) this.quiet = false;
    else if (this.ended) {
      // The run ended before (or without) waiting for what the message shows: its end, as it ended (a
      // text part opened during the quiet replay was never sent, so it is not closed either).
      const end = replayed.at(-1);
      if (end?.type === "error" || end?.type === "abort" || end?.type === "finish") yield end;
      else yield { type: "finish" };
    }
  }

  private *chunksOf(change: CommitRecord): Generator<ChatChunk> {
    // The run's tasks, by their parent links (a task is created before any entry names it).
    for (const task of change.tasks) {
      if (task.parentId !== undefined && this.tree.has(task.parentId)) this.tree.add(task.id);
      if (this.tree.has(task.id)) this.track(task);
    }
    for (const doc of change.documents) yield* this.streamed(doc);
    // A decision taken (here or anywhere else): before the result it leads to.
    for (const signal of change.signals ?? []) {
      if (!this.asked.has(signal.key) || this.answered.has(signal.key)) continue;
      this.answered.add(signal.key);
      const decision = signal.payload as { approved?: unknown; reason?: unknown };
      yield {
        type: "tool-approval-response",
        approvalId: signal.key,
        approved: decision.approved === true,
        ...(typeof decision.reason === "string" && { reason: decision.reason }),
      };
    }
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
        if (this.deniedByPerson(c.toolCallId)) yield { type: "tool-output-denied", toolCallId: c.toolCallId };
        else
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
    // Calls that now wait for a person's decision (after their input was announced above).
    for (const task of change.tasks) {
      const toolCallId = toolCallOf(task);
      if (!this.tree.has(task.id) || !isAsking(task) || toolCallId === undefined) continue;
      const key = approvalKey(task.id);
      if (this.asked.has(key) || !this.announced.has(toolCallId)) continue;
      this.asked.add(key);
      yield { type: "tool-approval-request", approvalId: key, toolCallId };
    }
    const mine = change.submissions.find((s) => s.id === this.submission.id);
    if (mine && isSubmissionFinished(mine)) {
      yield* this.endText();
      if (mine.status === "failed")
        yield { type: "error", errorText: mine.error?.message ?? "the run failed" };
      else if (mine.status === "cancelled") yield { type: "abort", reason: "the run was cancelled" };
      else yield { type: "finish" };
      this.ended = true;
      return;
    }
    yield* this.endIfWaitingForPeople(change.version);
  }

  /**
   * Ends the stream once, caught up with the head, the run can go on only after a person decides: none of
   * its tasks can run, and one of them asks for an approval. The run itself goes on waiting, durably.
   */
  private *endIfWaitingForPeople(version: number): Generator<ChatChunk> {
    if (this.ended || this.quiet || version < this.head || !this.waitsForPeople()) return;
    yield* this.endText();
    yield { type: "finish" };
    this.ended = true;
  }

  /**
   * Whether none of the run's tasks can run and one asks for an approval — each of them one whose request
   * the UI was sent (a call the UI never saw, a sub-agent's in another conversation, cannot be answered
   * from this message: the stream then stays open instead of ending with nothing to answer).
   */
  private waitsForPeople(): boolean {
    let asking = false;
    for (const task of this.tasks.values()) {
      const status = task.state.status;
      if (status === "pending" || status === "running" || status === "sleeping" || status === "completing")
        return false;
      if (!isAsking(task)) continue;
      if (!this.asked.has(approvalKey(task.id))) return false;
      asking = true;
    }
    return asking;
  }

  /** Whether a call's tool task ended because a person declined it. */
  private deniedByPerson(toolCallId: string): boolean {
    for (const task of this.tasks.values())
      if (toolCallOf(task) === toolCallId) return declinedByPerson(task);
    return false;
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

/** The tool call a tool task runs (its input names it), if it is one. */
export function toolCallOf(task: Task): string | undefined {
  const id = (task.input as { toolCallId?: unknown } | null)?.toolCallId;
  return typeof id === "string" ? id : undefined;
}

/** Whether a tool task ended because a person declined its call (its result says so). */
export function declinedByPerson(task: Task): boolean {
  if (task.state.status !== "succeeded") return false;
  const result = task.state.result as { outcome?: unknown; via?: unknown } | null;
  return result?.outcome === "rejected" && result.via === "approval";
}

/** Whether a tool task waits for a person's decision on its call. */
function isAsking(task: Task): boolean {
  return task.state.status === "awaiting" && task.state.keys.includes(approvalKey(task.id));
}

export function parseArgs(args: string): unknown {
  try {
    return args.trim() === "" ? {} : JSON.parse(args);
  } catch {
    return args;
  }
}

export function errorText(output: unknown): string {
  const error = (output as { error?: unknown } | null)?.error;
  return typeof error === "string" ? error : JSON.stringify(output);
}
