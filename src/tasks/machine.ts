/**
 * The task machine: applies a {@link TaskEvent} to the kernel's draft of a commit. Every change of a task's
 * or a Submission's state goes through {@link dispatch}; the states and events themselves, and which event
 * applies to which state, are listed in `task-events.ts`.
 */
import { assertNever } from "../assert-never.ts";
import type { Json, Submission, Task, TaskState } from "../records/schemas.ts";
import { isSubmissionFinished, isTerminal } from "../records/schemas.ts";
import { noteChosenId } from "../session/chosen-ids.ts";
import type { KernelDraft } from "../session/draft.ts";
import { type AwaitMoves, passDeadline, receiveSignal, startAwaiting } from "./awaiting.ts";
import { checkpointProblem, hasPhase, startPhase, type Transition } from "./define-task.ts";
import { stageEnded } from "./ended.ts";
import { taskError } from "./error-info.ts";
import { followUp, releaseNext } from "./follow-up.ts";
import { type Outcome, outcomeOf } from "./outcome.ts";
import { refusal } from "./refusals.ts";
import type { NewSubmission, TaskEvent, TaskSpec, TaskTargetEvent } from "./task-events.ts";
import { invalidWait } from "./wait-check.ts";

export type { NewSubmission, RecoveryEvent, TaskEvent, TaskSpec } from "./task-events.ts";

/**
 * Applies `event` to the draft: writes the task and Submission records it changes, and everything that
 * follows from it in the same commit (a parent's join, a Submission's end, children asked to stop).
 * Throws {@link InvalidTaskEventError} or {@link InvalidArgumentError} (changing nothing) when the event
 * does not apply.
 */
export function dispatch(draft: KernelDraft, event: TaskEvent): void {
  if (event.type === "spawn" && event.task.chosenId) noteChosenId(draft, event.task.id);
  const refused = refusal(draft, event);
  if (refused) throw refused;
  switch (event.type) {
    case "spawn":
      createTask(draft, event.task);
      return;
    case "submission-accepted":
      acceptSubmission(draft, event.submission);
      return;
    case "submission-cancel-requested":
      cancelSubmission(draft, event.submissionId, event.reason);
      return;
    case "signal-received":
      receiveSignal(draft, event.signal, MOVES);
      return;
    default:
      applyToTask(draft, draft.task(event.taskId) as Task, event);
  }
}

/** Whether `event` applies to the draft's current state (dispatching it would not be refused). */
export function isApplicable(draft: KernelDraft, event: TaskEvent): boolean {
  return refusal(draft, event) === undefined;
}

function applyToTask(draft: KernelDraft, task: Task, event: TaskTargetEvent): void {
  switch (event.type) {
    case "phase-ended":
      endPhase(draft, task, event.transition, event.aborted);
      return;
    case "phase-failed":
      endTask(draft, task, { status: "failed", error: event.error });
      return;
    case "cancel-requested":
      requestCancel(draft, task, event.reason);
      return;
    case "child-ended":
      joinChild(draft, task, draft.task(event.childId) as Task);
      return;
    case "woke":
      reenter(draft, task, task.checkpoint.phase, task.checkpoint.data, 0);
      return;
    case "started": // it never ran since it was stored: its restarts so far still count
      reenter(draft, task, task.checkpoint.phase, task.checkpoint.data, task.restarts);
      return;
    case "restarted":
      reenter(draft, task, task.checkpoint.phase, task.checkpoint.data, task.restarts + 1);
      return;
    case "queued": // its phase has not started: it waits for its key — or, never run and asked to stop, ends
      if (task.cancelRequested !== undefined && task.restarts === 0)
        endTask(
          draft,
          { ...task, state: { status: "pending" } },
          { status: "cancelled", reason: task.cancelRequested },
        );
      else draft.writeTask({ ...task, state: { status: "pending" }, updatedAt: draft.at });
      return;
    case "restart-limit":
      if (event.settleIn !== undefined) {
        const cutOff = { phase: task.checkpoint.phase, data: task.checkpoint.data, restarts: event.restarts };
        reenter(draft, task, event.settleIn, cutOff, 0);
        return;
      }
      endTask(draft, task, {
        status: "failed",
        error: taskError(
          "restart-limit",
          `phase "${event.phase}" was interrupted ${event.restarts} times; giving up instead of crash-looping`,
        ),
      });
      return;
    case "join-rechecked":
      recheckJoin(draft, task);
      return;
    case "deadline-passed":
      passDeadline(draft, task, MOVES);
      return;
    case "migrated": {
      const { to: kindVersion, input, checkpoint } = event;
      draft.writeTask({ ...task, kindVersion, input, checkpoint, updatedAt: draft.at });
      return;
    }
    default:
      assertNever(event);
  }
}

