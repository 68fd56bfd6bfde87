/**
 * A unit of work's waterfall: each task of its tree as a bar from when it was created to when it ended
 * (or now, while it runs), on one time axis from the first task's start; waits on outside input marked.
 * Below it the run's token totals from its model entries, and an estimate of their cost when the page was
 * given prices (it says where they come from).
 */
import type { Entry, SessionView, Task } from "../../src/index.ts";
import { isTerminal } from "../../src/index.ts";
import { outcomeInTree, problemsBelow, taskTitle } from "./outcome.ts";
import { counted } from "./words.ts";

/** Dollars per million tokens of one model id (what `mountDevtools({ prices })` takes). */
export interface ModelPrice {
  readonly input: number;
  readonly output: number;
}

export interface TokenTotals {
  readonly model: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly calls: number;
}

/** Token totals per model of the model entries the tasks wrote (those the view holds). */
export function tokenTotals(view: SessionView, tasks: readonly Task[]): TokenTotals[] {
  const ids = new Set(tasks.map((t) => t.id));
  const byModel = new Map<string, TokenTotals>();
  const entries: Entry[] = view.conversations.flatMap((c) => [...c.entries]);
  for (const entry of entries) {
    const c = entry.content;
    if (c.kind !== "model" || entry.taskId === undefined || !ids.has(entry.taskId) || !c.usage) continue;
    const model = c.model ?? "model";
    const before = byModel.get(model) ?? { model, inputTokens: 0, outputTokens: 0, calls: 0 };
    byModel.set(model, {
      model,
      inputTokens: before.inputTokens + c.usage.inputTokens,
      outputTokens: before.outputTokens + c.usage.outputTokens,
      calls: before.calls + 1,
    });
  }
  return [...byModel.values()];
}

export function Waterfall(props: {
  tasks: readonly Task[];
  view: SessionView;
  now: number;
  prices?: Readonly<Record<string, ModelPrice>> | undefined;
  /** Where the prices come from (the cost is an estimate at them, and the page says so). */
  pricesFrom?: string | undefined;
}) {
  const tasks = [...props.tasks].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  if (tasks.length === 0) return null;
  const start = tasks[0]?.createdAt ?? 0;
  const endOf = (t: Task) => (isTerminal(t) ? t.updatedAt : Math.max(t.updatedAt, props.now));
  const span = Math.max(1, ...tasks.map((t) => endOf(t) - start));
  const totals = tokenTotals(props.view, props.tasks);
  const below = problemsBelow(props.tasks);
  const cost = totals.reduce<number | undefined>((sum, t) => {
    const price = props.prices?.[t.model];
    return price === undefined || sum === undefined
      ? undefined
      : sum + (t.inputTokens * price.input + t.outputTokens * price.output) / 1e6;
  }, 0);
  return (
    <section class="waterfall" aria-label="waterfall">
      <h4>Waterfall</h4>
      <ol data-testid="waterfall">
        {tasks.map((t) => {
          const from = t.createdAt - start;
          const took = endOf(t) - t.createdAt;
          const outcome = outcomeInTree(t, below);
          const waiting = t.state.status === "awaiting" ? " waiting" : "";
          return (
            <li key={t.id} data-task={t.id} data-start={from} data-ms={took}>
              <span class="label" title={t.id}>
                {taskTitle(t)} · {t.id.split("/").at(-1)}
              </span>
              <span class="track">
                <span
                  class={`bar tone-${outcome.tone}${waiting}`}
                  style={{
                    marginLeft: `${(from / span) * 100}%`,
                    width: `${Math.max(0.5, (took / span) * 100)}%`,
                  }}
                />
              </span>
              <span class="ms">
                +{from} ms · {took} ms{isTerminal(t) ? "" : " so far"}
              </span>
            </li>
          );
        })}
      </ol>
      {totals.length > 0 && (
        <p class="meta" data-testid="token-totals">
          {totals
            .map(
              (t) =>
                `${t.model}: ${counted(t.calls, "call")}, ${t.inputTokens} in / ${t.outputTokens} out tokens`,
            )
            .join(" · ")}{" "}
          (model entries the view holds)
          {cost !== undefined && (
            <span data-testid="cost-estimate">
              {" "}
              · estimated cost ${cost.toFixed(4)} at {props.pricesFrom ?? "the prices this page was given"}
            </span>
          )}
        </p>
      )}
    </section>
  );
}
