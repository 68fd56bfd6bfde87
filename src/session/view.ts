/** Views: plain, immutable snapshots of a session for rendering, devtools and comparisons. */
import { applyJsonPatch } from "../documents/json-patch.ts";
import { InvalidArgumentError } from "../errors.ts";
import type { CommitRecord, Conversation, Entry, Json, Submission, Task } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";
import { isFinished, itemOrder, treeOf, type WorkItem } from "./items.ts";
import { DEFAULT_ENTRY_TAIL, DEFAULT_SETTLED } from "./limits.ts";
import { type PendingWait, pendingWaits } from "./pending.ts";
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

/**
 * What a view (and a session's memory) keeps of its history: every unfinished Submission and task tree,
 * plus the latest `settled` finished ones, and each conversation's latest `entries`.
 */
export interface ViewLimits {
  readonly settled: number;
  readonly entries: number;
}

/** The limits a session uses unless opened with others (`retainSettled`, `entryTail`). */
export const DEFAULT_VIEW_LIMITS: ViewLimits = { settled: DEFAULT_SETTLED, entries: DEFAULT_ENTRY_TAIL };

/**
 * A session as of one committed version: its working set (DESIGN §9). Collections are sorted by id.
 * Settled work beyond `limits` is in storage: `readSubmission(s)`, `readTask`, `readEntries`.
 */
