/**
 * The hands apart from the brain (issue 21): a host that does not own a session runs the tool calls that
 * wait for its kind of host (`runsOn`) and reports them back, through three marks its owner commits —
 * *accepted* (the call records its executor and a lease: `run-on:` signal with `executor`), *completed*
 * (the executor's report is stored: `done:` signal), *applied* (the owner's tool task writes the result
 * entry the model reads and ends). Recovery knows which mark is missing: a call accepted but not reported
 * within its lease goes back to waiting with its replay rules (an unsafe one is confirmed by operation id
 * before it runs again), and a report that comes after its lease is refused, so it is never applied twice.
 */
import { systemTimers, type Timers } from "../clock.ts";
import { ensureError, isSettledElsewhere } from "../errors.ts";
import type { Json } from "../records/schemas.ts";
import type { PendingWait } from "../session/pending.ts";
import type { ToolDefinition } from "./define-tool.ts";
import { DEFAULT_LEASE_MS, type HostKind } from "./placement.ts";
import { type Intent, isUnsafe, runByRules, type ToolOutcome, unavailableResult } from "./tool-finish.ts";

/** Where an executor finds calls and reports them: a session in process, or one over HTTP. */
export interface ExecutorTarget {
  /**
   * The session's pending waits (`session.pending()`, `GET …/pending`): those whose key starts with `prefix`
   * at least (a target may list others too; the executor picks its own).
   */
  pending(prefix?: string): Promise<readonly PendingWait[]> | readonly PendingWait[];
  /** Outside input (`session.signal`, `POST …/signals/:key`). */
  signal(key: string, payload: Json, options: { requestId: string }): Promise<unknown>;
}

export interface ExecutorOptions {
  /** The kind of host this executor is: it takes calls of tools that run there. */
  readonly host: HostKind;
  /** Its name, unique per executor instance, recorded with each call it accepts (and in its result). */
  readonly executor: string;
  /** The tools it can run (the same definitions the owner's agent declares). */
  // biome-ignore lint/suspicious/noExplicitAny: tools of any argument type
  readonly tools: readonly ToolDefinition<any>[];
  /** How long a call it accepts stays its own without a report (default 60 s). */
  readonly leaseMs?: number;
  /** How long to wait for the owner to record an acceptance before giving the call up (default 10 s). */
  readonly acceptWaitMs?: number;
  readonly timers?: Timers;
}

/** One call an executor took: its wait key, and whether its report was applied or came too late. */
export interface ExecutedCall {
  readonly key: string;
  readonly tool: string;
  /** `interrupted` and not reported: an unsafe call stopped while it ran, left to its lease's end. */
  readonly outcome: ReportedOutcome;
  /**
   * False: the lease had ended (the call went on without this report), the acceptance was lost, or an
   * unsafe call was stopped mid-run (it may have taken effect): the executor leaves it to its lease's end,
   * after which the call waits again marked as possibly run and the next host confirms it by operation id.
   */
  readonly reported: boolean;
}

/** The outcomes an executor reports (a call it runs is never `rejected`). */
type ReportedOutcome = Exclude<ToolOutcome, "rejected">;

/** What a waiting call tells its executor (see `placedAbout` in the tool task). */
interface PlacedCall {
  readonly tool: string;
  readonly arguments: Json;
  readonly runsOn: HostKind | null;
  readonly operationId: string;
  readonly replay: "safe" | "unsafe";
  readonly recovering: boolean;
  readonly acceptedBy?: string;
}

/**
 * Takes every call waiting for this kind of host whose tool it has, one after another: accepts it, runs it
 * (or, for a call that may have run elsewhere before, confirms or replays it by its rules), and reports the
 * outcome. Calls another executor or the owner took first are left alone. Returns what it did.
 */
export async function executePlacedCalls(
  target: ExecutorTarget,
  options: ExecutorOptions,
): Promise<ExecutedCall[]> {
  const tools = new Map(options.tools.map((tool) => [tool.name, tool as ToolDefinition<unknown>]));
  const done: ExecutedCall[] = [];
  for (const wait of await target.pending("run-on:")) {
    const call = wait.about as unknown as PlacedCall | undefined;
    const tool = call ? tools.get(call.tool) : undefined;
    if (!wait.key.startsWith("run-on:") || !call || !tool || call.runsOn !== options.host) continue;
    const executed = await executeOne(target, wait, call, tool, options);
    if (executed) done.push(executed);
  }
  return done;
}

