/** Accepting inputs: the Submission and the user entry that carries the input, in one commit. */
import { z } from "zod";
import type { IdSource } from "../clock.ts";
import { DuplicateRequestError, InvalidArgumentError } from "../errors.ts";
import { nestedJsonSchema } from "../records/json.ts";
import { compiled, isSubmissionFinished, type Submission, TextSchema } from "../records/schemas.ts";
import { describeIssues, summarizeIssues } from "../records/validate.ts";
import { dispatch } from "../tasks/machine.ts";
import type { CommitPipeline } from "./commit-pipeline.ts";
import type { KernelDraft } from "./draft.ts";
import type { SessionHistory } from "./history.ts";
import type { StateReader } from "./state.ts";

export const SubmitInputSchema = compiled(
  z.object({
    /** The client's idempotency key: retries with the same value return the original Submission. */
    requestId: TextSchema.min(1).max(256),
    conversationId: TextSchema.min(1).max(256),
    /** The user's message, or a structured input with a `text` to show in the conversation. */
    // `data` is stored one level down in the Submission's `input`: checked at that depth.
    input: z.union([TextSchema, z.object({ text: TextSchema, data: nestedJsonSchema(1).optional() })]),
  }),
);
export type SubmitInput = z.input<typeof SubmitInputSchema>;

export interface SubmitOptions {
  /**
   * Accepts it already cancelled, for this reason, in the same commit: it never runs. For an input given
   * again whose first acceptance was cancelled (a copy rebuilt from its other host, DESIGN §6). A requestId
   * accepted before returns that Submission, cancelled now (as `cancelSubmission` does) if it has not ended.
   */
  readonly cancelled?: string;
}
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

/**
 * Accepts a Submission on the draft — or returns the one that already has this requestId: the user entry
 * and, through the task machine, the Submission and (when the registry says so) its root task, so accepted
 * input always has its task.
 */
export function acceptSubmission(
  draft: KernelDraft,
  input: ParsedSubmitInput,
  ids: IdSource,
  options: SubmitOptions = {},
): Submission {
  const existing = draft.submissionByRequest(input.requestId);
  if (existing) {
    if (options.cancelled !== undefined && !isSubmissionFinished(existing)) {
      const cancel = { submissionId: existing.id, reason: options.cancelled };
      dispatch(draft, { type: "submission-cancel-requested", ...cancel });
    }
    return draft.submission(existing.id) as Submission;
  }
  const id = ids.next("sub");
  const text = typeof input.input === "string" ? input.input : input.input.text;
  const data = typeof input.input === "string" ? undefined : input.input.data;
  const entry = draft.appendEntry(
    input.conversationId,
    { kind: "user", text, ...(data !== undefined && { data }) },
    { submissionId: id },
  );
  const accepted = {
    id,
    requestId: input.requestId,
    conversationId: input.conversationId,
    input: typeof input.input === "string" ? input.input : { text, ...(data !== undefined && { data }) },
    entrySeq: entry.seq,
    acceptedAt: draft.at,
  };
  const root = draft.registry.submissionTask?.({ ...accepted, status: "accepted", updatedAt: draft.at });
  dispatch(draft, {
    type: "submission-accepted",
    submission: {
      ...accepted,
      ...(root && { root: { taskId: ids.next("task"), ...root } }),
      ...(options.cancelled !== undefined && { cancelled: options.cancelled }),
    },
  });
  return draft.submission(id) as Submission;
}

/**
 * `session.submit()`: accepts an input once per requestId. A retry returns the original Submission, also
 * one accepted long ago that left memory (the store's requestId index refuses the commit; it is read back).
 */
export async function submitOnce(
  pipeline: CommitPipeline,
  state: StateReader,
  history: SessionHistory,
  input: SubmitInput,
  ids: IdSource,
  options: SubmitOptions = {},
): Promise<Submission> {
  const parsed = parseSubmitInput(input);
  const existing = state.submissionByRequest(parsed.requestId);
  if (existing && (options.cancelled === undefined || isSubmissionFinished(existing))) return existing;
  try {
    const { value } = await pipeline.commit((draft) => acceptSubmission(draft, parsed, ids, options));
    return state.submission(value.id) ?? value;
  } catch (error) {
    if (!(error instanceof DuplicateRequestError)) throw error;
    const original = await history.readSubmissionForRequest(parsed.requestId);
    if (!original) throw error;
    return original;
  }
}
