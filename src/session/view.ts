/** Views: plain, immutable snapshots of a session for rendering, devtools and comparisons. */
import { applyJsonPatch } from "../documents/json-patch.ts";
import { InvalidArgumentError } from "../errors.ts";
import type { CommitRecord, Conversation, Entry, Json, Submission, Task } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";
import type { BlockedRecord, SessionState } from "./state.ts";

export interface ConversationView extends Conversation {
  /** The latest entries held in memory; older ones are read with `session.readEntries`. */
  readonly entries: readonly Entry[];
}

export interface DocumentView {
  readonly id: string;
  readonly type: string;
  readonly version: number;
  readonly updatedAt: number;
  readonly value: Json;
}

/** A session as of one committed version. Collections are sorted by id. */
export interface SessionView {
  readonly id: string;
  readonly version: number;
  readonly epoch: number;
  readonly conversations: readonly ConversationView[];
  readonly documents: readonly DocumentView[];
  readonly tasks: readonly Task[];
  readonly submissions: readonly Submission[];
  /** Records that failed to load, with the reason. They are kept in storage untouched. */
  readonly blocked: readonly BlockedRecord[];
}

/**
 * A smaller view for display (a long session's full view holds every task and submission it ever had).
 * Such a view is a snapshot to render, not a base to fold later changes into.
 */
export interface ViewOptions {
  /** At most this many of each conversation's latest entries. */
  readonly entries?: number;
  /** Only the latest this many Submissions (by acceptance time). */
  readonly submissions?: number;
  /** `"active"`: only tasks that have not ended. Default `"all"`. */
  readonly tasks?: "active" | "all";
}

const byId = <T extends { id: string }>(a: T, b: T) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The latest `count` Submissions (by acceptance time, then id), or all of them. */
function latestSubmissions(all: Iterable<Submission>, count: number | undefined): Submission[] {
  const submissions = [...all];
  if (count === undefined || count >= submissions.length) return submissions;
  submissions.sort((a, b) => a.acceptedAt - b.acceptedAt || byId(a, b));
  return count === 0 ? [] : submissions.slice(-count);
}

function checkCount(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0))
    throw new InvalidArgumentError(`view option ${name} must be a non-negative integer`, [
      { path: name, message: "must be a non-negative integer" },
    ]);
}

/** Snapshots the state. Records are already frozen, so they are shared, not copied. */
export function buildView(state: SessionState, options: ViewOptions = {}): SessionView {
  checkCount("entries", options.entries);
  checkCount("submissions", options.submissions);
  const keep = options.entries;
  return {
    id: state.id,
    version: state.version,
    epoch: state.epoch,
    conversations: [...state.conversations.values()]
      .map(({ record, entries }) => ({
        ...record,
        entries: keep === undefined ? entries.slice() : keep === 0 ? [] : entries.slice(-keep),
      }))
      .sort(byId),
    documents: [...state.documents.values()]
      .map(({ head, value }) => ({
        id: head.id,
        type: head.type,
        version: head.version,
        updatedAt: head.updatedAt,
        value,
      }))
      .sort(byId),
    tasks: [...state.tasks.values()]
      .filter((task) => options.tasks !== "active" || !isTerminal(task))
      .sort(byId),
    submissions: latestSubmissions(state.submissions.values(), options.submissions).sort(byId),
    blocked: [
      ...state.blockedRecords.values(),
      ...[...state.blockedTasks].map(([id, reason]) => ({
        kind: "task" as const,
        id,
        record: `tasks/${id}`,
        reason,
      })),
    ].sort((a, b) => (a.record < b.record ? -1 : a.record > b.record ? 1 : 0)),
  };
}

/** The view of a session that has no commits yet (version 0): the start of {@link applyChangeToView}. */
export function emptyView(sessionId: string): SessionView {
  return {
    id: sessionId,
    version: 0,
    epoch: 0,
    conversations: [],
    documents: [],
    tasks: [],
    submissions: [],
    blocked: [],
  };
}

/**
 * The view after one committed change: what a remote client (SSE, devtools) folds the change stream into.
 * Pure; `view` is not modified. Changes must be applied in version order, each exactly once.
 *
 * @example
 * let view = await (await fetch(`${base}/sessions/s1/view`)).json();
 * events.onmessage = (event) => (view = applyChangeToView(view, JSON.parse(event.data)));
 */
export function applyChangeToView(view: SessionView, change: CommitRecord): SessionView {
  if (change.version !== view.version + 1) {
    throw new InvalidArgumentError(`change ${change.version} does not follow view version ${view.version}`);
  }
  const conversations = new Map(view.conversations.map((c) => [c.id, c]));
  for (const record of change.conversations)
    conversations.set(record.id, { ...record, entries: conversations.get(record.id)?.entries ?? [] });
  for (const entry of change.entries) {
    const conversation = conversations.get(entry.conversationId);
    if (conversation)
      conversations.set(conversation.id, { ...conversation, entries: [...conversation.entries, entry] });
  }
  const documents = new Map(view.documents.map((d) => [d.id, d]));
  for (const doc of change.documents) {
    const before = documents.get(doc.id)?.value ?? null;
    const value = doc.baseline !== undefined ? doc.baseline : applyJsonPatch(before, doc.patch);
    documents.set(doc.id, { id: doc.id, type: doc.type, version: doc.version, updatedAt: change.at, value });
  }
  const tasks = new Map(view.tasks.map((t) => [t.id, t]));
  for (const task of change.tasks) tasks.set(task.id, task);
  const submissions = new Map(view.submissions.map((s) => [s.id, s]));
  for (const submission of change.submissions) submissions.set(submission.id, submission);
  return {
    ...view,
    version: change.version,
    epoch: Math.max(view.epoch, change.epoch),
    conversations: [...conversations.values()].sort(byId),
    documents: [...documents.values()].sort(byId),
    tasks: [...tasks.values()].sort(byId),
    submissions: [...submissions.values()].sort(byId),
  };
}