/** A new task runs in its first phase (the scheduler starts it right after the commit). */
function createTask(draft: KernelDraft, spec: TaskSpec): void {
  const definition = draft.registry.latestTask(spec.kind);
  if (!definition) return;
  draft.writeTask({
    id: spec.id,
    kind: spec.kind,
    kindVersion: definition.version,
    input: spec.input,
    ...(spec.parentId !== undefined && {
      parentId: spec.parentId,
      childIndex: draft.ownedChildren(spec.parentId).length,
    }),
    ...(spec.submissionId !== undefined && { submissionId: spec.submissionId }),
    ...(spec.conversationId !== undefined && { conversationId: spec.conversationId }),
    state: { status: "running" },
    checkpoint: { phase: spec.phase ?? startPhase(definition), data: spec.data ?? null },
    attempts: 1,
    restarts: 0,
    createdVersion: draft.version,
    createdAt: draft.at,
    updatedAt: draft.at,
  });
}

function acceptSubmission(draft: KernelDraft, input: NewSubmission): void {
  const submission: Submission = {
    id: input.id,
    requestId: input.requestId,
    conversationId: input.conversationId,
    status: input.root ? "running" : "accepted",
    input: input.input,
    entrySeq: input.entrySeq,
    ...(input.root && { taskId: input.root.taskId }),
    acceptedVersion: draft.version,
    acceptedAt: draft.at,
    updatedAt: draft.at,
  };
  draft.writeSubmission(submission);
  const { root, cancelled, id: submissionId, conversationId } = input;
  if (root)
    createTask(draft, { id: root.taskId, kind: root.kind, input: root.input, submissionId, conversationId });
  if (cancelled === undefined) {
    // Only a turn (a root task) takes its conversation's line: one without is the app's to handle.
    if (root)
      followUp(
        draft,
        submission,
        draft.takeTurn(conversationId, submissionId),
        root.followUp ?? "queue",
        MOVES,
      );
    return;
  }
  const task = root && (draft.task(root.taskId) as Task); // accepted already cancelled: never run, no turn
  if (task)
    endTask(draft, { ...task, cancelRequested: cancelled }, { status: "cancelled", reason: cancelled });
  else cancelSubmission(draft, submissionId, cancelled);
}

function cancelSubmission(draft: KernelDraft, submissionId: string, reason: string): void {
  const submission = draft.submission(submissionId) as Submission;
  if (isSubmissionFinished(submission)) return;
  const task = submission.taskId === undefined ? undefined : draft.task(submission.taskId);
  if (task) dispatch(draft, { type: "cancel-requested", taskId: task.id, reason });
  else draft.writeSubmission({ ...submission, status: "cancelled", updatedAt: draft.at });
}

