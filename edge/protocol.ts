/**
 * What the edge API accepts, and how the Worker's router calls a session's Durable Object (RPC). Public
 * input is validated with these schemas in the router; the object checks each call and re-parses the
 * bodies it reads, so a bad request can never reach a session even if the router changes.
 */
import { z } from "zod";
import {
  describeIssues,
  InvalidArgumentError,
  isWellFormedText,
  JsonSchema,
  SubmitInputSchema,
} from "../src/index.ts";

/** Session and submission ids in URLs. */
export const IdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:~-]*$/, "only letters, digits and . _ : ~ - (not first)");

/** A client's requestId in a URL (`GET /sessions/:id/requests/:requestId`). */
export const RequestIdSchema = z
  .string()
  .min(1)
  .max(256)
  .refine(isWellFormedText, { message: "not well-formed Unicode" });

/** A document id in a query (`?documentsAfter=`): any well-formed text a document id can be. */
export const DocumentIdSchema = z
  .string()
  .min(1)
  .max(256)
  .refine(isWellFormedText, { message: "not well-formed Unicode" });

/** `POST /sessions/:id/submissions`; unknown fields are refused rather than silently dropped. */
export const SubmitBodySchema = SubmitInputSchema.strict();

/** A signal key in a URL (percent-encoded: keys may hold `:` and `/`). */
export const SignalKeySchema = z
  .string()
  .min(1)
  .max(256)
  .refine(isWellFormedText, { message: "not well-formed Unicode" });

/** `POST /sessions/:id/signals/:key`: the payload is checked against the key's definition by the session. */
export const SignalBodySchema = z
  .object({
    requestId: RequestIdSchema,
    // JSON as records hold it (bounded depth, well-formed text), checked here: a payload nested thousands of
    // levels deep would overflow the stack of the call that hands it to the session's object.
    payload: z
      .unknown()
      // (A predicate, so TypeScript does not narrow the input the JSON check below takes.)
      .refine((p): p is unknown => p !== undefined, "required")
      .pipe(JsonSchema),
  })
  .strict();

/** `POST /sessions/:id/submissions/:sid/cancel` (the body is optional). */
export const CancelBodySchema = z
  .object({
    reason: z
      .string()
      .min(1)
      .max(500)
      .refine(isWellFormedText, { message: "not well-formed Unicode" })
      .optional(),
  })
  .strict();

/** A non-negative integer in a query string or header (`"12"`), not `""`, `"1e3"` or `"-1"`. */
export const CountSchema = z
  .string()
  .regex(/^\d{1,15}$/, "must be a non-negative integer")
  .transform(Number);

/** `?tasks=` of the view: only the tasks that have not ended, or all. */
export const TasksFilterSchema = z.enum(["active", "all"]);

/** The signal body, or an InvalidArgumentError naming the bad field. */
export function parseSignalBody(value: unknown): { requestId: string; payload: unknown } {
  const result = SignalBodySchema.safeParse(value);
  if (result.success) return result.data;
  throw new InvalidArgumentError("invalid signal request", describeIssues(result.error));
}

/** The cancel body (an empty one is `{}`), or an InvalidArgumentError naming the bad field. */
export function parseCancelBody(value: unknown): z.output<typeof CancelBodySchema> {
  const result = CancelBodySchema.safeParse(value ?? {});
  if (result.success) return result.data;
  throw new InvalidArgumentError("invalid cancel request", describeIssues(result.error));
}

/** A count the router parsed from a query (`CountSchema`), as the session object receives it. */
const Count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/**
 * One call from the router to a session object, over Durable Object RPC (`stub.route(call, body,
 * requestId)`): the route and what the router parsed from the URL. Declared once: the type is this
 * schema's, and the object checks every call against it, so a bad call can never reach a session even if
 * the router changes (bodies are parsed again by the object too).
 */
