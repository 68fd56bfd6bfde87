/** Accepting inputs: the Submission record and the user entry that carries the input. */
import { z } from "zod";
import type { IdSource } from "../clock.ts";
import { InvalidArgumentError } from "../errors.ts";
import type { Submission } from "../records/schemas.ts";
import { compiled, JsonSchema } from "../records/schemas.ts";
import { describeIssues, summarizeIssues } from "../records/validate.ts";
import type { Registry } from "../registry.ts";
import { createTask } from "../tasks/transitions.ts";
import type { Draft } from "./draft.ts";
import type { Session } from "./session.ts";

export const SubmitInputSchema = compiled(
  z.object({
    /** The client's idempotency key: retries with the same value return the original Submission. */
    requestId: z.string().min(1).max(256),
    conversationId: z.string().min(1).max(256),
    /** The user's message, or a structured input with a `text` to show in the conversation. */
    input: z.union([z.string(), z.object({ text: z.string(), data: JsonSchema.optional() })]),
  }),
);
export type SubmitInput = z.input<typeof SubmitInputSchema>;
type ParsedSubmitInput = z.output<typeof SubmitInputSchema>;

/** Validates a submission request, naming every bad field. */
export function parseSubmitInput(input: unknown): ParsedSubmitInput {
  const result = SubmitInputSchema.safeParse(input);
  if (!result.success) {
    throw new InvalidArgumentError(
      `invalid submission: ${summarizeIssues(result.error)}`,
      describeIssues(result.error),
    );
  }
  return result.data;
}

/** Stages a new Submission and its user entry on the draft. */
export function buildSubmission(draft: Draft, input: ParsedSubmitInput, id: string): Submission {
  const text = typeof input.input === "string" ? input.input : input.input.text;
  const data = typeof input.input === "string" ? undefined : input.input.data;
  const entry = draft.appendEntry(
    input.conversationId,
    { kind: "user", text, ...(data !== undefined && { data }) },
    { submissionId: id },
  );
  const submission: Submission = {
    id,
    requestId: input.requestId,
    conversationId: input.conversationId,
    status: "accepted",
    input: typeof input.input === "string" ? input.input : { text, ...(data !== undefined && { data }) },
    entrySeq: entry.seq,
    acceptedAt: draft.at,
    updatedAt: draft.at,
  };
  draft.putSubmission(submission);
  return submission;
}

/**
 * Accepts a Submission on the draft — or returns the one that already has this requestId — and, when the
 * registry says so, creates its root task in the same commit: accepted input always has its task.
 */
export function acceptSubmission(
  draft: Draft,
  input: ParsedSubmitInput,
  registry: Registry,
  ids: IdSource,
): Submission {
  const existing = draft.submissionByRequest(input.requestId);
  if (existing) return existing;
  const submission = buildSubmission(draft, input, ids.next("sub"));
  const root = registry.submissionTask?.(submission);
  if (!root) return submission;
  const task = createTask(draft, registry, {
    id: ids.next("task"),
    kind: root.kind,
    input: root.input,
    submissionId: submission.id,
    conversationId: submission.conversationId,
  });
  const running: Submission = { ...submission, status: "running", taskId: task.id };
  draft.putSubmission(running);
  return running;
}

/**
 * Resolves with the first defined `check()`, re-checked after every committed change; only observes.
 * Aborting `signal` stops observing (the subscription is released) and rejects with its reason.
 */
export function observeUntil<T>(
  session: { readonly version: number; subscribe: Session["subscribe"] },
  check: () => T | undefined,
  signal?: AbortSignal,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    try {
      signal?.throwIfAborted();
      const done = check();
      if (done !== undefined) return resolve(done);
    } catch (error) {
      return reject(error);
    }
    const finish = (settle: () => void) => {
      stop();
      signal?.removeEventListener("abort", onAbort);
      settle();
    };
    const onAbort = () => finish(() => reject(signal?.reason));
    const stop = session.subscribe(
      session.version,
      () => {
        const done = check();
        if (done !== undefined) finish(() => resolve(done));
      },
      { onError: (error) => finish(() => reject(error)) },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