export interface SessionView {
  readonly id: string;
  readonly version: number;
  readonly epoch: number;
  readonly limits: ViewLimits;
  readonly conversations: readonly ConversationView[];
  readonly documents: readonly DocumentView[];
  readonly tasks: readonly Task[];
  readonly submissions: readonly Submission[];
  /** What the session waits for from outside: one line per signal key an awaiting task still needs. */
  readonly pending: readonly PendingWait[];
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
  /** At most this many documents (in id order), for a session with many: a page. */
  readonly documents?: number;
  /** Only documents whose id sorts after this one: the next page after the last id shown. */
  readonly documentsAfter?: string;
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

/**
 * The tasks a view shows: those in memory, but for parked waits read back by a call and untouched by any
 * commit since — the change log has not moved them (see `SessionState.readBack`).
 */
export function shownTasks(state: SessionState): Task[] {
  const tasks = [...state.tasks.values()];
  return state.readBack.size === 0 ? tasks : tasks.filter((task) => !state.readBack.has(task.id));
}

/** Snapshots the state. Records are already frozen, so they are shared, not copied. */
export function buildView(state: SessionState, options: ViewOptions = {}): SessionView {
  checkCount("entries", options.entries);
  checkCount("submissions", options.submissions);
  checkCount("documents", options.documents);
  // Memory may hold more of a conversation than a view shows (it trims in chunks): a view shows the tail.
  const keep = Math.min(options.entries ?? state.entryTail, state.entryTail);
  const shown = shownTasks(state);
  return {
    id: state.id,
    version: state.version,
    epoch: state.epoch,
    limits: { settled: state.settledLimit, entries: state.entryTail },
    conversations: [...state.conversations.values()]
      .map(({ record, entries }) => ({ ...record, entries: keep === 0 ? [] : entries.slice(-keep) }))
      .sort(byId),
    documents: documentPage(state, options),
    tasks: shown.filter((task) => options.tasks !== "active" || !isTerminal(task)).sort(byId),
    submissions: latestSubmissions(state.submissions.values(), options.submissions).sort(byId),
    pending: pendingWaits(shown),
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

/** The documents a view shows: all of them, or one page (after `documentsAfter`, at most `documents`). */
function documentPage(state: SessionState, options: ViewOptions): DocumentView[] {
  const after = options.documentsAfter;
  const page: DocumentView[] = [];
  for (const { head, value } of state.documents.values()) {
    if (after !== undefined && head.id <= after) continue;
    page.push({ id: head.id, type: head.type, version: head.version, updatedAt: head.updatedAt, value });
  }
  page.sort(byId);
  return options.documents === undefined ? page : page.slice(0, options.documents);
}

/** The view of a session that has no commits yet (version 0): the start of {@link applyChangeToView}. */
export function emptyView(sessionId: string, limits: ViewLimits = DEFAULT_VIEW_LIMITS): SessionView {
  return {
    id: sessionId,
    version: 0,
    epoch: 0,
    limits,
    conversations: [],
    documents: [],
    tasks: [],
    submissions: [],
    pending: [],
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
  const keep = view.limits.entries;
  const conversations = new Map(view.conversations.map((c) => [c.id, c]));
  for (const record of change.conversations)
    conversations.set(record.id, { ...record, entries: conversations.get(record.id)?.entries ?? [] });
  for (const entry of change.entries) {
    const conversation = conversations.get(entry.conversationId);
    if (conversation)
      conversations.set(conversation.id, {
        ...conversation,
        entries: [...conversation.entries, entry].slice(-keep),
      });
  }
  const documents = new Map(view.documents.map((d) => [d.id, d]));
  for (const doc of change.documents) {
    if (doc.deleted) {
      documents.delete(doc.id);
      continue;
    }
    const before = documents.get(doc.id)?.value ?? null;
    const value = doc.baseline !== undefined ? doc.baseline : applyJsonPatch(before, doc.patch);
    documents.set(doc.id, { id: doc.id, type: doc.type, version: doc.version, updatedAt: change.at, value });
  }
  const tasks = new Map(view.tasks.map((t) => [t.id, t]));
  for (const task of change.tasks) tasks.set(task.id, task);
  const submissions = new Map(view.submissions.map((s) => [s.id, s]));
  for (const submission of change.submissions) submissions.set(submission.id, submission);
  for (const item of change.removed ?? []) {
    if (item.submission !== undefined) submissions.delete(item.submission);
    for (const task of item.tasks) tasks.delete(task.id);
  }
  evictSettled(tasks, submissions, view.limits.settled, change.version);
  return {
    ...view,
    version: change.version,
    epoch: Math.max(view.epoch, change.epoch),
    conversations: [...conversations.values()].sort(byId),
    documents: [...documents.values()].sort(byId),
    tasks: [...tasks.values()].sort(byId),
    submissions: [...submissions.values()].sort(byId),
    // Only a change to an awaiting task (or one that was) changes the list.
    pending:
      change.tasks.some((t) => t.state.status === "awaiting") ||
      view.pending.some((p) => change.tasks.some((t) => t.id === p.taskId))
        ? pendingWaits(tasks.values())
        : view.pending,
  };
}

/**
 * The session's own rule (`items.ts`) applied to a view: of the finished items (a Submission with its task
 * tree, a root task without one), only the `limit` newest stay.
 */
function evictSettled(
  tasks: Map<string, Task>,
  submissions: Map<string, Submission>,
  limit: number,
  version: number,
): void {
  const records = { submission: (id: string) => submissions.get(id), task: (id: string) => tasks.get(id) };
  const claimed = new Set<string>();
  const settled: WorkItem[] = [];
  for (const s of submissions.values()) {
    if (s.taskId !== undefined) claimed.add(s.taskId);
    const item = {
      version: s.acceptedVersion ?? version,
      id: s.id,
      submission: s.id,
      ...(s.taskId && { root: s.taskId }),
    };
    if (isFinished(item, records)) settled.push(item);
  }
  for (const t of tasks.values()) {
    if (t.parentId !== undefined || claimed.has(t.id)) continue;
    const item = { version: t.createdVersion ?? version, id: t.id, root: t.id };
    if (isFinished(item, records)) settled.push(item);
  }
  if (settled.length <= limit) return;
  settled.sort(itemOrder);
  const children = new Map<string, string[]>();
  for (const t of tasks.values()) {
    if (t.parentId === undefined) continue;
    const list = children.get(t.parentId) ?? [];
    list.push(t.id);
    children.set(t.parentId, list);
  }
  for (const item of settled.slice(0, settled.length - limit)) {
    if (item.submission !== undefined) submissions.delete(item.submission);
    if (item.root !== undefined)
      for (const id of treeOf(item.root, (parent) => children.get(parent) ?? [])) tasks.delete(id);
  }
}
