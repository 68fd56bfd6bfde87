/**
 * What the devtools say about how things ended, from their records, never from the machine state alone:
 * a tool task that "succeeded" holds the call's outcome (ok, error, interrupted, unknown, rejected, not-run)
 * and how it was obtained (run, replay, confirm, run-after-confirm) — a failed call must not look succeeded.
 * Also the recovery marks of a commit (epoch changes, counted restarts, confirmations, interrupted records).
 */
import type { CommitRecord, SessionView, Submission, Task } from "../../src/index.ts";
import { treeOf } from "./tree.ts";
import { counted } from "./words.ts";

/** How a display reads: good, needs a look, bad, still going, or waiting. */
export type Tone = "good" | "warn" | "bad" | "active" | "waiting";

/** What a task shows: a short label, its tone, and why (for anything but plain success). */
export interface Outcome {
  readonly label: string;
  readonly tone: Tone;
  readonly reason?: string;
}

interface ToolResultLike {
  readonly outcome?: unknown;
  readonly via?: unknown;
  readonly output?: unknown;
}

const isToolResult = (value: unknown): value is ToolResultLike =>
  typeof value === "object" && value !== null && typeof (value as ToolResultLike).outcome === "string";

/** The reason a tool result gives: its `error` text, else its output as JSON. */
function reasonOf(result: ToolResultLike): string | undefined {
  const output = result.output;
  if (
    typeof output === "object" &&
    output !== null &&
    typeof (output as { error?: unknown }).error === "string"
  )
    return (output as { error: string }).error;
  return output === undefined ? undefined : JSON.stringify(output);
}

/** A tool call's outcome as the model and the user should read it. */
function toolOutcome(result: ToolResultLike): Outcome {
  const via = typeof result.via === "string" ? result.via : "run";
  switch (result.outcome) {
    case "ok":
      if (via === "confirm")
        return { label: "confirmed", tone: "good", reason: "found by its operation id: it had happened" };
      if (via === "replay") return { label: "replayed", tone: "good", reason: "re-run: safe to repeat" };
      if (via === "run-after-confirm")
        return {
          label: "ran after confirm",
          tone: "good",
          reason: "confirm found no trace of it, so it ran once, under the same operation id",
        };
      return { label: "ok", tone: "good" };
    case "error": {
      const reason = reasonOf(result);
      return {
        label: via === "rejected" ? "refused" : "error",
        tone: "bad",
        ...(reason !== undefined && { reason }),
      };
    }
    case "interrupted":
      return { label: "interrupted", tone: "bad", reason: reasonOf(result) ?? "cut off, unsafe to re-run" };
    case "unknown":
      return { label: "unknown", tone: "bad", reason: reasonOf(result) ?? "no way to tell if it happened" };
    case "rejected":
      return { label: "rejected", tone: "warn", reason: reasonOf(result) ?? "a person declined it" };
    case "not-run":
      return { label: "not run", tone: "warn", reason: reasonOf(result) ?? "it never took effect" };
    default:
      // An outcome this page does not know (a newer kernel's): shown, not counted as a problem.
      return { label: String(result.outcome), tone: "good" };
  }
}

/** A task's name on its node: its kind, and for a tool call the tool's name. */
export function taskTitle(task: Task): string {
  const tool = task.kind === "agent.tool" ? (task.input as { name?: unknown } | null)?.name : undefined;
  return typeof tool === "string" ? `${task.kind} ${tool}` : task.kind;
}

/** What a task's node says. */
export function taskOutcome(task: Task): Outcome {
  const s = task.state;
  switch (s.status) {
    case "succeeded":
      // A tool call's result says how it ended; another task's `outcome` field is its own business.
      return task.kind === "agent.tool" && isToolResult(s.result)
        ? toolOutcome(s.result)
        : { label: "succeeded", tone: "good" };
    case "failed":
      return { label: "failed", tone: "bad", reason: `${s.error.code}: ${s.error.message}` };
    case "cancelled":
      return { label: "cancelled", tone: "warn", reason: s.reason };
    case "completing":
      return { label: `completing (${s.outcome})`, tone: s.outcome === "succeeded" ? "active" : "bad" };
    case "awaiting":
    case "sleeping":
    case "waiting":
      return { label: s.status, tone: "waiting" };
    case "running":
    case "pending":
      return { label: s.status, tone: "active" };
  }
}

/** The tool calls under a Submission that did not end plainly ok, counted by label (`error: 3`). */
export function problemsOf(submission: Submission, tasks: readonly Task[]): Map<string, number> {
  const counts = new Map<string, number>();
  if (!submission.taskId) return counts;
  for (const task of treeOf(tasks, submission.taskId)) {
    const outcome = taskOutcome(task);
    if (outcome.tone === "bad" || outcome.tone === "warn")
      counts.set(outcome.label, (counts.get(outcome.label) ?? 0) + 1);
  }
  return counts;
}

/** Problems counted by label as words: "2 errors, 1 interrupted" (the other labels read as adjectives). */
export function problemText(counts: ReadonlyMap<string, number>): string {
  return [...counts]
    .map(([label, n]) => (label === "error" ? counted(n, "error") : `${n} ${label}`))
    .join(", ");
}

/**
 * For each task with problems under it, the tasks below it (not itself) that did not end plainly ok,
 * counted by label: what makes a parent that succeeded not a plain success.
 */