/** What a phase returned, committed. A cancel requested meanwhile wins over anything but a completion. */
function endPhase(draft: KernelDraft, task: Task, transition: Transition, aborted: boolean): void {
  if (task.cancelRequested !== undefined) {
    if (transition.type === "complete")
      endTask(draft, task, { status: "succeeded", result: transition.result });
    else if (transition.type === "fail" && !aborted)
      endTask(draft, task, { status: "failed", error: transition.error });
    else endTask(draft, task, { status: "cancelled", reason: task.cancelRequested }, transition.type);
    return;
  }
  const definition = draft.registry.resolveTask(task.kind, task.kindVersion);
  const unknownPhase = (phase: string) =>
    endTask(draft, task, {
      status: "failed",
      error: taskError("unknown-phase", `task kind "${task.kind}" has no phase "${phase}"`),
    });
  const badCheckpoint = (phase: string, data: Json) => {
    const problem = definition.ok ? checkpointProblem(definition.definition, phase, data) : undefined;
    if (problem) endTask(draft, task, { status: "failed", error: taskError("invalid-checkpoint", problem) });
    return problem !== undefined;
  };
  const known = (phase: string) => definition.ok && hasPhase(definition.definition, phase);
  switch (transition.type) {
    case "next":
    case "sleep": {
      if (!known(transition.phase)) {
        unknownPhase(transition.phase);
        return;
      }
      if (badCheckpoint(transition.phase, transition.data)) return;
      const state: TaskState =
        transition.type === "next" ? { status: "running" } : { status: "sleeping", until: transition.until };
      draft.writeTask({
        ...task,
        state,
        checkpoint: { phase: transition.phase, data: transition.data },
        attempts: transition.type === "next" ? task.attempts + 1 : task.attempts,
        restarts: 0,
        updatedAt: draft.at,
      });
      return;
    }
    case "wait":
      if (!known(transition.thenPhase)) {
        unknownPhase(transition.thenPhase);
        return;
      }
      if (badCheckpoint(transition.thenPhase, transition.data)) return;
      startWaiting(draft, task, transition);
      return;
    case "await":
      if (!known(transition.thenPhase)) {
        unknownPhase(transition.thenPhase);
        return;
      }
      if (transition.deadline && !known(transition.deadline.phase)) {
        unknownPhase(transition.deadline.phase);
        return;
      }
      startAwaiting(draft, task, transition, MOVES);
      return;
    case "complete":
      endTask(draft, task, { status: "succeeded", result: transition.result });
      return;
    case "fail":
      endTask(draft, task, { status: "failed", error: transition.error });
      return;
    default:
      assertNever(transition);
  }
}

/** The moves of the machine the wait logic (`awaiting.ts`) makes. */
const MOVES: AwaitMoves = {
  reenter: (draft, task, phase, data) => reenter(draft, task, phase, data, 0),
  fail: (draft, task, error) => endTask(draft, task, { status: "failed", error }),
  cancel: (draft, task, reason) => requestCancel(draft, task, reason),
};

/** Puts a task into `phase` as a new attempt, with `restarts` re-entries after interruptions counted. */
function reenter(draft: KernelDraft, task: Task, phase: string, data: Json, restarts: number): void {
  draft.writeTask({
    ...task,
    state: { status: "running" },
    checkpoint: { phase, data },
    attempts: task.attempts + 1,
    restarts,
    updatedAt: draft.at,
  });
}

function startWaiting(draft: KernelDraft, task: Task, wait: Extract<Transition, { type: "wait" }>): void {
  const problem = invalidWait(draft, task, wait.children);
  if (problem) {
    endTask(draft, task, { status: "failed", error: taskError("invalid-wait", problem) });
    return;
  }
  const waiting: Task = {
    ...task,
    state: {
      status: "waiting",
      children: [...wait.children],
      policy: wait.policy,
      thenPhase: wait.thenPhase,
    },
    checkpoint: { phase: wait.thenPhase, data: wait.data },
    restarts: 0,
    updatedAt: draft.at,
  };
  draft.writeTask(waiting);
  recheckJoin(draft, waiting);
}

/**
 * Ends a task with `outcome`, or — while owned children are unfinished — moves it to `completing` (asking
 * them to stop unless it succeeded) so it becomes terminal only after them.
 */
