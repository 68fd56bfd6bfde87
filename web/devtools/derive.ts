/** What the devtools compute from views and commits: wake info, commit summaries, task tree layout. */
import type { CommitRecord, SessionView, Task, WakeDetails } from "../../src/index.ts";
import { wakeInfoOf } from "../../src/index.ts";
import { problemText, taskOutcome } from "./outcome.ts";
import { counted } from "./words.ts";

/** Runnable now / next timed wake-up, by the kernel's own rule (`wakeInfoOf`), derived from a view. */
export function wakeOfView(view: SessionView): WakeDetails {
  const blocked = new Set(view.blocked.filter((b) => b.kind === "task").map((b) => b.id));
  return wakeInfoOf(view.tasks, blocked);
}

/**
 * One line per thing a commit changed. `below` (`problemsBelow` of the tasks known now) marks a Submission
 * or task that succeeded over tool calls that did not: "succeeded" alone would hide them.
 */
export function describeCommit(
  change: CommitRecord,
  below: ReadonlyMap<string, ReadonlyMap<string, number>> = new Map(),
): string[] {
  const lines: string[] = [];
  const problems = (status: string, taskId: string | undefined) => {
    const counts = taskId === undefined ? undefined : below.get(taskId);
    return status === "succeeded" && counts ? ` with problems (${problemText(counts)} below)` : "";
  };
  for (const s of change.submissions)
    lines.push(`submission ${s.id} → ${s.status}${problems(s.status, s.taskId)}`);
  for (const e of change.entries) lines.push(`entry ${e.conversationId}#${e.seq} ${e.content.kind}`);
  for (const t of change.tasks) {
    const phase =
      t.state.status === "running" || t.state.status === "pending" ? ` @${t.checkpoint.phase}` : "";
    // A tool call answered with anything but a plain result says so: "succeeded" alone would hide it.
    const outcome = taskOutcome(t).label;
    const shown = t.state.status === "succeeded" && outcome !== "succeeded" ? ` (${outcome})` : "";
    lines.push(
      `task ${t.id} (${t.kind}) → ${t.state.status}${phase}${shown}${problems(t.state.status, t.id)}`,
    );
  }
  for (const d of change.documents)
    lines.push(
      `document ${d.id} → v${d.version} (${d.baseline !== undefined ? "baseline" : counted(d.patch.length, "op")})`,
    );
  return lines;
}

/** A signal a commit took in or dropped, as the timeline says it: who sent it, what, and which task took it. */
export interface SignalLine {
  /** `received`: accepted, no wait took it yet; `taken`: a task's wait took it; `dropped`: kept, then dropped. */
  readonly kind: "received" | "taken" | "dropped";
  readonly key: string;
  readonly text: string;
  /** The task whose wait took it. */
  readonly taskId?: string;
}

/** How much of a signal's payload a line shows. */
const PAYLOAD_SHOWN = 160;

/**
 * The signals a commit accepted or a wait took (`signals`), and the early ones it dropped (`droppedSignals`),
 * one line each: an approval's key, who sent it (its requestId), its payload, and the task it answered.
 */
export function describeSignals(change: CommitRecord): SignalLine[] {
  const lines: SignalLine[] = [];
  for (const { key, version } of change.droppedSignals ?? [])
    lines.push({
      kind: "dropped",
      key,
      text: `${key}: early signal accepted at v${version} dropped, no wait took it`,
    });
  for (const signal of change.signals ?? []) {
    const payload = clip(JSON.stringify(signal.payload), PAYLOAD_SHOWN);
    const from = `from request ${signal.requestId}`;
    const when =
      signal.version === change.version
        ? ""
        : ` (received at v${signal.version}, ${formatTime(signal.receivedAt)})`;
    lines.push(
      signal.consumedBy === undefined
        ? {
            kind: "received",
            key: signal.key,
            text: `${signal.key} ${from}: ${payload}; no wait takes it yet, kept`,
          }
        : {
            kind: "taken",
            key: signal.key,
            taskId: signal.consumedBy,
            text: `${signal.key} ${from}${when}: ${payload}; taken by ${signal.consumedBy}`,
          },
    );
  }
  return lines;
}

/** A task node placed by the layout (top-left corner). */
export interface LaidOutTask {
  readonly task: Task;
  readonly x: number;
  readonly y: number;
}

/** Size of one task node in the graph, in CSS pixels. */
export const NODE_WIDTH = 210;
export const NODE_HEIGHT = 58;

