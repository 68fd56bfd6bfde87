/** The task tree as a laid-out graph, and the details of the selected task. */
import { useEffect, useMemo, useState } from "preact/hooks";
import { isTerminal, type SessionView, type Submission, type Task } from "../../src/index.ts";
import { clip, formatTime, layoutTasks, NODE_HEIGHT, NODE_WIDTH } from "./derive.ts";
import type { SessionHistory } from "./history.ts";
import { JsonView } from "./json-view.tsx";
import { type Outcome, outcomeInTree, problemsBelow, taskTitle } from "./outcome.ts";
import type { SessionSource } from "./session-source.ts";
import { VirtualList } from "./virtual-list.tsx";
import { type ModelPrice, Waterfall } from "./waterfall.tsx";
import { counted } from "./words.ts";
import { rootOf, storedItem, treeOf, type WorkItem, workItems } from "./work-items.ts";

/** The node's third line: where a live task stands, or how an ended one ended and why. */
function stateLine(task: Task, blocked: string | undefined, outcome: Outcome): string {
  if (blocked) return `blocked: ${blocked}`;
  const s = task.state;
  switch (s.status) {
    case "running":
    case "pending":
      return `${s.status} @${task.checkpoint.phase}`;
    case "sleeping":
      return `sleeping until ${formatTime(s.until).slice(11)}`;
    case "waiting":
      return `waits for ${counted(s.children.length, "child", "children")} (${s.policy}) → ${s.thenPhase}`;
    case "awaiting":
      return `awaits ${s.keys.length === 1 ? s.keys[0] : `${s.mode} of ${counted(s.keys.length, "key")}`} → ${s.thenPhase}`;
    case "completing":
      return `completing (${s.outcome})`;
    default:
      return outcome.reason ? `${outcome.label}: ${outcome.reason}` : outcome.label;
  }
}

/**
 * One unit of work's task tree at a time, picked from a list of every Submission (newest first, filtered by
 * status, searched by id, requestId or input): the layout is of that tree only, so following a long session
 * live stays cheap and the graph stays as wide as one turn.
 */
