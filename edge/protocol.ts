/**
 * What the edge API accepts, and how the Worker's router talks to a session's Durable Object. Public input
 * is validated with these schemas in the router; the object re-parses the two bodies it reads, so a bad
 * request can never reach a session even if the router changes.
 */
import { z } from "zod";
import { describeIssues, InvalidArgumentError, isWellFormedText, SubmitInputSchema } from "../src/index.ts";

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
  .object({ requestId: RequestIdSchema, payload: z.unknown().refine((p) => p !== undefined, "required") })
  .strict();

/** `POST /sessions/:id/submissions/:sid/cancel` (the body is optional). */
export const CancelBodySchema = z.object({ reason: z.string().min(1).max(500).optional() }).strict();

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

/** One call from the router to a session object. */
export type InternalRoute =
  | { readonly op: "submit"; readonly sessionId: string; readonly waitMs: number }
  | {
      readonly op: "submission";
      readonly sessionId: string;
      readonly submissionId: string;
      readonly waitMs: number;
    }
  | { readonly op: "request"; readonly sessionId: string; readonly requestId: string }
  | {
      readonly op: "submissions";
      readonly sessionId: string;
      readonly before?: number | undefined;
      readonly limit: number;
    }
  | { readonly op: "tree"; readonly sessionId: string; readonly root: string }
  | { readonly op: "cancel"; readonly sessionId: string; readonly submissionId: string }
  | {
      readonly op: "view";
      readonly sessionId: string;
      readonly atLeast: number;
      readonly waitMs: number;
      readonly entries?: number | undefined;
      readonly submissions?: number | undefined;
      readonly tasks?: "active" | "all" | undefined;
      readonly documents?: number | undefined;
      readonly documentsAfter?: string | undefined;
    }
  | {
      readonly op: "entries";
      readonly sessionId: string;
      readonly conversationId: string;
      readonly before?: number | undefined;
      readonly limit: number;
    }
  | { readonly op: "recovery"; readonly sessionId: string }
  | { readonly op: "pending"; readonly sessionId: string }
  | { readonly op: "signal"; readonly sessionId: string; readonly key: string }
  | {
      readonly op: "events";
      readonly sessionId: string;
      readonly since: number;
      readonly maxStreamMs: number;
      readonly previews?: boolean | undefined;
    }
  | {
      readonly op: "replica" | "replica-claim" | "replica-push" | "replica-release";
      readonly sessionId: string;
    }
  | {
      readonly op: "replica-changes";
      readonly sessionId: string;
      readonly after: number;
      readonly limit: number;
    };

const ORIGIN = "https://session.internal";

/** The header that carries the router's request id to the object (its logs use the same id). */
export const REQUEST_ID_HEADER = "x-request-id";

/** The request the router sends to a session object for `route`. */
export function internalRequest(route: InternalRoute, body?: unknown, requestId?: string): Request {
  const url = new URL(`${ORIGIN}/${route.op}`);
  for (const [key, value] of Object.entries(route))
    if (key !== "op" && value !== undefined) url.searchParams.set(key, String(value));
  const headers: Record<string, string> = requestId === undefined ? {} : { [REQUEST_ID_HEADER]: requestId };
  return body === undefined
    ? new Request(url, { headers })
    : new Request(url, {
        method: "POST",
        body: JSON.stringify(body),
        headers: { ...headers, "content-type": "application/json" },
      });
}

const InternalRouteSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("submit"), sessionId: IdSchema, waitMs: CountSchema }),
  z.object({ op: z.literal("submission"), sessionId: IdSchema, submissionId: IdSchema, waitMs: CountSchema }),
  z.object({ op: z.literal("request"), sessionId: IdSchema, requestId: RequestIdSchema }),
  z.object({
    op: z.literal("submissions"),
    sessionId: IdSchema,
    before: CountSchema.optional(),
    limit: CountSchema,
  }),
  z.object({ op: z.literal("tree"), sessionId: IdSchema, root: DocumentIdSchema }),
  z.object({ op: z.literal("cancel"), sessionId: IdSchema, submissionId: IdSchema }),
  z.object({
    op: z.literal("view"),
    sessionId: IdSchema,
    atLeast: CountSchema,
    waitMs: CountSchema,
    entries: CountSchema.optional(),
    submissions: CountSchema.optional(),
    tasks: TasksFilterSchema.optional(),
    documents: CountSchema.optional(),
    documentsAfter: DocumentIdSchema.optional(),
  }),
  z.object({
    op: z.literal("entries"),
    sessionId: IdSchema,
    conversationId: IdSchema,
    before: CountSchema.optional(),
    limit: CountSchema,
  }),
  z.object({ op: z.literal("recovery"), sessionId: IdSchema }),
  z.object({ op: z.literal("pending"), sessionId: IdSchema }),
  z.object({ op: z.literal("signal"), sessionId: IdSchema, key: SignalKeySchema }),
  z.object({
    op: z.literal("events"),
    sessionId: IdSchema,
    since: CountSchema,
    maxStreamMs: CountSchema,
    previews: z
      .enum(["true", "false"])
      .transform((v) => v === "true")
      .optional(),
  }),
  z.object({ op: z.literal("replica"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-claim"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-push"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-release"), sessionId: IdSchema }),
  z.object({ op: z.literal("replica-changes"), sessionId: IdSchema, after: CountSchema, limit: CountSchema }),
]);

/** The route a session object was called with, or undefined for anything else. */
export function parseInternalRoute(request: Request): InternalRoute | undefined {
  const url = new URL(request.url);
  const fields = { op: url.pathname.slice(1), ...Object.fromEntries(url.searchParams) };
  const result = InternalRouteSchema.safeParse(fields);
  return result.success ? result.data : undefined;
}
