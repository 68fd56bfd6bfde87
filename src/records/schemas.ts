/**
 * The stored records of a session and their zod schemas. Every record is validated with these on write
 * (before a commit is frozen) and on load (before it is adopted).
 */
import { z } from "zod";
import { compiled } from "./compiled.ts";
import { JsonSchema } from "./json.ts";
import { Id, SignalKey, Text, Time, Version } from "./primitives.ts";

export { compiled } from "./compiled.ts";
export type { Json } from "./json.ts";
export {
  findNonJson,
  isWellFormedText,
  JsonSchema,
  MALFORMED_TEXT,
  TextSchema,
  utf8Length,
} from "./json.ts";

export { READABLE_FORMATS, type SessionMeta, SessionMetaSchema, STORAGE_FORMAT } from "./session-meta.ts";

/** A conversation inside a session: an append-only sequence of entries. */
export const ConversationSchema = compiled(
  z.object({
    id: Id,
    createdAt: Time,
    /** Entries have `seq` 0 … entryCount - 1. */
    entryCount: Version,
    /** The first entry the model's context reads (DESIGN §9): a `summary` covers those before. Absent: 0. */
    contextStart: Version.optional(),
    /** The latest Submission accepted in it: a follow-up accepted while it is unfinished queues behind it. */
    lastTurn: Id.optional(),
    /** User entries whose turn was cancelled before it started: no later model request reads them. */
    withdrawn: z.array(Version).max(10_000).optional(),
  }),
);
export type Conversation = z.infer<typeof ConversationSchema>;

export const ToolCallSchema = z.object({
  id: Id,
  name: Text.min(1),
  /** Raw arguments as the model produced them; validated by the tool task, not here. */
  args: Text,
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** Tokens one model call used. */
const UsageSchema = z.object({
  inputTokens: z.number().nonnegative(),
  outputTokens: z.number().nonnegative(),
});
export type TokenUsage = z.infer<typeof UsageSchema>;

/** What an entry says, by kind. */
export const EntryContentSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("user"), text: Text, data: JsonSchema.optional() }),
  z.object({
    kind: z.literal("model"),
    text: Text,
    toolCalls: z.array(ToolCallSchema),
    model: Text.optional(),
    /** The last entry (seq) the request's context held: a steering message it read has a seq up to this. */
    readThroughSeq: Version.optional(),
    /** The steering messages (user entries sent while its turn ran) the request read, when it read any. */
    steered: z.array(Version).max(10_000).optional(),
    /** Tokens this model call used. */
    usage: UsageSchema.optional(),
  }),
  z.object({
    kind: z.literal("tool-result"),
    toolCallId: Id,
    toolName: Text,
    outcome: z.enum(["ok", "error", "interrupted", "not-run", "unknown", "rejected"]),
    output: JsonSchema,
  }),
  z.object({
    kind: z.literal("interrupted"),
    of: z.enum(["model", "tool"]),
    partialText: Text,
    reason: Text,
  }),
  z.object({
    kind: z.literal("summary"),
    text: Text,
    coversThroughSeq: Version,
    /** Tokens the model call that wrote it used (when the turn's own model wrote it and reported them). */
    usage: UsageSchema.optional(),
  }),
  z.object({ kind: z.literal("note"), text: Text, data: JsonSchema.optional() }),
]);
export type EntryContent = z.infer<typeof EntryContentSchema>;
export type EntryKind = EntryContent["kind"];
/** What a `summary` entry holds besides its kind (compaction). */
export type SummaryFields = Omit<Extract<EntryContent, { kind: "summary" }>, "kind">;

/** An append-only record in a conversation. Never rewritten once committed. */
export const EntrySchema = compiled(
  z.object({
    conversationId: Id,
    seq: Version,
    /** The commit version that appended it. */
    version: Version,
    at: Time,
    submissionId: Id.optional(),
    taskId: Id.optional(),
    content: EntryContentSchema,
  }),
);
export type Entry = z.infer<typeof EntrySchema>;

/** One JSON Patch (RFC 6902) operation. */
export const PatchOperationSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("add"), path: Text, value: JsonSchema }),
  z.object({ op: z.literal("replace"), path: Text, value: JsonSchema }),
  z.object({ op: z.literal("test"), path: Text, value: JsonSchema }),
  z.object({ op: z.literal("remove"), path: Text }),
  z.object({ op: z.literal("move"), path: Text, from: Text }),
  z.object({ op: z.literal("copy"), path: Text, from: Text }),
]);
export type PatchOperation = z.infer<typeof PatchOperationSchema>;

/** The head of a document: which version it is at and where its last full baseline is. */
export const DocumentHeadSchema = compiled(
  z.object({
    id: Id,
    type: Text.min(1),
    version: Version,
    baselineVersion: Version,
    /** Size (JSON characters) of the deltas stored since the baseline; bounds the work of a reload. */
    deltaBytes: Version,
    updatedAt: Time,
  }),
);
export type DocumentHead = z.infer<typeof DocumentHeadSchema>;