export function TaskGraph(props: {
  view: SessionView;
  history: SessionHistory;
  selected: string | undefined;
  onSelect: (taskId: string) => void;
  now: number;
  /** Pages of Submissions beyond the view's working set, and their trees, from storage (local sessions). */
  older?: Pick<SessionSource, "readSubmissions" | "readTaskTree"> | undefined;
  /** Dollars per million tokens by model id, for the waterfall's cost total. */
  prices?: Readonly<Record<string, ModelPrice>> | undefined;
  /** Where those prices come from, said beside the cost. */
  pricesFrom?: string | undefined;
}) {
  const { view } = props;
  const held = useMemo(() => workItems(view, props.now), [view, props.now]);
  // Older Submissions read from storage on request, and the tree of one of them.
  const [stored, setStored] = useState<
    { items: WorkItem[]; next: number | null; submissions: ReadonlyMap<string, Submission> } | undefined
  >(undefined);
  const [storedTree, setStoredTree] = useState<{ root: string; tasks: Task[] } | undefined>(undefined);
  const items = useMemo(() => {
    if (!stored) return held;
    const ids = new Set(held.map((i) => i.id));
    return [...held, ...stored.items.filter((i) => !ids.has(i.id))];
  }, [held, stored]);
  const loadOlder = async () => {
    const before = stored
      ? (stored.next ?? undefined)
      : Math.min(...held.map((i) => i.order).filter((o) => o > 0));
    const page = await props.older?.readSubmissions?.(Number.isFinite(before) ? before : undefined, 200);
    if (!page) return;
    setStored({
      items: [...(stored?.items ?? []), ...page.submissions.map((s) => storedItem(s))],
      next: page.next,
      submissions: new Map([
        ...(stored?.submissions ?? []),
        ...page.submissions.map((s) => [s.id, s] as const),
      ]),
    });
  };
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const [status, setStatus] = useState("all");
  const [query, setQuery] = useState("");
  // The item shown: the chosen one, else the one holding the selected task, else the newest.
  const selectedRoot = props.selected ? rootOf(view.tasks, props.selected) : undefined;
  const item =
    items.find((i) => i.id === chosen) ?? items.find((i) => i.rootTaskId === selectedRoot) ?? items[0];
  const inView = useMemo(() => treeOf(view.tasks, item?.rootTaskId), [view, item?.rootTaskId]);
  // An item from storage has no tasks in the view: its tree is read from storage (as stored now).
  const fromStorage = inView.length === 0 && item?.rootTaskId !== undefined && stored !== undefined;
  const tasks = fromStorage && storedTree?.root === item?.rootTaskId ? storedTree.tasks : inView;
  const wanted = fromStorage ? item?.rootTaskId : undefined;
  useEffect(() => {
    if (wanted === undefined || storedTree?.root === wanted) return;
    void props.older?.readTaskTree?.(wanted).then((found) => {
      setStoredTree({ root: wanted, tasks: found });
      // Its tree read, the item says how its tool calls ended ("succeeded with problems"), as a held one does.
      setStored(
        (now) =>
          now && {
            ...now,
            items: now.items.map((i) => {
              const submission = i.rootTaskId === wanted ? now.submissions.get(i.id) : undefined;
              return submission ? storedItem(submission, found, props.now) : i;
            }),
          },
      );
    });
  }, [wanted, storedTree?.root, props.older, props.now]);
  const graph = useMemo(() => layoutTasks(tasks), [tasks]);
  // A parent that succeeded over tool calls that did not is not drawn as a plain success.
  const below = useMemo(() => problemsBelow(tasks), [tasks]);
  const blocked = new Map(view.blocked.filter((b) => b.kind === "task").map((b) => [b.id, b.reason]));
  const selected = tasks.find((t) => t.id === props.selected);
  const needle = query.trim().toLowerCase();
  const matching = items.filter(
    (i) =>
      (status === "all" || i.status === status || (status === "problems" && i.problems)) &&
      (needle === "" || i.text.includes(needle)),
  );
  if (view.tasks.length === 0) return <p class="empty">No tasks at this version.</p>;
  return (
    <>
      <div class="split graph-split">
        <nav class="work-list" aria-label="submissions and root tasks">
          <label>
            status{" "}
            <select
              data-testid="work-status"
              value={status}
              onChange={(e) => setStatus(e.currentTarget.value)}
            >
              {["all", "running", "accepted", "succeeded", "problems", "failed", "cancelled"].map((s) => (
                <option key={s} value={s}>
                  {s === "problems" ? "succeeded with problems" : s}
                </option>
              ))}
            </select>
          </label>
          <input
            type="search"
            aria-label="search submissions"
            data-testid="work-search"
            placeholder="id, requestId or input"
            value={query}
            onInput={(e) => setQuery(e.currentTarget.value)}
          />
          <p class="meta" data-testid="work-count">
            {matching.length} of {items.length}
          </p>
          <VirtualList
            items={matching}
            list={{ "data-testid": "work-items" }}
            label={`${counted(matching.length, "submission or root task", "submissions and root tasks")}`}
            viewport={420}
            keyOf={(i) => i.id}
            estimate={() => 34}
            render={(i) => (
              <button
                type="button"
                aria-pressed={i.id === item?.id}
                data-item={i.id}
                onClick={() => setChosen(i.id)}
              >
                <span class={`status tone-${i.tone}`} data-testid="work-status-label" title={i.note}>
                  {i.statusLabel}
                </span>{" "}
                {i.label}
              </button>
            )}
          />
          {props.older?.readSubmissions && (stored === undefined || stored.next !== null) && (
            <button type="button" data-testid="load-older" onClick={() => void loadOlder()}>
              load older from storage
            </button>
          )}
          {stored && (
            <p class="meta" data-testid="older-note">
              {stored.items.length} older read from storage{stored.next === null ? " (all of them)" : ""}
              {"; "}shown as stored now, whatever version is scrubbed to; whether one that succeeded had
              problems is read when it is opened
            </p>
          )}
        </nav>
        <section
          class="graph"
          // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling area must take focus to be scrolled by keyboard
          tabIndex={0}
          aria-label={`task tree of ${item?.label ?? "nothing"}`}
        >
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
              const outcome = outcomeInTree(task, below);
              const tone = blocked.has(task.id) ? "bad" : outcome.tone;
              const kind = `${clip(taskTitle(task), 30)}${task.restarts > 0 ? ` ↻${task.restarts}` : ""}`;
              const id = task.id.length > 30 ? `…${task.id.slice(-29)}` : task.id;
              const line = stateLine(task, blocked.get(task.id), outcome);
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
        </section>
        <aside class="details" data-testid="task-details">
          {selected ? (
            <TaskDetails task={selected} history={props.history} outcome={outcomeInTree(selected, below)} />
          ) : (
            <p class="empty">Select a task.</p>
          )}
        </aside>
      </div>
      <Waterfall
        tasks={tasks}
        view={view}
        now={props.now}
        prices={props.prices}
        pricesFrom={props.pricesFrom}
      />
    </>
  );
}

function TaskDetails({ task, history, outcome }: { task: Task; history: SessionHistory; outcome: Outcome }) {
  const states = history.taskHistory(task.id);
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
        <dt>took</dt>
        <dd data-testid="task-took">
          {task.updatedAt - task.createdAt} ms{isTerminal(task) ? "" : " so far"} (created{" "}
          {formatTime(task.createdAt).slice(11)})
        </dd>
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
      <JsonView value={task.input} label="input" testId="task-input" />
      <h4>Checkpoint</h4>
      <JsonView value={task.checkpoint} label="checkpoint" testId="task-checkpoint" />
      <h4>State</h4>
      <JsonView value={task.state} label="state" testId="task-state" />
      <h4>History</h4>
      <ol class="history" data-testid="task-history">
        {states.map((s) => (
          <li key={s.version}>
            v{s.version} · {formatTime(s.at).slice(11)} · {s.task.state.status} @{s.task.checkpoint.phase}
            {s.task.restarts > 0 ? ` · restarts ${s.task.restarts}` : ""}
            {history
              .commit(s.version)
              ?.signals?.filter((signal) => signal.consumedBy === task.id)
              .map((signal) => (
                <span key={signal.key} class="took-signal" data-testid="task-took-signal">
                  {" "}
                  · took signal {signal.key} from request {signal.requestId}:{" "}
                  {clip(JSON.stringify(signal.payload), 80)}
                </span>
              ))}
          </li>
        ))}
      </ol>
    </>
  );
}
