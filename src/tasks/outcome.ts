/** A task's terminal outcome, and the one a task winding down (`completing`) ends with. */
import { assertNever } from "../assert-never.ts";
import type { TaskState } from "../records/schemas.ts";
import { taskError } from "./error-info.ts";

export type Outcome = Extract<TaskState, { status: "succeeded" | "failed" | "cancelled" }>;

/** The outcome a task that was winding down ends with, once its last child has ended. */
export function outcomeOf(state: Extract<TaskState, { status: "completing" }>): Outcome {
  switch (state.outcome) {
    case "succeeded":
      return { status: "succeeded", result: state.result ?? null };
    case "failed":
      return { status: "failed", error: state.error ?? taskError("failed", "failed") };
    case "cancelled":
      return { status: "cancelled", reason: state.reason ?? "cancelled" };
    default:
      return assertNever(state.outcome);
  }
}
