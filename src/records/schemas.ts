/**
 * The stored records of a session and their zod schemas. Every record is validated with these on write
 * (before a commit is frozen) and on load (before it is adopted).
 */
import { z } from "zod";

/** A JSON value: what stored records may hold, so every store can keep them as they are. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** Whether `value` is JSON all the way down (plain objects and arrays, finite numbers, no cycles). */
function isJson(value: unknown, depth: number): boolean {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value !== "object" || depth > 256) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!isJson(value[i], depth + 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const key in value) if (!isJson((value as Record<string, unknown>)[key], depth + 1)) return false;
  return true;
}

/** Where `value` stops being JSON (a path like `a.b[2]`), or undefined when all of it is JSON. */
export function findNonJson(value: unknown): string | undefined {
  // The fast check runs on every commit; paths are only built for the error message.
  if (isJson(value, 0)) return undefined;
  const walk = (v: unknown, path: string, depth: number): string | undefined => {
    if (isJson(v, depth)) return undefined;
    if (typeof v === "object" && v !== null && depth <= 256) {
      const proto = Object.getPrototypeOf(v);
      if (Array.isArray(v) || proto === Object.prototype || proto === null) {
        for (const [key, inner] of Object.entries(v)) {
          const bad = walk(
            inner,
            Array.isArray(v) ? `${path}[${key}]` : path ? `${path}.${key}` : key,
            depth + 1,
          );
          if (bad !== undefined) return bad;
        }
      }
    }
    return path || "(root)";
  };
  return walk(value, "", 0);
}

/** The UTF-8 length of a string (what a store writes, or sends), counted without encoding it. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) bytes += 1;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      bytes += 2; // a surrogate pair: 4 bytes for its 2 units
      i++;
    } else bytes += 2;
  }
  return bytes;
}

/**
 * Any JSON value. A hand-written check rather than `z.json()`: that recursive union re-parses every nested
 * value through each branch, and JSON fields are validated on every commit. Valid values are copied (and
 * frozen), so a record never aliases an object its caller may still change.
 */
export const JsonSchema: z.ZodType<Json> = z
  .unknown()
  .superRefine((value, ctx) => {
    const bad = findNonJson(value);
    if (bad !== undefined) ctx.addIssue({ code: "custom", message: `not a JSON value at ${bad}` });
  })
  .transform((value) => frozenCopy(value as Json));

/**
 * A deep copy of a JSON value, frozen as it is built: records never alias their caller's objects, and
 * freezing the record afterwards skips these already-frozen subtrees.
 */
function frozenCopy(value: Json): Json {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return Object.freeze(value.map(frozenCopy)) as Json[];
  const copy: { [key: string]: Json } = {};
  for (const key in value) copy[key] = frozenCopy(value[key] as Json);
  return Object.freeze(copy);
}

/** Whether code can be generated from strings here and now. */
function canGenerateCode(): boolean {
  try {
    return new Function("return true")() === true;
  } catch {
    return false;
  }
}

/**
 * Asked once when this module loads: where code generation is refused for good (a page whose CSP forbids
 * eval) every attempt would be one more violation report, so none is made.
 */
const codeGeneration = canGenerateCode();

/**
 * The schema with zod's ahead-of-time compiled parser (`z.compile`) in front of its runtime parser: valid
 * input runs generated code; whatever that code rejects is parsed again by the runtime parser, so errors read
 * exactly as before. Apply it where a schema is defined, while modules are evaluated: workerd allows code
 * generation only then (zod's own JIT is off in workerd), and there the records of one commit (a
 * conversation, an entry, a small typed document) validate in 0.30 instead of 2.05 µs. Where code generation
 * is refused (a request in workerd, a page whose CSP forbids eval) the schema comes back as it was. An app's
 * refinement runs twice on a value it rejects (once per parser), so refinements must not have side effects.
 */
export function compiled<T extends z.ZodType>(schema: T): T {
  // A schema compiled once (a module-level one handed to defineTask or defineTool) is not compiled again.
  if (compiledSchemas.has(schema)) return schema;
  // Asked again where the realm allowed it at load: workerd refuses it during requests, and this probe fails
  // in microseconds where z.compile would build the parser's code first (≈ 0.16 ms per schema in workerd).
  if (!codeGeneration || !canGenerateCode()) return schema;
  const result = z.compile(schema);
  compiledSchemas.add(result);
  return result;
}

/** The schemas `compiled` returned with a compiled parser. */
const compiledSchemas = new WeakSet<z.ZodType>();

const Id = z.string().min(1).max(256);
const Version = z.number().int().nonnegative();
const Time = z.number().finite();

/** Format version of the stored layout; bumped when records change incompatibly. */
export const STORAGE_FORMAT = 1;