/** One stored step of a document: a full baseline or a JSON Patch delta against the previous version. */
export const DocumentRowSchema = compiled(
  z.union([
    z.object({ version: Version, baseline: JsonSchema }),
    z.object({ version: Version, patch: z.array(PatchOperationSchema) }),
  ]),
);
export type DocumentRow = z.infer<typeof DocumentRowSchema>;

export const TaskStatusSchema = z.enum([
  "pending",
  "running",
  "sleeping",
  "waiting",
  "awaiting",
  "completing",
  "succeeded",
  "failed",
  "cancelled",
]);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

export const ErrorInfoSchema = z.object({ name: Text, code: Text, message: Text });
export type ErrorInfo = z.infer<typeof ErrorInfoSchema>;

/** Where a task stands, by status. */
export const TaskStateSchema = z.discriminatedUnion("status", [
  z.object({ status: z.literal("pending") }),
  z.object({ status: z.literal("running") }),
  z.object({ status: z.literal("sleeping"), until: Time }),
  z.object({
    status: z.literal("waiting"),
    children: z.array(Id),
    policy: z.enum(["allSettled", "failFast"]),
    thenPhase: Text.min(1),
  }),
  /**
   * Waits on the outside world: named signal keys (a person's approval, a webhook), continuing in
   * `thenPhase` once `mode` is met (`any` key, or `all`), or in `deadline.phase` at `deadline.at`.
   * The checkpoint data is `{ data, signals }`: what the phase passed, and each key's payload so far.
   */
  z.object({
    status: z.literal("awaiting"),
    keys: z.array(SignalKey).min(1).max(64),
    mode: z.enum(["any", "all"]),
    thenPhase: Text.min(1),
    /** When the wait began. */
    since: Time,
    deadline: z.object({ at: Time, phase: Text.min(1) }).optional(),
    /** What the wait is for, as the app describes it (shown in pending views): a tool call, a question. */
    about: JsonSchema.optional(),
  }),
  /** Ended its own work; waits for owned children to wind down before the stored outcome becomes final. */
  z.object({
    status: z.literal("completing"),
    outcome: z.enum(["succeeded", "failed", "cancelled"]),
    result: JsonSchema.optional(),
    error: ErrorInfoSchema.optional(),
    reason: Text.optional(),
  }),
  z.object({ status: z.literal("succeeded"), result: JsonSchema }),
  z.object({ status: z.literal("failed"), error: ErrorInfoSchema }),
  z.object({ status: z.literal("cancelled"), reason: Text }),
]);
export type TaskState = z.infer<typeof TaskStateSchema>;

/** Statuses after which a task never changes again. */
export const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set(["succeeded", "failed", "cancelled"]);

/** Whether a task (or nothing) is finished for good. */
export function isTerminal(task: { readonly state: TaskState } | undefined): boolean {
  return task !== undefined && TERMINAL_STATUSES.has(task.state.status);
}

/** Whether a Submission has ended (succeeded, failed or cancelled); it never changes again. */
export function isSubmissionFinished(submission: { readonly status: string }): boolean {
  return (
    submission.status === "succeeded" || submission.status === "failed" || submission.status === "cancelled"
  );
}

/** A durable unit of work. Its handler code is not stored: it comes from the Registry by kind + version. */
export const TaskSchema = compiled(
  z.object({
    id: Id,
    kind: Text.min(1),
    kindVersion: z.number().int().positive(),
    input: JsonSchema,
    parentId: Id.optional(),
    submissionId: Id.optional(),
    conversationId: Id.optional(),
    state: TaskStateSchema,
    checkpoint: z.object({ phase: Text.min(1), data: JsonSchema }),
    /** Phase entries that reached storage as `running` (one per attempt). */
    attempts: Version,
    /** Re-entries of an interrupted phase after a restart. */
    restarts: Version,
    cancelRequested: Text.optional(),
    /** The version of the commit that created it (absent on tasks stored by format 1). */
    createdVersion: Version.optional(),
    /** Its position among its parent's children, 0 for the first (children only). */
    childIndex: Version.optional(),
    createdAt: Time,
    updatedAt: Time,
  }),
);
export type Task = z.infer<typeof TaskSchema>;

export const SubmissionStatusSchema = z.enum(["accepted", "running", "succeeded", "failed", "cancelled"]);
export type SubmissionStatus = z.infer<typeof SubmissionStatusSchema>;

/** One accepted input with a stable identity: a retry with the same `requestId` returns this record. */
export const SubmissionSchema = compiled(
  z.object({
    id: Id,
    requestId: Text.min(1).max(256),
    conversationId: Id,
    status: SubmissionStatusSchema,
    input: JsonSchema,
    /** Seq of the user entry that recorded the input. */
    entrySeq: Version,
    taskId: Id.optional(),
    /** Seq of the final entry, once there is one. */
    resultSeq: Version.optional(),
    result: JsonSchema.optional(),
    error: ErrorInfoSchema.optional(),
    /** The version of the commit that accepted it: its place in the session's order of inputs. */
    acceptedVersion: Version.optional(),
    acceptedAt: Time,
    updatedAt: Time,
  }),
);
export type Submission = z.infer<typeof SubmissionSchema>;

