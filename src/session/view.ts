/** Views: plain, immutable snapshots of a session for rendering, devtools and comparisons. */
import type { Conversation, Entry, Json, Submission, Task } from "../records/schemas.ts";
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

const byId = <T extends { id: string }>(a: T, b: T) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Snapshots the state. Records are already frozen, so they are shared, not copied. */
export function buildView(state: SessionState): SessionView {
  return {
    id: state.id,
    version: state.version,
    epoch: state.epoch,
    conversations: [...state.conversations.values()]
      .map(({ record, entries }) => ({ ...record, entries: entries.slice() }))
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
    tasks: [...state.tasks.values()].sort(byId),
    submissions: [...state.submissions.values()].sort(byId),
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
