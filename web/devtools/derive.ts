/** What the devtools compute from views and commits: wake info, commit summaries, task tree layout. */
import { Graph, layout } from "@dagrejs/dagre";
import type { CommitRecord, SessionView, Task, WakeDetails } from "../../src/index.ts";
import { wakeInfoOf } from "../../src/index.ts";
import { taskOutcome } from "./outcome.ts";

/** Runnable now / next timed wake-up, by the kernel's own rule (`wakeInfoOf`), derived from a view. */
export function wakeOfView(view: SessionView): WakeDetails {
  const blocked = new Set(view.blocked.filter((b) => b.kind === "task").map((b) => b.id));
  return wakeInfoOf(view.tasks, blocked);
}

/** One line per thing a commit changed. */
export function describeCommit(change: CommitRecord): string[] {
  const lines: string[] = [];
  for (const s of change.submissions) lines.push(`submission ${s.id} → ${s.status}`);
  for (const e of change.entries) lines.push(`entry ${e.conversationId}#${e.seq} ${e.content.kind}`);
  for (const t of change.tasks) {
    const phase =
      t.state.status === "running" || t.state.status === "pending" ? ` @${t.checkpoint.phase}` : "";
    // A tool call answered with anything but a plain result says so: "succeeded" alone would hide it.
    const outcome = taskOutcome(t).label;
    const shown = t.state.status === "succeeded" && outcome !== "succeeded" ? ` (${outcome})` : "";
    lines.push(`task ${t.id} (${t.kind}) → ${t.state.status}${phase}${shown}`);
  }
  for (const d of change.documents)
    lines.push(
      `document ${d.id} → v${d.version} (${d.baseline !== undefined ? "baseline" : `${d.patch.length} ops`})`,
    );
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

/** A top-down layered layout of the task tree (parents above their children). */
export function layoutTasks(tasks: readonly Task[]): {
  nodes: LaidOutTask[];
  edges: { from: string; points: { x: number; y: number }[] }[];
  width: number;
  height: number;
} {
  const graph = new Graph();
  graph.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 38, marginx: 8, marginy: 8 });
  graph.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(tasks.map((t) => t.id));
  for (const task of tasks) graph.setNode(task.id, { width: NODE_WIDTH, height: NODE_HEIGHT });
  for (const task of tasks)
    if (task.parentId && ids.has(task.parentId)) graph.setEdge(task.parentId, task.id);
  layout(graph);
  const nodes = tasks.map((task) => {
    const node = graph.node(task.id);
    return { task, x: (node?.x ?? 0) - NODE_WIDTH / 2, y: (node?.y ?? 0) - NODE_HEIGHT / 2 };
  });
  const edges = graph.edges().map((e) => ({ from: e.v, points: graph.edge(e)?.points ?? [] }));
  const label = graph.graph();
  return { nodes, edges, width: label.width ?? 0, height: label.height ?? 0 };
}

/** `text` cut to at most `max` characters, an ellipsis last when it was cut. */
export const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** A commit time as `YYYY-MM-DD HH:MM:SS.mmm` (UTC), or a dash. */
export function formatTime(at: number | undefined): string {
  if (at === undefined) return "—";
  return new Date(at).toISOString().replace("T", " ").replace("Z", "");
}
