/**
 * How transitions change task records, on a draft. Pure functions of the draft: the scheduler calls them
 * inside a commit build, so a phase's transition, what it staged, its children's creation, its parent's
 * join and its Submission's end all commit together.
 */
import { KernelError } from "../errors.ts";
import type { ErrorInfo, Json, Task, TaskState } from "../records/schemas.ts";
import { isTerminal } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { Draft } from "../session/draft.ts";
import { assertNever } from "../session/state.ts";
import type { JoinPolicy, Transition } from "./define-task.ts";
import { startPhase } from "./define-task.ts";

/** What a new task needs. */
export interface TaskSpec {
  readonly id: string;
  readonly kind: string;
  readonly input: Json;
  readonly parentId?: string;
  readonly submissionId?: string;
  readonly conversationId?: string;
  /** Start in this phase (default the kind's first) with this checkpoint data. */
  readonly phase?: string;
  readonly data?: Json;
}

type Outcome =
  | { readonly status: "succeeded"; readonly result: Json }
  | { readonly status: "failed"; readonly error: ErrorInfo }
  | { readonly status: "cancelled"; readonly reason: string };

/** Turns anything thrown by a phase into stored error info. */
export function errorInfo(error: unknown, code = "phase-failed"): ErrorInfo {
  if (error instanceof KernelError) return { name: error.name, code: error.code, message: error.message };
  if (error instanceof Error) return { name: error.name, code, message: error.message };
  if (
    typeof error === "object" &&
    error !== null &&
    "message" in error &&
    "code" in error &&
    "name" in error
  ) {
    const e = error as ErrorInfo;
    return { name: String(e.name), code: String(e.code), message: String(e.message) };
  }
  return { name: "Error", code, message: String(error) };
}

/** Creates a task, running in its first phase (the scheduler starts it right after the commit). */
export function createTask(draft: Draft, registry: Registry, spec: TaskSpec): Task {
  const definition = registry.latestTask(spec.kind);
  if (!definition) throw new KernelError("invalid-argument", `no task kind "${spec.kind}" is registered`);
  const parsed = definition.input.safeParse(spec.input);
  if (!parsed.success) {
    throw new KernelError(
      "invalid-argument",
      `invalid input for task "${spec.kind}": ${parsed.error.message}`,
    );
  }
  if (draft.task(spec.id)) throw new KernelError("invalid-argument", `task ${spec.id} already exists`);
  if (spec.phase !== undefined && !(spec.phase in definition.phases)) {
    throw new KernelError("invalid-argument", `task kind "${spec.kind}" has no phase "${spec.phase}"`);
  }
  const task: Task = {
    id: spec.id,
    kind: spec.kind,
    kindVersion: definition.version,
    input: spec.input,
    ...(spec.parentId !== undefined && { parentId: spec.parentId }),
    ...(spec.submissionId !== undefined && { submissionId: spec.submissionId }),
    ...(spec.conversationId !== undefined && { conversationId: spec.conversationId }),
    state: { status: "running" },
    checkpoint: { phase: spec.phase ?? startPhase(definition), data: spec.data ?? null },
    attempts: 1,
    restarts: 0,
    createdAt: draft.at,
    updatedAt: draft.at,
  };
  draft.putTask(task);
  return task;
}

