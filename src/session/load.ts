/**
 * Rebuilds a session's state from what a store returned. Every record is validated; one that fails is
 * reported as blocked (with the stored row's name and the reason) and the rest of the session loads.
 */
import { applyJsonPatchInPlace } from "../documents/json-patch.ts";
import { CorruptRecordError, ensureError } from "../errors.ts";
import type { Json } from "../records/schemas.ts";
import {
  ConversationSchema,
  DocumentHeadSchema,
  DocumentRowSchema,
  EntrySchema,
  JsonSchema,
  SessionMetaSchema,
  SignalSchema,
  SubmissionSchema,
  TaskSchema,
} from "../records/schemas.ts";
import { deepFreeze, summarizeIssues } from "../records/validate.ts";
import type { Registry } from "../registry.ts";
import { checkFormat } from "../storage/format.ts";
import type { StoredDocument, StoredRecord, StoredSession } from "../storage/storage.ts";
import { migrationRows } from "../storage/working-set.ts";
import type { WorkItem } from "./items.ts";
import type { BlockedKind, DocumentState } from "./state.ts";
import { reduceSession, SessionState } from "./state.ts";

/** Builds the state of a stored session. Throws only when the session row itself is unreadable. */
export function loadSessionState(
  stored: StoredSession,
  registry: Registry,
  entryTail: number,
  settledLimit: number,
): SessionState {
  checkFormat(stored.meta.value, stored.meta.key.slice("sessions/".length));
  const metaResult = SessionMetaSchema.safeParse(stored.meta.value);
  if (!metaResult.success) {
    throw new CorruptRecordError(stored.meta.key, summarizeIssues(metaResult.error), {
      cause: metaResult.error,
    });
  }
  const meta = metaResult.data;
  const state = new SessionState(meta.id, meta.createdAt, entryTail, settledLimit);
  state.version = meta.version;
  state.epoch = meta.epoch;
  state.incarnation = meta.incarnation;
  const block = (kind: BlockedKind, id: string, record: string, reason: string) =>
    reduceSession(state, { type: "blocked", record: { kind, id, record, reason } });

  for (const row of stored.conversations) {
    const parsed = ConversationSchema.safeParse(row.value);
    if (parsed.success)
      state.conversations.set(parsed.data.id, { record: deepFreeze(parsed.data), entries: [] });
    else block("conversation", idOf(row), row.key, summarizeIssues(parsed.error));
  }
  for (const row of stored.entries) {
    const parsed = EntrySchema.safeParse(row.value);
    const conversationId = row.key.slice("entries/".length, row.key.lastIndexOf("/"));
    if (!parsed.success) {
      block(
        "conversation",
        conversationId,
        row.key,
        `entry failed to load: ${summarizeIssues(parsed.error)}`,
      );
      continue;
    }
    const conversation = state.conversations.get(conversationId);
    if (!conversation) continue;
    conversation.entries.push(deepFreeze(parsed.data));
  }
  for (const doc of stored.documents) {
    const loaded = loadDocument(doc, registry);
    if ("reason" in loaded) block("document", idOf(doc.head), loaded.record, loaded.reason);
    else state.documents.set(loaded.head.id, loaded);
  }
  for (const row of stored.tasks) {
    const parsed = TaskSchema.safeParse(row.value);
    if (parsed.success) state.putTask(deepFreeze(parsed.data));
    else block("task", idOf(row), row.key, summarizeIssues(parsed.error));
  }
  for (const row of stored.submissions) {
    const parsed = SubmissionSchema.safeParse(row.value);
    if (!parsed.success) {
      block("submission", idOf(row), row.key, summarizeIssues(parsed.error));
      continue;
    }
    state.putSubmission(deepFreeze(parsed.data));
  }
  for (const row of stored.signals ?? []) {
    const parsed = SignalSchema.safeParse(row.value);
    if (parsed.success) state.putSignal(deepFreeze(parsed.data));
    else block("signal", idOf(row), row.key, summarizeIssues(parsed.error));
  }
  for (const item of state.items.load(itemsOf(stored), state)) state.evict(item);
  state.parkedInStorage = stored.parked?.count ?? 0;
  state.mayHoldParked = state.parkedInStorage > 0;
  state.parkedDue = stored.parked?.due;
  return state;
}

/**
 * The items of what was loaded: as the store's index gave them, or — for a session still in format 1,
 * loaded whole — derived the way its upgrade will key them.
 */
function itemsOf(stored: StoredSession): WorkItem[] {
  const rows =
    stored.items ??
    migrationRows(stored.tasks, stored.submissions)
      .filter((row) => row.table === "items")
      .map((row) => ({ version: row.key[0] as number, id: row.key[1] as string, value: row.value }));
  return rows.flatMap(({ version, id, value }) => {
    const item = value as { submission?: unknown; root?: unknown } | null;
    if (typeof item !== "object" || item === null) return [];
    return [
      {
        version,
        id,
        ...(typeof item.submission === "string" && { submission: item.submission }),
        ...(typeof item.root === "string" && { root: item.root }),
      },
    ];
  });
}

type LoadedDocument = DocumentState | { record: string; reason: string };

function loadDocument(doc: StoredDocument, registry: Registry): LoadedDocument {
  const head = DocumentHeadSchema.safeParse(doc.head.value);
  if (!head.success) return { record: doc.head.key, reason: summarizeIssues(head.error) };
  let value: Json | undefined;
  let expected = head.data.baselineVersion;
  for (const row of doc.rows) {
    const parsed = DocumentRowSchema.safeParse(row.value);
    if (!parsed.success) return { record: row.key, reason: summarizeIssues(parsed.error) };
    const step = parsed.data;
    if (step.version !== expected++) return { record: row.key, reason: `expected version ${expected - 1}` };
    if ("baseline" in step) value = structuredClone(step.baseline);
    else if (value === undefined) return { record: row.key, reason: "delta without a baseline before it" };
    else {
      try {
        value = applyJsonPatchInPlace(value, step.patch);
      } catch (error) {
        return { record: row.key, reason: `delta does not apply: ${ensureError(error).message}` };
      }
    }
  }
  if (value === undefined || expected !== head.data.version + 1) {
    return { record: doc.head.key, reason: `rows up to version ${head.data.version} are missing` };
  }
  const schema = registry.documents.get(head.data.type)?.schema ?? JsonSchema;
  const checked = schema.safeParse(value);
  if (!checked.success) {
    return {
      record: doc.head.key,
      reason: `value does not match type "${head.data.type}": ${summarizeIssues(checked.error)}`,
    };
  }
  return { head: deepFreeze(head.data), value: deepFreeze(checked.data as Json) };
}

/** The id part of a row name like `tasks/t_1`. */
function idOf(row: StoredRecord): string {
  return row.key.slice(row.key.indexOf("/") + 1);
}