export function problemsBelow(tasks: readonly Task[]): Map<string, Map<string, number>> {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const below = new Map<string, Map<string, number>>();
  for (const task of tasks) {
    const { label, tone } = taskOutcome(task);
    if (tone !== "bad" && tone !== "warn") continue;
    for (let up = byId.get(task.parentId ?? ""); up; up = byId.get(up.parentId ?? "")) {
      const counts = below.get(up.id) ?? new Map<string, number>();
      counts.set(label, (counts.get(label) ?? 0) + 1);
      below.set(up.id, counts);
    }
  }
  return below;
}

/**
 * What a task's node says in its tree (`below`: `problemsBelow` of the tree): its own outcome, except that a
 * task that ended well over tasks that did not is "… with problems", in the warning tone, the problems its
 * reason — as its Submission's row says.
 */
export function outcomeInTree(task: Task, below: ReadonlyMap<string, ReadonlyMap<string, number>>): Outcome {
  const own = taskOutcome(task);
  const counts = below.get(task.id);
  if (own.tone !== "good" || counts === undefined || counts.size === 0) return own;
  return {
    label: `${own.label} with problems`,
    tone: "warn",
    reason: `${problemText(counts)} below${own.reason ? `; ${own.reason}` : ""}`,
  };
}

/** What a Submission's row says: its status, with the problems of its tool calls, and whether it is open. */
export function submissionOutcome(
  submission: Submission,
  view: Pick<SessionView, "tasks">,
  now: number,
): Outcome & { problems: string } {
  const problems = problemText(problemsOf(submission, view.tasks));
  switch (submission.status) {
    case "succeeded":
      return problems
        ? { label: "succeeded with problems", tone: "warn", reason: problems, problems }
        : { label: "succeeded", tone: "good", problems };
    case "failed":
      return {
        label: "failed",
        tone: "bad",
        reason: submission.error ? `${submission.error.code}: ${submission.error.message}` : "failed",
        problems,
      };
    case "cancelled":
      return { label: "cancelled", tone: "warn", problems };
    default: {
      // Open: the record only says when it last changed; how long ago that is, is the honest part.
      const idle = now - submission.updatedAt;
      return {
        label: "open",
        tone: "active",
        reason: `no commit for ${formatAge(idle)} (last at ${new Date(submission.updatedAt).toISOString().slice(11, 19)})`,
        problems,
      };
    }
  }
}

/** A duration as people read it. */
export function formatAge(ms: number): string {
  if (ms < 0) return "0 s";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 120) return `${s} s`;
  const m = Math.floor(s / 60);
  return m < 120 ? `${m} min` : `${Math.floor(m / 60)} h`;
}

/** One thing recovery did in a commit, linked to the task it touched (if any). */
export interface RecoveryMark {
  readonly kind:
    | "epoch"
    | "restart"
    | "restart-limit"
    | "confirmed"
    | "ran-after-confirm"
    | "replayed"
    | "interrupted"
    | "unknown";
  readonly text: string;
  readonly taskId?: string;
}

/**
 * What recovery did in `change`, given the commit before it (`previous`, absent for the first held) and
 * each task's restart count before it (`restartsBefore`, updated by the caller as it walks the log).
 */
export function recoveryMarks(
  change: CommitRecord,
  previous: CommitRecord | undefined,
  restartsBefore: ReadonlyMap<string, number>,
): RecoveryMark[] {
  const marks: RecoveryMark[] = [];
  if (previous && change.epoch !== previous.epoch)
    marks.push({
      kind: "epoch",
      text: `new writer: epoch ${previous.epoch} → ${change.epoch}, after ${formatAge(change.at - previous.at)} without a commit`,
    });
  for (const task of change.tasks) {
    const before = restartsBefore.get(task.id) ?? 0;
    if (task.restarts > before)
      marks.push({
        kind: "restart",
        taskId: task.id,
        text: `${task.id}: counted restart ${task.restarts} (re-entered “${task.checkpoint.phase}”)`,
      });
    if (task.state.status === "failed" && task.state.error.code === "restart-limit")
      marks.push({ kind: "restart-limit", taskId: task.id, text: `${task.id}: failed at the restart limit` });
    if (task.state.status !== "succeeded" || !isToolResult(task.state.result)) continue;
    const outcome = toolOutcome(task.state.result);
    const kind = RECOVERED_BY[outcome.label];
    if (kind) marks.push({ kind, taskId: task.id, text: `${task.id}: ${outcome.label} — ${outcome.reason}` });
  }
  for (const entry of change.entries)
    if (entry.content.kind === "interrupted")
      marks.push({
        kind: "interrupted",
        ...(entry.taskId !== undefined && { taskId: entry.taskId }),
        text: `interrupted ${entry.content.of} output kept as a record: ${entry.content.reason}`,
      });
  return marks;
}

/** The tool outcomes that only recovery produces, as the mark each gives in the lane. */
const RECOVERED_BY: Readonly<Record<string, RecoveryMark["kind"]>> = {
  confirmed: "confirmed",
  "ran after confirm": "ran-after-confirm",
  replayed: "replayed",
  interrupted: "interrupted",
  unknown: "unknown",
};

/** Recovery marks of every held commit, by version (a walk of the log in order). */
export function recoveryLane(
  commits: readonly CommitRecord[],
  base: SessionView,
): Map<number, RecoveryMark[]> {
  const restarts = new Map(base.tasks.map((t) => [t.id, t.restarts]));
  const lane = new Map<number, RecoveryMark[]>();
  let previous: CommitRecord | undefined;
  for (const change of commits) {
    const marks = recoveryMarks(change, previous, restarts);
    if (marks.length > 0) lane.set(change.version, marks);
    for (const task of change.tasks) restarts.set(task.id, task.restarts);
    previous = change;
  }
  return lane;
}
