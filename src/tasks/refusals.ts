/**
 * When the task machine refuses an event: it does not apply to the task's state (`APPLIES_TO`), or a new
 * task or Submission cannot be created as asked. A refusal is a typed error; nothing is changed.
 */
import { InvalidArgumentError, InvalidTaskEventError, type KernelError } from "../errors.ts";
import { isTerminal } from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";
import { checkpointProblem, hasPhase, startPhase } from "./define-task.ts";
import { APPLIES_TO, type TaskEvent, type TaskSpec } from "./task-events.ts";

/** Why the machine refuses `event` in the draft's state, or undefined when it applies. */
export function refusal(draft: KernelDraft, event: TaskEvent): KernelError | undefined {
  switch (event.type) {
    case "spawn":
      return spawnRefusal(draft, event.task);
    case "submission-accepted": {
      const { submission } = event;
      if (draft.submission(submission.id)) return invalid(`submission ${submission.id} already exists`, "id");
      if (draft.submissionByRequest(submission.requestId))
        return invalid(`requestId ${submission.requestId} already has a Submission`, "requestId");
      if (!submission.root) return undefined;
      return spawnRefusal(draft, {
        id: submission.root.taskId,
        kind: submission.root.kind,
        input: submission.root.input,
      });
    }
    case "signal-received": {
      const { key } = event.signal;
      if (!draft.registry.signalFor(key)) return invalid(`no signal is defined for key "${key}"`, "key");
      if (draft.signal(key)) return invalid(`key "${key}" already has a signal`, "key");
      return undefined;
    }
    case "submission-cancel-requested":
      return draft.submission(event.submissionId)
        ? undefined
        : invalid(`submission ${event.submissionId} does not exist`, "submissionId");
    default: {
      const task = draft.task(event.taskId);
      if (!task) return invalid(`task ${event.taskId} does not exist`, "taskId");
      const status = task.state.status;
      if (!APPLIES_TO[event.type].includes(status)) {
        return new InvalidTaskEventError(
          `task ${task.id} is ${status}; "${event.type}" applies only to ${APPLIES_TO[event.type].join(" or ")} tasks`,
          event.type,
          task.id,
        );
      }
      if (event.type === "child-ended") {
        const child = draft.task(event.childId);
        if (child?.parentId !== task.id || !isTerminal(child))
          return new InvalidTaskEventError(
            `task ${event.childId} is not an ended child of ${task.id}`,
            event.type,
            task.id,
          );
      }
      return undefined;
    }
  }
}

function spawnRefusal(draft: KernelDraft, spec: TaskSpec): KernelError | undefined {
  const definition = draft.registry.latestTask(spec.kind);
  if (!definition) return invalid(`no task kind "${spec.kind}" is registered`, "kind");
  if (draft.task(spec.id)) return taskExists(spec.id);
  const parsed = definition.input.safeParse(spec.input);
  if (!parsed.success)
    return invalid(`invalid input for task "${spec.kind}": ${parsed.error.message}`, "input");
  if (spec.phase !== undefined && !hasPhase(definition, spec.phase))
    return invalid(`task kind "${spec.kind}" has no phase "${spec.phase}"`, "phase");
  const problem = checkpointProblem(definition, spec.phase ?? startPhase(definition), spec.data ?? null);
  if (problem) return invalid(problem, "data");
  if (spec.parentId !== undefined) {
    const parent = draft.task(spec.parentId);
    if (!parent || isTerminal(parent))
      return invalid(`parent task ${spec.parentId} does not exist or has ended`, "parentId");
  }
  return undefined;
}

/** The refusal of a new task whose id another task has (in memory, or only in storage). */
export const taskExists = (id: string) => invalid(`task ${id} already exists`, "id");

const invalid = (message: string, path: string) => new InvalidArgumentError(message, [{ path, message }]);