export const SessionCallSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("submit"), sessionId: IdSchema, waitMs: Count }),
  z.object({ op: z.literal("submission"), sessionId: IdSchema, submissionId: IdSchema, waitMs: Count }),
  z.object({ op: z.literal("request"), sessionId: IdSchema, requestId: RequestIdSchema }),
  z.object({ op: z.literal("submissions"), sessionId: IdSchema, before: Count.optional(), limit: Count }),
  z.object({ op: z.literal("tree"), sessionId: IdSchema, root: DocumentIdSchema }),
  z.object({ op: z.literal("cancel"), sessionId: IdSchema, submissionId: IdSchema }),
  z.object({
    op: z.literal("view"),
    sessionId: IdSchema,
    atLeast: Count,
    waitMs: Count,
    entries: Count.optional(),
    submissions: Count.optional(),
    tasks: TasksFilterSchema.optional(),
    documents: Count.optional(),
    documentsAfter: DocumentIdSchema.optional(),
  }),
  z.object({
    op: z.literal("entries"),
    sessionId: IdSchema,
    conversationId: IdSchema,
    before: Count.optional(),
    limit: Count,
  }),
  z.object({ op: z.literal("recovery"), sessionId: IdSchema }),
  z.object({
    op: z.literal("pending"),
    sessionId: IdSchema,
    before: z.string().max(600).optional(),
    limit: Count,
    prefix: z.string().min(1).max(256).optional(),
  }),
  z.object({ op: z.literal("signal"), sessionId: IdSchema, key: SignalKeySchema }),
  z.object({ op: z.literal("early-signals"), sessionId: IdSchema, after: Count.optional(), limit: Count }),
  z.object({ op: z.literal("drop-signal"), sessionId: IdSchema, key: SignalKeySchema }),
  z.object({
    op: z.literal("events"),
    sessionId: IdSchema,
    since: Count,
    /** `since` came from the `Last-Event-ID` header (a reconnecting EventSource), not the query. */
    sinceFromHeader: z.boolean().optional(),
    maxStreamMs: Count,
    previews: z.boolean().optional(),
  }),
  z.object({ op: z.literal("replica"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-claim"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-push"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-release"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-changes"), sessionId: IdSchema, after: Count, limit: Count }),
  z.object({ op: z.literal("replica-snapshot"), sessionId: IdSchema }),
]);

/** One call from the router to a session object (see {@link SessionCallSchema}). */
export type InternalRoute = z.infer<typeof SessionCallSchema>;

/** The call a session object was given, or undefined for anything that is not one. */
export function parseSessionCall(value: unknown): InternalRoute | undefined {
  const result = SessionCallSchema.safeParse(value);
  return result.success ? result.data : undefined;
}

/**
 * What a session object answers the router on: every call over the RPC method `route`, except the event
 * stream, which goes through the object's `fetch` with the same call in a header ({@link streamRequest}):
 * a stream returned over RPC is not cancelled when its client leaves (on workerd here its writes kept
 * succeeding and its slot was never freed), while a fetched response's body is.
 */
export interface SessionStub {
  route(call: InternalRoute, body?: unknown, requestId?: string): Promise<Response>;
  fetch(request: Request): Promise<Response>;
}

/** The header that carries a call to a session object's `fetch` (the event stream). */
export const CALL_HEADER = "x-session-call";
/** The header that carries the router's request id to the object's `fetch` (its logs use the same id). */
export const REQUEST_ID_HEADER = "x-request-id";

/** The request for an event-stream call to a session object's `fetch`. */
export function streamRequest(call: Extract<InternalRoute, { op: "events" }>, requestId?: string): Request {
  const headers: Record<string, string> = { [CALL_HEADER]: JSON.stringify(call) };
  if (requestId !== undefined) headers[REQUEST_ID_HEADER] = requestId;
  return new Request("https://session.internal/events", { headers });
}

/** The event-stream call a session object's `fetch` was given, or undefined. */
export function parseStreamRequest(request: Request): InternalRoute | undefined {
  try {
    const call = parseSessionCall(JSON.parse(request.headers.get(CALL_HEADER) ?? "null"));
    return call?.op === "events" ? call : undefined;
  } catch {
    return undefined;
  }
}