/** Space around the drawing, between siblings, and between a parent's row and its children's. */
const MARGIN = 10;
const SIBLING_GAP = 18;
const ROW_GAP = 38;

/** Siblings in the order they were started: their place among the parent's children, then creation. */
function siblingOrder(a: Task, b: Task): number {
  return (
    (a.childIndex ?? Number.MAX_SAFE_INTEGER) - (b.childIndex ?? Number.MAX_SAFE_INTEGER) ||
    (a.createdVersion ?? 0) - (b.createdVersion ?? 0) ||
    a.createdAt - b.createdAt ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}

/**
 * A top-down tree layout: each leaf takes the next place from the left, in the order the tasks were
 * started (mail-0 before mail-4), and a parent sits centred over its first and last child. Edges go down
 * from a parent's bottom to each child's top, at right angles.
 */
export function layoutTasks(tasks: readonly Task[]): {
  nodes: LaidOutTask[];
  edges: { from: string; points: { x: number; y: number }[] }[];
  width: number;
  height: number;
} {
  const ids = new Set(tasks.map((t) => t.id));
  const children = new Map<string, Task[]>();
  const roots: Task[] = [];
  for (const task of tasks) {
    if (task.parentId === undefined || !ids.has(task.parentId)) roots.push(task);
    else {
      const siblings = children.get(task.parentId);
      if (siblings) siblings.push(task);
      else children.set(task.parentId, [task]);
    }
  }
  const nodes: LaidOutTask[] = [];
  const edges: { from: string; points: { x: number; y: number }[] }[] = [];
  let nextLeft = MARGIN;
  let deepest = 0;
  const rowTop = (depth: number) => MARGIN + depth * (NODE_HEIGHT + ROW_GAP);
  /** Places `task` and its subtree, children first (a stack, not recursion: a chain may be deep). */
  const place = (root: Task): void => {
    const centreOf = new Map<string, number>();
    const stack: { task: Task; depth: number; kids?: Task[] }[] = [{ task: root, depth: 0 }];
    while (stack.length > 0) {
      const frame = stack[stack.length - 1] as { task: Task; depth: number; kids?: Task[] };
      if (frame.kids === undefined) {
        frame.kids = [...(children.get(frame.task.id) ?? [])].sort(siblingOrder);
        // Pushed last to first, so the first child is placed first (leftmost).
        for (let i = frame.kids.length - 1; i >= 0; i--)
          stack.push({ task: frame.kids[i] as Task, depth: frame.depth + 1 });
        continue;
      }
      stack.pop();
      const { task, depth, kids } = frame;
      deepest = Math.max(deepest, depth);
      const centres = kids.map((kid) => centreOf.get(kid.id) ?? 0);
      let centre: number;
      if (centres.length === 0) {
        centre = nextLeft + NODE_WIDTH / 2;
        nextLeft += NODE_WIDTH + SIBLING_GAP;
      } else centre = ((centres[0] ?? 0) + (centres.at(-1) ?? 0)) / 2;
      centreOf.set(task.id, centre);
      const top = rowTop(depth);
      nodes.push({ task, x: centre - NODE_WIDTH / 2, y: top });
      const middle = top + NODE_HEIGHT + ROW_GAP / 2;
      for (const x of centres)
        edges.push({
          from: task.id,
          points: [
            { x: centre, y: top + NODE_HEIGHT },
            { x: centre, y: middle },
            { x, y: middle },
            { x, y: rowTop(depth + 1) },
          ],
        });
    }
  };
  for (const root of [...roots].sort(siblingOrder)) place(root);
  // In reading order (rows top to bottom, left to right): the order Tab moves through the nodes.
  nodes.sort((a, b) => a.y - b.y || a.x - b.x);
  return {
    nodes,
    edges,
    width: tasks.length === 0 ? 0 : nextLeft - SIBLING_GAP + MARGIN,
    height: tasks.length === 0 ? 0 : rowTop(deepest) + NODE_HEIGHT + MARGIN,
  };
}

/** `text` cut to at most `max` characters, an ellipsis last when it was cut. */
export const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** A commit time as `YYYY-MM-DD HH:MM:SS.mmm` (UTC), or a dash. */
export function formatTime(at: number | undefined): string {
  if (at === undefined) return "—";
  return new Date(at).toISOString().replace("T", " ").replace("Z", "");
}
