/** The task tree as a laid-out graph (dagre), and the details of the selected task. */
import { useMemo } from "preact/hooks";
import type { SessionView, Task } from "../../src/index.ts";
import { formatTime, layoutTasks, NODE_HEIGHT, NODE_WIDTH } from "./derive.ts";
import type { SessionHistory } from "./history.ts";
import { taskOutcome, taskTitle } from "./outcome.ts";

/** The node's third line: where a live task stands, or how an ended one ended and why. */
function stateLine(task: Task, blocked: string | undefined): string {
  if (blocked) return `blocked: ${blocked}`;
  const s = task.state;
  switch (s.status) {
    case "running":
    case "pending":
      return `${s.status} @${task.checkpoint.phase}`;
    case "sleeping":
      return `sleeping until ${formatTime(s.until).slice(11)}`;
    case "waiting":
      return `waits ${s.children.length} (${s.policy}) → ${s.thenPhase}`;
    case "awaiting":
      return `awaits ${s.keys.length === 1 ? s.keys[0] : `${s.mode} of ${s.keys.length} keys`} → ${s.thenPhase}`;
    case "completing":
      return `completing (${s.outcome})`;
    default: {
      const outcome = taskOutcome(task);
      return outcome.reason ? `${outcome.label}: ${outcome.reason}` : outcome.label;
    }
  }
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

export function TaskGraph(props: {
  view: SessionView;
  history: SessionHistory;
  selected: string | undefined;
  onSelect: (taskId: string) => void;
}) {
  const { view } = props;
  const graph = useMemo(() => layoutTasks(view.tasks), [view]);
  const blocked = new Map(view.blocked.filter((b) => b.kind === "task").map((b) => [b.id, b.reason]));
  const selected = view.tasks.find((t) => t.id === props.selected);
  if (view.tasks.length === 0) return <p class="empty">No tasks at this version.</p>;
  return (
    <div class="split graph-split">
      <div class="graph">
        <svg
          data-testid="task-graph"
          width={graph.width}
          height={graph.height}
          viewBox={`0 0 ${graph.width} ${graph.height}`}
          aria-label="task tree"
        >
          {graph.edges.map((edge, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: a layout's edges are rebuilt whole on every change
            <polyline key={i} class="edge" points={edge.points.map((p) => `${p.x},${p.y}`).join(" ")} />
          ))}
          {graph.nodes.map(({ task, x, y }) => {
            const status = blocked.has(task.id) ? "blocked" : task.state.status;
            const outcome = taskOutcome(task);
            const tone = blocked.has(task.id) ? "bad" : outcome.tone;
            const kind = `${clip(taskTitle(task), 30)}${task.restarts > 0 ? ` ↻${task.restarts}` : ""}`;
            const id = task.id.length > 30 ? `…${task.id.slice(-29)}` : task.id;
            const line = stateLine(task, blocked.get(task.id));
            const activate = () => props.onSelect(task.id);
            return (
              // biome-ignore lint/a11y/useSemanticElements: an SVG node cannot be a <button>; it takes focus and Enter
              <g
                key={task.id}
                class={`node ${status} tone-${tone}${task.id === props.selected ? " selected" : ""}`}
                transform={`translate(${x},${y})`}
                // Lowercase: on SVG, Preact writes attributes as spelled, and only `tabindex` makes it focusable.
                tabindex={0}
                role="button"
                data-task={task.id}
                data-status={status}
                data-outcome={outcome.label}
                // The name is the visible text as written (clipped parts included), then the whole.
                aria-label={`${kind} ${id} ${clip(line, 34)}${id !== task.id || clip(line, 34) !== line ? ` (${task.id}: ${line})` : ""}`}
                onClick={activate}
                onKeyDown={(e) => {
                  if (e.key === "Enter" || e.key === " ") {
                    e.preventDefault();
                    activate();
                  }
                }}
              >
                <rect width={NODE_WIDTH} height={NODE_HEIGHT} rx={6} />
                {/* One text element, its lines spaced: its text reads as the name does. */}
                <text>
                  <tspan x={8} y={17} class="kind">
                    {kind}
                  </tspan>{" "}
                  <tspan x={8} y={33} class="id">
                    {id}
                  </tspan>{" "}
                  <tspan x={8} y={49} class="state">
                    {clip(line, 34)}
                  </tspan>
                </text>
              </g>
            );
          })}
        </svg>
      </div>
      <aside class="details" data-testid="task-details">
        {selected ? (
          <TaskDetails task={selected} history={props.history} />
        ) : (
          <p class="empty">Select a task.</p>
        )}
      </aside>
    </div>
  );
}

function TaskDetails({ task, history }: { task: Task; history: SessionHistory }) {
  const states = history.taskHistory(task.id);
  const outcome = taskOutcome(task);
  return (
    <>
      <h3>
        {task.kind} v{task.kindVersion}
      </h3>
      <dl>
        <dt>id</dt>
        <dd>{task.id}</dd>
        <dt>status</dt>
        <dd>{task.state.status}</dd>
        <dt>outcome</dt>
        <dd data-testid="task-outcome" class={`tone-${outcome.tone}`}>
          {outcome.label}
        </dd>
        {outcome.reason && (
          <>
            <dt>why</dt>
            <dd class="reason" data-testid="task-reason">
              {outcome.reason}
            </dd>
          </>
        )}
        <dt>phase</dt>
        <dd>{task.checkpoint.phase}</dd>
        <dt>attempts / restarts</dt>
        <dd>
          {task.attempts} / {task.restarts}
        </dd>
        {task.parentId && (
          <>
            <dt>parent</dt>
            <dd>{task.parentId}</dd>
          </>
        )}
        {task.cancelRequested && (
          <>
            <dt>cancel requested</dt>
            <dd>{task.cancelRequested}</dd>
          </>
        )}
      </dl>
      <h4>Input</h4>
      <pre>{JSON.stringify(task.input, null, 2)}</pre>
      <h4>Checkpoint</h4>
      <pre>{JSON.stringify(task.checkpoint, null, 2)}</pre>
      <h4>State</h4>
      <pre>{JSON.stringify(task.state, null, 2)}</pre>
      <h4>History</h4>
      <ol class="history" data-testid="task-history">
        {states.map((s) => (
          <li key={s.version}>
            v{s.version} · {formatTime(s.at).slice(11)} · {s.task.state.status} @{s.task.checkpoint.phase}
            {s.task.restarts > 0 ? ` · restarts ${s.task.restarts}` : ""}
          </li>
        ))}
      </ol>
    </>
  );
}