/** Commits what a phase returned. */
export function applyTransition(
  draft: Draft,
  registry: Registry,
  taskId: string,
  transition: Transition,
): void {
  const task = requireOpenTask(draft, taskId);
  if (task.cancelRequested !== undefined && transition.type !== "complete" && transition.type !== "fail") {
    endTask(draft, task, { status: "cancelled", reason: task.cancelRequested });
    return;
  }
  const definition = registry.resolveTask(task.kind, task.kindVersion);
  const hasPhase = (phase: string) => definition.ok && phase in definition.definition.phases;
  switch (transition.type) {
    case "next":
    case "sleep": {
      if (!hasPhase(transition.phase)) {
        failUnknownPhase(draft, task, transition.phase);
        return;
      }
      const state: TaskState =
        transition.type === "next" ? { status: "running" } : { status: "sleeping", until: transition.until };
      draft.putTask({
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
      if (!hasPhase(transition.thenPhase)) {
        failUnknownPhase(draft, task, transition.thenPhase);
        return;
      }
      startWaiting(
        draft,
        task,
        transition.children,
        transition.policy,
        transition.thenPhase,
        transition.data,
      );
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

/** Puts a task into its next phase as a new, counted attempt. */
export function reenter(draft: Draft, task: Task, phase: string, data: Json, restart: boolean): void {
  draft.putTask({
    ...task,
    state: { status: "running" },
    checkpoint: { phase, data },
    attempts: task.attempts + 1,
    restarts: restart ? task.restarts + 1 : 0,
    updatedAt: draft.at,
  });
}

function startWaiting(
  draft: Draft,
  task: Task,
  children: readonly string[],
  policy: JoinPolicy,
  then: string,
  data: Json,
): void {
  const problem = invalidWait(draft, task, children);
  if (problem) {
    endTask(draft, task, {
      status: "failed",
      error: { name: "TaskError", code: "invalid-wait", message: problem },
    });
    return;
  }
  const waiting: Task = {
    ...task,
    state: { status: "waiting", children: [...children], policy, thenPhase: then },
    checkpoint: { phase: then, data },
    restarts: 0,
    updatedAt: draft.at,
  };
  draft.putTask(waiting);
  const failed = policy === "failFast" ? children.map((id) => draft.task(id)).find(isFailed) : undefined;
  if (failed) failParentFast(draft, waiting, failed);
  else if (draft.openChildCount(task.id) === 0) reenter(draft, waiting, then, data, false);
}

/** Why a wait on `children` is not allowed, if it is not. */
function invalidWait(draft: Draft, task: Task, children: readonly string[]): string | undefined {
  for (const id of children) {
    if (draft.task(id)?.parentId !== task.id) return `task ${id} is not a child of ${task.id}`;
  }
  if (draft.openChildCount(task.id) === 0) return undefined;
  // A parent never moves on past unfinished children it does not mention: they would be orphaned.
  const listed = new Set(children);
  for (const id of draft.ownedChildren(task.id)) {
    if (!listed.has(id) && !isTerminal(draft.task(id))) return `wait must list unfinished child ${id}`;
  }
  return undefined;
}

/**
 * Ends a task with `outcome`, or — while owned children are unfinished — moves it to `completing` (asking
 * them to stop unless it succeeded) so it becomes terminal only after them.
 */
export function endTask(draft: Draft, task: Task, outcome: Outcome): void {
  if (draft.openChildCount(task.id) > 0) {
    // Completing first, so children that end right away join a parent that is already winding down.
    draft.putTask({
      ...task,
      state: { ...outcome, status: "completing", outcome: outcome.status },
      updatedAt: draft.at,
    });
    if (outcome.status !== "succeeded") {
      const reason = outcome.status === "cancelled" ? outcome.reason : `parent ${task.id} failed`;
      for (const id of draft.ownedChildren(task.id)) requestCancel(draft, id, reason);
    }
    return; // the last child to end makes this task terminal (see notifyParent)
  }
  const ended: Task = { ...task, state: outcome, updatedAt: draft.at };
  draft.putTask(ended);
  finishSubmission(draft, ended);
  notifyParent(draft, ended);
}

/**
 * Records the intent to cancel a task. A task with no phase running ends now (asking its children to stop
 * first); a running one is signalled by the scheduler and ends when its phase returns.
 */
export function requestCancel(draft: Draft, taskId: string, reason: string): void {
  const task = draft.task(taskId);
  if (!task || isTerminal(task) || task.cancelRequested !== undefined) return;
  const marked: Task = { ...task, cancelRequested: reason, updatedAt: draft.at };
  draft.putTask(marked);
  if (task.state.status !== "running") endTask(draft, marked, { status: "cancelled", reason });
}

/** A child became terminal: join its parent if that was what the parent waited for. */
function notifyParent(draft: Draft, child: Task): void {
  if (child.parentId === undefined) return;
  const parent = draft.task(child.parentId);
  if (!parent || isTerminal(parent)) return;
  const open = draft.openChildCount(parent.id);
  switch (parent.state.status) {
    case "waiting":
      if (parent.state.policy === "failFast" && isFailed(child)) failParentFast(draft, parent, child);
      else if (open === 0) reenter(draft, parent, parent.state.thenPhase, parent.checkpoint.data, false);
      return;
    case "completing":
      if (open === 0) endTask(draft, parent, outcomeOf(parent.state));
      return;
    default:
      return;
  }
}

/** Re-checks a waiting or completing task against its children (recovery, DESIGN §4). */
export function recheckJoin(draft: Draft, task: Task): void {
  const state = task.state;
  if (state.status === "waiting") {
    const failed =
      state.policy === "failFast" ? state.children.map((id) => draft.task(id)).find(isFailed) : undefined;
    if (failed) failParentFast(draft, task, failed);
    else if (draft.openChildCount(task.id) === 0)
      reenter(draft, task, state.thenPhase, task.checkpoint.data, false);
  } else if (state.status === "completing" && draft.openChildCount(task.id) === 0) {
    endTask(draft, task, outcomeOf(state));
  }
}

function failParentFast(draft: Draft, parent: Task, child: Task): void {
  const cause = child.state.status === "failed" ? child.state.error.message : "failed";
  endTask(draft, parent, {
    status: "failed",
    error: { name: "TaskError", code: "child-failed", message: `child ${child.id} failed: ${cause}` },
  });
}

function outcomeOf(state: Extract<TaskState, { status: "completing" }>): Outcome {
  switch (state.outcome) {
    case "succeeded":
      return { status: "succeeded", result: state.result ?? null };
    case "failed":
      return {
        status: "failed",
        error: state.error ?? { name: "TaskError", code: "failed", message: "failed" },
      };
    case "cancelled":
      return { status: "cancelled", reason: state.reason ?? "cancelled" };
    default:
      return assertNever(state.outcome);
  }
}

/** A root task that carries a Submission ends it in the same commit. */
function finishSubmission(draft: Draft, task: Task): void {
  if (task.submissionId === undefined || task.parentId !== undefined) return;
  const submission = draft.submission(task.submissionId);
  if (!submission || submission.taskId !== task.id) return;
  const state = task.state;
  draft.putSubmission({
    ...submission,
    status: state.status === "succeeded" ? "succeeded" : state.status === "failed" ? "failed" : "cancelled",
    ...(state.status === "succeeded" && { result: state.result }),
    ...(state.status === "failed" && { error: state.error }),
    updatedAt: draft.at,
  });
}

function failUnknownPhase(draft: Draft, task: Task, phase: string): void {
  endTask(draft, task, {
    status: "failed",
    error: {
      name: "TaskError",
      code: "unknown-phase",
      message: `task kind "${task.kind}" has no phase "${phase}"`,
    },
  });
}

function requireOpenTask(draft: Draft, taskId: string): Task {
  const task = draft.task(taskId);
  if (!task) throw new KernelError("invalid-argument", `task ${taskId} does not exist`);
  return task;
}

const isFailed = (task: Task | undefined): task is Task => task?.state.status === "failed";
