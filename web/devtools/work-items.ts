/**
 * The devtools show one unit of work at a time: a Submission's task tree, or a root task started without
 * one. A session of 20,000 Submissions would otherwise lay all their trees out in one row on every commit.
 */
import type { SessionView, Submission, Task } from "../../src/index.ts";
import { outcomeInTree, problemsBelow, submissionOutcome } from "./outcome.ts";

export { treeOf } from "./tree.ts";

/** One unit of work, newest first in lists. */
export interface WorkItem {
  /** The Submission's id, or the root task's. */
  readonly id: string;
  readonly label: string;
  readonly status: string;
  /** How it ended as the Submissions view says it ("succeeded with problems"), or its status. */
  readonly statusLabel: string;
  readonly tone: string;
  readonly rootTaskId: string | undefined;
  readonly order: number;
  readonly text: string;
  /** It succeeded, but some of its tool calls did not end plainly ok. */
  readonly problems: boolean;
  /** What its status label leaves out (a stored one's tool calls not read yet). */
  readonly note?: string;
}

/** Every unit of work in the view, newest first. */
export function workItems(view: SessionView, now: number): WorkItem[] {
  const items: WorkItem[] = [];
  const roots = new Set<string>();
  for (const s of view.submissions) {
    const outcome = submissionOutcome(s, view, now);
    if (s.taskId) roots.add(s.taskId);
    items.push({
      id: s.id,
      label: `${s.requestId} · ${s.id}`,
      status: s.status,
      statusLabel: outcome.label,
      tone: outcome.tone,
      rootTaskId: s.taskId,
      order: s.acceptedVersion ?? 0,
      text: `${s.id} ${s.requestId} ${inputText(s)} ${outcome.label} ${outcome.problems}`.toLowerCase(),
      problems: s.status === "succeeded" && outcome.problems !== "",
    });
  }
  const below = problemsBelow(view.tasks);
  for (const task of view.tasks)
    if (task.parentId === undefined && !roots.has(task.id)) {
      const outcome = outcomeInTree(task, below);
      items.push({
        id: task.id,
        label: `task ${task.kind} · ${task.id}`,
        status: task.state.status,
        statusLabel: outcome.label,
        tone: outcome.tone,
        rootTaskId: task.id,
        order: task.createdVersion ?? 0,
        text: `${task.id} ${task.kind} ${task.state.status} ${outcome.label}`.toLowerCase(),
        problems: task.state.status === "succeeded" && below.has(task.id),
      });
    }
  return items.sort((a, b) => b.order - a.order || (a.id < b.id ? 1 : -1));
}

/** How a Submission read from storage looks by its status alone, before its tasks are read. */
const STORED_TONE: Readonly<Record<string, string>> = { failed: "bad", cancelled: "warn" };

/**
 * A Submission read from storage (beyond the view). Until its tree is read (`tasks`: when it is opened),
 * one that succeeded is not shown as a plain success: whether its tool calls ended well is not known yet.
 */
export function storedItem(s: Submission, tasks?: readonly Task[], now = s.updatedAt): WorkItem {
  const outcome = tasks ? submissionOutcome(s, { tasks }, now) : undefined;
  const unread = !tasks && s.status === "succeeded";
  return {
    id: s.id,
    label: `${s.requestId} · ${s.id}`,
    status: s.status,
    statusLabel: outcome?.label ?? s.status,
    tone: outcome?.tone ?? (unread ? "unread" : (STORED_TONE[s.status] ?? "active")),
    ...(unread && { note: "how its tool calls ended is read when it is opened" }),
    rootTaskId: s.taskId,
    order: s.acceptedVersion ?? 0,
    text: `${s.id} ${s.requestId} ${inputText(s)} ${outcome?.label ?? s.status}`.toLowerCase(),
    problems: s.status === "succeeded" && (outcome?.problems ?? "") !== "",
  };
}

function inputText(s: Submission): string {
  return typeof s.input === "string" ? s.input : JSON.stringify(s.input);
}

/** The unit of work a task belongs to (its root's item), for selecting a task by id. */
export function rootOf(tasks: readonly Task[], taskId: string): string | undefined {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  let task = byId.get(taskId);
  while (task?.parentId !== undefined) task = byId.get(task.parentId);
  return task?.id;
}