async function executeOne(
  target: ExecutorTarget,
  wait: PendingWait,
  call: PlacedCall,
  tool: ToolDefinition<unknown>,
  options: ExecutorOptions,
): Promise<ExecutedCall | undefined> {
  const { executor } = options;
  const timers = options.timers ?? systemTimers;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  // This executor's own view of its lease (the owner's starts a little later, when it records it): the
  // tool is asked to stop before it ends, and not started when it already has.
  const lease = new AbortController();
  const expiry = timers.setTimeout(
    () => lease.abort(new Error("the executor's lease on this call ended")),
    leaseMs * 0.8,
  );
  try {
    try {
      const payload = { host: options.host, executor, leaseMs };
      const receipt = await target.signal(wait.key, payload, { requestId: `${wait.key}:${executor}` });
      // Someone under the same name accepted it first: executor names must be unique per instance.
      if ((receipt as { duplicate?: boolean } | undefined)?.duplicate === true) return undefined;
    } catch (error) {
      if (isSettledElsewhere(error)) return undefined; // the owner or another executor took it first
      throw error;
    }
    // Accepted: the owner's tool task now waits for this executor's report, under a key of its own.
    const report = await reportKeyOf(target, wait.taskId, executor, options);
    if (report === undefined || lease.signal.aborted)
      return { key: wait.key, tool: tool.name, outcome: "error", reported: false };
    const result = await run(call, tool, lease.signal);
    if (result === undefined)
      return { key: wait.key, tool: tool.name, outcome: "interrupted", reported: false };
    try {
      await target.signal(report, { executor, ...result }, { requestId: report });
      return { key: wait.key, tool: tool.name, outcome: result.outcome, reported: true };
    } catch (error) {
      if (isSettledElsewhere(error))
        return { key: wait.key, tool: tool.name, outcome: result.outcome, reported: false };
      throw error;
    }
  } finally {
    timers.clearTimeout(expiry);
  }
}

/** The key the owner's tool task waits on for this executor's report, once it recorded the acceptance. */
async function reportKeyOf(
  target: ExecutorTarget,
  taskId: string,
  executor: string,
  options: ExecutorOptions,
): Promise<string | undefined> {
  const timers = options.timers ?? systemTimers;
  const poll = 20;
  for (let waited = 0; ; waited += poll) {
    for (const wait of await target.pending("done:")) {
      const about = wait.about as unknown as PlacedCall | undefined;
      if (wait.taskId === taskId && wait.key.startsWith("done:") && about?.acceptedBy === executor)
        return wait.key;
    }
    if (waited >= (options.acceptWaitMs ?? 10_000)) return undefined;
    await new Promise<void>((resolve) => timers.setTimeout(resolve, poll));
  }
}

/**
 * Runs the call here by the same rules its owner would: recovery first for a call that may have run. Returns
 * undefined for an unsafe call stopped while it ran (at 80% of its lease, or its `confirm` threw): it may
 * have taken effect, and reporting that as an error would invite the model to call it again; unreported,
 * the call goes back to waiting at its lease's end, marked as possibly run, and is confirmed by its
 * operation id (or ends `interrupted`) by the next host that takes it.
 */
async function run(
  call: PlacedCall,
  tool: ToolDefinition<unknown>,
  signal: AbortSignal,
): Promise<ExecutedResult | undefined> {
  const args = tool.input.safeParse(call.arguments);
  const intent: Intent = { args: call.arguments, replay: call.replay, operationId: call.operationId };
  // Never an error for an unsafe call that may have run before (`recovering`): its outcome stays open.
  if (!args.success || !tool.execute)
    return unavailableResult(tool.name, intent, tool, call.recovering) as ExecutedResult;
  try {
    const result = await runByRules(tool, args.data, intent, call.recovering, {
      signal,
      interrupted: () => ({
        outcome: "interrupted",
        output: {
          error: `the outcome of ${tool.name} is unknown: its executor stopped reporting, and it is not safe to re-run`,
        },
        via: "unknown",
      }),
    });
    return result as ExecutedResult;
  } catch (error) {
    if (isUnsafe(call, tool)) return undefined;
    // A replay-safe call stopped at its lease's end: an error the model may simply retry (the owner refuses
    // the report if the lease is already over, and the call then follows its replay rules).
    const why = ensureError(error).message;
    return { outcome: "error", output: { error: `${why}; it is safe to call again` }, via: "run" };
  }
}

type ExecutedVia = "run" | "replay" | "confirm" | "run-after-confirm" | "unknown";
type ExecutedResult = { outcome: ReportedOutcome; output: Json; via: ExecutedVia };