function endTask(draft: KernelDraft, task: Task, outcome: Outcome, returned?: Transition["type"]): void {
  if (draft.openChildCount(task.id) > 0) {
    // Completing first, so children that end right away join a parent that is already winding down.
    draft.writeTask({
      ...task,
      state: { ...outcome, status: "completing", outcome: outcome.status },
      updatedAt: draft.at,
    });
    if (outcome.status !== "succeeded") {
      const reason = outcome.status === "cancelled" ? outcome.reason : `parent ${task.id} failed`;
      for (const id of draft.ownedChildren(task.id))
        dispatch(draft, { type: "cancel-requested", taskId: id, reason });
    }
    return; // the last child to end makes this task terminal (see joinChild)
  }
  const ended: Task = { ...task, state: outcome, updatedAt: draft.at };
  draft.writeTask(ended);
  stageEnded(draft, ended, task.state.status, returned);
  finishSubmission(draft, ended, task);
  if (ended.parentId !== undefined && draft.task(ended.parentId))
    dispatch(draft, { type: "child-ended", taskId: ended.parentId, childId: ended.id });
}

/**
 * Records the intent to cancel. A task with no phase running ends now (asking its children to stop
 * first); a running one is signalled by the scheduler and ends when its phase returns.
 */
function requestCancel(draft: KernelDraft, task: Task, reason: string): void {
  if (isTerminal(task) || task.cancelRequested !== undefined) return;
  const marked: Task = { ...task, cancelRequested: reason, updatedAt: draft.at };
  draft.writeTask(marked);
  // Winding down already: its outcome stays (a failure is not made a cancel); its children are asked to stop.
  if (task.state.status === "completing")
    for (const id of draft.ownedChildren(task.id))
      dispatch(draft, { type: "cancel-requested", taskId: id, reason });
  // Not running, or created in this very commit (its first phase cannot have started): it ends now.
  else if (task.state.status !== "running" || task.createdVersion === draft.version)
    endTask(draft, marked, { status: "cancelled", reason });
}

/** A child became terminal: join its parent if that is what the parent waits for. */
function joinChild(draft: KernelDraft, parent: Task, child: Task): void {
  const state = parent.state;
  if (state.status === "waiting" && state.policy === "failFast" && child.state.status === "failed")
    failParentFast(draft, parent, child);
  else if (state.status === "waiting" || state.status === "completing") recheckJoin(draft, parent);
}

/** A waiting task continues once its join is satisfied; a completing one ends once its children have. */
function recheckJoin(draft: KernelDraft, task: Task): void {
  const state = task.state;
  if (state.status === "waiting") {
    const failed =
      state.policy === "failFast"
        ? state.children.map((id) => draft.task(id)).find((child) => child?.state.status === "failed")
        : undefined;
    if (failed) failParentFast(draft, task, failed);
    else if (draft.openChildCount(task.id) === 0)
      reenter(draft, task, state.thenPhase, task.checkpoint.data, 0);
  } else if (state.status === "completing" && draft.openChildCount(task.id) === 0) {
    endTask(draft, task, outcomeOf(state));
  }
}

function failParentFast(draft: KernelDraft, parent: Task, child: Task): void {
  const cause = child.state.status === "failed" ? child.state.error.message : "failed";
  endTask(draft, parent, {
    status: "failed",
    error: taskError("child-failed", `child ${child.id} failed: ${cause}`),
  });
}

/** A root task that carries a Submission ends it in the same commit (`before`: the task as it was). */
function finishSubmission(draft: KernelDraft, task: Task, before: Task): void {
  if (task.submissionId === undefined || task.parentId !== undefined) return;
  const submission = draft.submission(task.submissionId);
  if (!submission || submission.taskId !== task.id) return;
  const state = task.state;
  const ended: Submission = {
    ...submission,
    status: state.status === "succeeded" ? "succeeded" : state.status === "failed" ? "failed" : "cancelled",
    ...(state.status === "succeeded" && { result: state.result }),
    ...(state.status === "failed" && { error: state.error }),
    updatedAt: draft.at,
  };
  draft.writeSubmission(ended);
  releaseNext(draft, ended, before, MOVES); // the turn queued behind it starts in this same commit
}