/** The session row: the commit counter and the current owner's fencing token. */
export const SessionMetaSchema = compiled(
  z.object({
    id: Id,
    format: z.literal(STORAGE_FORMAT),
    version: Version,
    epoch: Version,
    createdAt: Time,
    updatedAt: Time,
  }),
);
export type SessionMeta = z.infer<typeof SessionMetaSchema>;

/** A conversation inside a session: an append-only sequence of entries. */
export const ConversationSchema = compiled(
  z.object({
    id: Id,
    createdAt: Time,
    /** Entries have `seq` 0 … entryCount - 1. */
    entryCount: Version,
  }),
);
export type Conversation = z.infer<typeof ConversationSchema>;

export const ToolCallSchema = z.object({
  id: Id,
  name: z.string().min(1),
  /** Raw arguments as the model produced them; validated by the tool task, not here. */
  args: z.string(),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** What an entry says, by kind. */
export const EntryContentSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("user"), text: z.string(), data: JsonSchema.optional() }),
  z.object({
    kind: z.literal("model"),
    text: z.string(),
    toolCalls: z.array(ToolCallSchema),
    model: z.string().optional(),
    /** Tokens this model call used. */
    usage: z
      .object({ inputTokens: z.number().nonnegative(), outputTokens: z.number().nonnegative() })
      .optional(),
  }),
  z.object({
    kind: z.literal("tool-result"),
    toolCallId: Id,
    toolName: z.string(),
    outcome: z.enum(["ok", "error", "interrupted"]),
    output: JsonSchema,
  }),
  z.object({
    kind: z.literal("interrupted"),
    of: z.enum(["model", "tool"]),
    partialText: z.string(),
    reason: z.string(),
  }),
  z.object({ kind: z.literal("summary"), text: z.string(), coversThroughSeq: Version }),
  z.object({ kind: z.literal("note"), text: z.string(), data: JsonSchema.optional() }),
]);
export type EntryContent = z.infer<typeof EntryContentSchema>;
export type EntryKind = EntryContent["kind"];

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
  z.object({ op: z.literal("add"), path: z.string(), value: JsonSchema }),
  z.object({ op: z.literal("replace"), path: z.string(), value: JsonSchema }),
  z.object({ op: z.literal("test"), path: z.string(), value: JsonSchema }),
  z.object({ op: z.literal("remove"), path: z.string() }),
  z.object({ op: z.literal("move"), path: z.string(), from: z.string() }),
  z.object({ op: z.literal("copy"), path: z.string(), from: z.string() }),
]);
export type PatchOperation = z.infer<typeof PatchOperationSchema>;

/** The head of a document: which version it is at and where its last full baseline is. */
export const DocumentHeadSchema = compiled(
  z.object({
    id: Id,
    type: z.string().min(1),
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
  "completing",
  "succeeded",
  "failed",
  "cancelled",
]);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

export const ErrorInfoSchema = z.object({ name: z.string(), code: z.string(), message: z.string() });
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
    thenPhase: z.string().min(1),
  }),
  /** Ended its own work; waits for owned children to wind down before the stored outcome becomes final. */
  z.object({
    status: z.literal("completing"),
    outcome: z.enum(["succeeded", "failed", "cancelled"]),
    result: JsonSchema.optional(),
    error: ErrorInfoSchema.optional(),
    reason: z.string().optional(),
  }),
  z.object({ status: z.literal("succeeded"), result: JsonSchema }),
  z.object({ status: z.literal("failed"), error: ErrorInfoSchema }),
  z.object({ status: z.literal("cancelled"), reason: z.string() }),
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
    kind: z.string().min(1),
    kindVersion: z.number().int().positive(),
    input: JsonSchema,
    parentId: Id.optional(),
    submissionId: Id.optional(),
    conversationId: Id.optional(),
    state: TaskStateSchema,
    checkpoint: z.object({ phase: z.string().min(1), data: JsonSchema }),
    /** Phase entries that reached storage as `running` (one per attempt). */
    attempts: Version,
    /** Re-entries of an interrupted phase after a restart. */
    restarts: Version,
    cancelRequested: z.string().optional(),
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
    requestId: z.string().min(1).max(256),
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
    acceptedAt: Time,
    updatedAt: Time,
  }),
);
export type Submission = z.infer<typeof SubmissionSchema>;

/** How a document changed in one commit. `baseline` is present when this version was stored in full. */
export const DocumentChangeSchema = z.object({
  id: Id,
  type: z.string().min(1),
  version: Version,
  baselineVersion: Version,
  deltaBytes: Version,
  patch: z.array(PatchOperationSchema),
  baseline: JsonSchema.optional(),
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
});
export type CommitRecord = z.infer<typeof CommitRecordSchema>;