/**
 * One outside input for a key (DESIGN §4), kept once accepted. A key takes one signal: a repeat with the same
 * requestId or payload gets the same outcome, another payload is refused. The wait on its key consumes it.
 */
export const SignalSchema = compiled(
  z.object({
    key: SignalKey,
    requestId: Text.min(1).max(256),
    payload: JsonSchema,
    receivedAt: Time,
    /** The version of the commit that accepted it. */
    version: Version,
    /** The task whose wait took it, once one did. */
    consumedBy: Id.optional(),
    consumedAt: Time.optional(),
  }),
);
export type Signal = z.infer<typeof SignalSchema>;

/** An early signal (one no wait took) dropped from storage: its key takes a new signal again. */
export const DroppedSignalSchema = z.object({
  key: SignalKey,
  /** The version of the commit that had accepted it. */
  version: Version,
  /** Its requestId (absent in commits from before it was recorded): which signal it was, across hosts. */
  requestId: Text.min(1).max(256).optional(),
});
export type DroppedSignal = z.infer<typeof DroppedSignalSchema>;

/** How a document changed in one commit. `baseline` is present when this version was stored in full. */
export const DocumentChangeSchema = z.object({
  id: Id,
  type: Text.min(1),
  version: Version,
  baselineVersion: Version,
  deltaBytes: Version,
  /** The delta from the previous version; empty when `baseline` holds the whole value (it is kept once). */
  patch: z.array(PatchOperationSchema),
  baseline: JsonSchema.optional(),
  /** The document was deleted by this commit (a per-run document whose run ended). */
  deleted: z.literal(true).optional(),
});
export type DocumentChange = z.infer<typeof DocumentChangeSchema>;

/** The head a document has after `change`, committed at `at`. */
export function headAfter(change: DocumentChange, at: number): DocumentHead {
  return {
    id: change.id,
    type: change.type,
    version: change.version,
    baselineVersion: change.baselineVersion,
    deltaBytes: change.deltaBytes,
    updatedAt: at,
  };
}

/**
 * A finished item (a Submission with its task tree, or a root task tree) that a retention policy removed
 * from storage (DESIGN §9): the keys of every row it had, so each store and every replica deletes the same.
 */
export const RemovedItemSchema = z.object({
  /** The item's place in the order of inputs (below 0 for items of a migrated session). */
  version: z.number().int(),
  id: Id,
  submission: Id.optional(),
  root: Id.optional(),
  tasks: z.array(z.object({ id: Id, parentId: Id.optional(), childIndex: Version.optional() })),
});
export type RemovedItem = z.infer<typeof RemovedItemSchema>;

/**
 * A task tree started without a Submission whose root awaits outside keys with nothing else of it open: a
 * parked wait (DESIGN §9). Its item leaves the `live` index for `parked`, each key it awaits is indexed, and
 * its deadline too, so a session opens without reading it and finds it by key, by id or by time.
 */
export const ParkedWaitSchema = z.object({
  /** The item's place in the order of inputs (the root task's `createdVersion`). */
  version: z.number().int(),
  /** The root task's id. */
  id: Id,
  keys: z.array(SignalKey).min(1).max(64),
  /** When its deadline passes, if it has one. */
  at: Time.optional(),
});
export type ParkedWait = z.infer<typeof ParkedWaitSchema>;

/**
 * One committed change: what a single commit wrote. This is the unit of the change log, of subscriptions
 * and of the in-memory reducer. Not compiled (see `compiled`): it is parsed only where the change log is
 * read (catch-ups, history), and compiling it would add about half of all the record schemas' compile time
 * (6–13 ms in Node) to the start of every process or isolate.
 */
export const CommitRecordSchema = z.object({
  version: z.number().int().positive(),
  epoch: Version,
  at: Time,
  /** Loss-tolerant progress that was batched (see DESIGN §3 "deferred commits"). */
  deferred: z.boolean(),
  conversations: z.array(ConversationSchema),
  entries: z.array(EntrySchema),
  documents: z.array(DocumentChangeSchema),
  tasks: z.array(TaskSchema),
  submissions: z.array(SubmissionSchema),
  /** Signals accepted or consumed by this commit (absent in commits stored before signals existed). */
  signals: z.array(SignalSchema).optional(),
  /** Early signals dropped (their time to be taken ran out, or the app dropped them); before `signals`. */
  droppedSignals: z.array(DroppedSignalSchema).optional(),
  /** Finished items removed by retention (absent in every other commit). */
  removed: z.array(RemovedItemSchema).optional(),
  /** Waits this commit parked, and parked waits it moved on (their index rows are deleted). */
  parked: z.array(ParkedWaitSchema).optional(),
  unparked: z.array(ParkedWaitSchema).optional(),
});
export type CommitRecord = z.infer<typeof CommitRecordSchema>;
