/**
 * The tool task (DESIGN §5): `call` resolves and validates the model's arguments, then commits final
 * arguments, replay policy and intent with a stable operation id; `execute` runs the tool outside any
 * commit, and is also the recovery entry for "intent saved, outcome unknown".
 */
import { z } from "zod";
import { compiled, type Json, type Task } from "../records/schemas.ts";
import { ApprovalSchema, CallReportSchema, RunOnSchema } from "../signals/define-signal.ts";
import {
  type CancelStage,
  defineTask,
  type GiveUpData,
  type PhaseContext,
  type Received,
  type TaskDefinition,
} from "../tasks/define-task.ts";
import { exclusiveCallKey, precheckProblem, readArguments, type ToolDefinition } from "./define-tool.ts";
import { DEFAULT_LEASE_MS, doneKey, isDoneKey, runOnKey, runsHere } from "./placement.ts";
import { endedAnswer, mayHaveStarted } from "./tool-answers.ts";
import {
  finish,
  type Intent,
  isUnsafe,
  progressDocumentId,
  recoveryOf,
  runByRules,
  storedResult,
  TOOL_PROGRESS_DOCUMENT,
  unavailableResult,
} from "./tool-finish.ts";

export const TOOL_TASK = "agent.tool";
// Compiled at module level, like GenerateInputSchema (createAgent may run inside a workerd request).
export const ToolTaskInputSchema = compiled(
  z.object({
    toolCallId: z.string(),
    name: z.string(),
    /** Raw arguments as the model produced them. */
    args: z.string(),
    conversationId: z.string(),
  }),
);
export type ToolTaskInput = z.infer<typeof ToolTaskInputSchema>;

/** A call waiting for a host of another kind, or taken by one. */
type Placed = Intent & { recovering?: boolean };

/** What a call waiting for a host of another kind shows (pending views) and tells an executor. */
function placedAbout(input: ToolTaskInput, tool: ToolDefinition<unknown>, intent: Placed) {
  return {
    tool: tool.name,
    toolCallId: input.toolCallId,
    arguments: intent.args,
    runsOn: tool.runsOn ?? null,
    operationId: intent.operationId,
    replay: intent.replay,
    recovering: intent.recovering === true,
  };
}

/** The checkpoint data of each phase of a tool task. */
type ToolPhases = {
  call: null;
  decided: Received<Intent>;
  collect: null;
  /** `recovering`: a call that had started before it waited for a host of another kind. */
  execute: Placed;
  placed: Received<Placed>;
  /** Taken by an executor: its report (`done:`), or the end of its lease. */
  completed: Received<Placed & { executor: string }>;
  unreported: Received<Placed & { executor: string }>;
  settle: GiveUpData;
};

/** The signal key a tool call that asks for approval waits on. */
export const approvalKey = (toolTaskId: string) => `approval:${toolTaskId}`;

/** The tool task kind, resolving tools by name from `tools`. */
export function toolTask(
  tools: ReadonlyMap<string, ToolDefinition<unknown>>,
): TaskDefinition<ToolTaskInput, ToolPhases> {
  return defineTask<ToolTaskInput, ToolPhases>({
    kind: TOOL_TASK,
    version: 1,
    input: ToolTaskInputSchema,
    maxRestarts: (task) => tools.get((task.input as { name?: string }).name ?? "")?.maxRestarts,
    exclusiveKey: (task) => exclusiveCallKey(tools, task), // an exclusive tool runs one call at a time
    // At the restart limit a tool call still learns the truth before it gives up (DESIGN §4).
    onRestartLimit: "settle",
    describeRecovery: (task, situation) => {
      const name = (task.input as { name?: string }).name ?? "?";
      if (situation === "restart-limit") {
        if (task.checkpoint.phase !== "execute") return `${name}: end as not run (it never started)`;
        const { operationId } = task.checkpoint.data as unknown as Intent;
        return tools.get(name)?.confirm
          ? `${name}: never run again; confirm by operation id ${operationId} whether it took effect`
          : `${name}: never run again; end as unknown (no way to confirm it)`;
      }
      if (task.checkpoint.phase !== "execute")
        return `${name}: validate the arguments and run it (it never started)`;
      const intent = task.checkpoint.data as unknown as Intent;
      const tool = tools.get(name);
      if (!tool?.execute || !tool.input.safeParse(intent.args).success)
        return `${name}: end ${isUnsafe(intent, tool ?? intent) ? "as unknown" : "with an error"} (this version cannot run the call; it may have run)`;
      switch (recoveryOf(intent, tool)) {
        case "replay":
          return `${name}: replay (the tool is safe to re-run)`;
        case "confirm":
          return `${name}: confirm by operation id ${intent.operationId}, run it only if it never happened`;
        case "interrupted":
          return `${name}: mark interrupted (unsafe to re-run and no confirmation hook)`;
      }
    },
    cannotContinue: (task) => {
      const name = (task.input as { name?: string }).name ?? "?";
      const tool = tools.get(name);
      if (!tool) return `tool "${name}" is not registered here`;
      const saved =
        task.checkpoint.phase === "execute" ? (task.checkpoint.data as unknown as Intent) : undefined;
      if (saved?.replay === "unsafe" && tool.replay === "safe")
        return `tool "${name}" was unsafe when this call's intent was saved and is declared safe here: its recovery would re-run it`;
      return undefined;
    },
    // Cancelled before it wrote its result, the call answers the model itself, in the commit that ends it:
    // not run when it never started, else with the outcome its replay rules allow (never a guess).
    onCancelled: (task, stage) => {
      const input = task.input as ToolTaskInput;
      const content = endedAnswer(
        { id: input.toolCallId, name: input.name },
        task,
        startedBeforeCancel(task, stage),
      );
      if (content) stage.appendEntry(input.conversationId, content);
    },
    // An approval's edited arguments are checked against the tool's schema when the decision is sent.
    checkSignal: (task, key, payload) => {
      // An executor's report is taken only from the executor that accepted the call.
      if (isDoneKey(key)) {
        const accepted = (task.checkpoint.data as { data?: { executor?: string } } | null)?.data?.executor;
        const by = (payload as { executor?: unknown } | null)?.executor;
        if (by === accepted) return undefined;
        return [{ path: "executor", message: `the call was accepted by ${accepted}, not by ${String(by)}` }];
      }
      const edited = (payload as { arguments?: Json } | null)?.arguments;
      const tool = tools.get((task.input as { name?: string }).name ?? "");
      if (edited === undefined || !tool) return undefined;
      const parsed = tool.input.safeParse(edited);
      if (parsed.success) return undefined;
      return parsed.error.issues.map((i) => ({
        path: ["arguments", ...i.path.map(String)].join("."),
        message: i.message,
      }));
    },
    phases: {
      call: async (ctx) => {
        const resolved = await resolveToolCall(tools, ctx.input.name, ctx.input.args, ctx.task.id);
        if (!resolved.ok) return reject(ctx, resolved.error);
        const { tool, intent, args } = resolved;
        const ask = typeof tool.approval === "function" ? await tool.approval(args) : tool.approval === true;
        if (ask) {
          // The intent is fixed; the call waits, durably, for a person's decision before it runs.
          const about = { tool: tool.name, toolCallId: ctx.input.toolCallId, arguments: intent.args };
          return ctx.waitFor(approvalKey(ctx.task.id), { next: "decided", about }, intent as unknown as Json);
        }
        return proceed(ctx, tool, args, intent);
      },
      decided: async (ctx) => {
        const intent = ctx.data.data;
        const decision = ApprovalSchema.parse(ctx.data.signals[approvalKey(ctx.task.id)]);
        const tool = tools.get(ctx.input.name);
        if (!decision.approved) {
          const why = decision.reason ? `: ${decision.reason}` : "";
          return finish(ctx, {
            outcome: "rejected",
            output: { error: `rejected by a person${why}. The tool did not run.` },
            via: "approval",
          });
        }
        if (!tool) return reject(ctx, `tool "${ctx.input.name}" is no longer available`);
        if (decision.arguments === undefined) {
          const args = tool.input.safeParse(intent.args);
          if (!args.success) return reject(ctx, `tool "${tool.name}" no longer accepts these arguments`);
          return proceed(ctx, tool, args.data, intent);
        }
        // Edited arguments: validated again (also checked when the decision was sent), and pre-checked.
        const edited = tool.input.safeParse(decision.arguments);
        if (!edited.success) return reject(ctx, `the approved arguments are invalid for ${tool.name}`);
        const problem = await precheckProblem(tool, edited.data);
        if (problem) return reject(ctx, problem);
        return proceed(ctx, tool, edited.data, { ...intent, args: decision.arguments as Json });
      },
      collect: (ctx) => {
        const child = ctx.children()[0];
        const state = child?.state;
        if (state?.status === "succeeded")
          return finish(ctx, { outcome: "ok", output: state.result, via: "run" });
        const error =
          state?.status === "failed"
            ? state.error.message
            : state?.status === "cancelled"
              ? state.reason
              : "no result";
        return finish(ctx, { outcome: "error", output: { error }, via: "run" });
      },
      execute: async (ctx) => {
        const intent = ctx.data;
        const tool = tools.get(ctx.input.name);
        const args = tool?.input.safeParse(intent.args);
        const recovering = ctx.restarts > 0 || intent.recovering === true;
        // This version cannot run the call: it may have run before a crash, then its outcome stays open.
        if (!tool?.execute || !args?.success)
          return finish(ctx, unavailableResult(ctx.input.name, intent, tool, recovering));
        // A tool for another kind of host: wait (durably, listed as pending) for one to take the call.
        if (!runsHere(tool.runsOn, ctx.hostKind)) {
          const data = { ...intent, recovering };
          const about = placedAbout(ctx.input, tool, data);
          return ctx.waitFor(runOnKey(ctx.task.id, ctx.attempt), { next: "placed", about }, data as Json);
        }
        const result = await runByRules(tool, args.data, intent, recovering, {
          get signal() {
            return ctx.signal;
          },
          get aborted() {
            return ctx.aborted;
          },
          reportProgress: (progress) =>
            ctx.progress((draft) =>
              draft.setDocument(progressDocumentId(ctx.task.id), TOOL_PROGRESS_DOCUMENT, { progress }),
            ),
          // An unsafe call starts only once every host that could take over knows its intent.
          beforeEffect: () => ctx.beforeEffect(),
          interrupted: () => {
            const partial = ctx.document(progressDocumentId(ctx.task.id))?.value as
              | { progress?: Json }
              | undefined;
            return {
              outcome: "interrupted",
              output: {
                error: `the outcome of ${tool.name} is unknown: the process stopped while it ran, and it is not safe to re-run`,
                partialOutput: partial?.progress ?? null,
              },
              via: "unknown",
            };
          },
        });
        return finish(ctx, result);
      },
      // Taken by the session's owner (it runs it in `execute`), or accepted by an executor: the call then
      // waits for its report, durably, for as long as its lease lasts.
      placed: (ctx) => {
        const taken = RunOnSchema.safeParse(Object.values(ctx.data.signals)[0]).data;
        const tool = tools.get(ctx.input.name);
        const executor = taken?.executor;
        if (executor === undefined || !tool) return ctx.next("execute", ctx.data.data);
        const leaseUntil = ctx.clock.now() + (taken?.leaseMs ?? DEFAULT_LEASE_MS);
        const about = { ...placedAbout(ctx.input, tool, ctx.data.data), acceptedBy: executor, leaseUntil };
        const data = { ...ctx.data.data, executor };
        const deadline = { at: leaseUntil, next: "unreported" as const };
        return ctx.waitFor(doneKey(ctx.task.id, ctx.attempt), { next: "completed", deadline, about }, data);
      },
      // The executor's report, applied to the context: the call's result entry and its end, in one commit.
      completed: (ctx) => {
        const report = CallReportSchema.parse(Object.values(ctx.data.signals)[0]);
        return finish(ctx, { ...report, executor: report.executor });
      },
      // The executor never reported within its lease: the call may have run there, so it follows its replay
      // rules (confirm, replay or interrupted) with whichever host takes it next.
      unreported: (ctx) => {
        const { executor: _lost, ...intent } = ctx.data.data;
        return ctx.next("execute", { ...intent, recovering: true });
      },
      settle: (ctx) => settle(ctx, tools.get(ctx.input.name)),
    },
  });
}

/**
 * The last phase of a tool call whose phase was cut off more often than its restart limit: it never runs
 * the tool again; it asks `confirm` what happened. A call that never started, or that `confirm` says did not
 * happen, is `not-run`; one that happened gets its real result; anything else is `unknown`, and the model is
 * told not to repeat it blindly.
 */
async function settle(
  ctx: PhaseContext<ToolTaskInput, ToolPhases, "settle">,
  tool: ToolDefinition<unknown> | undefined,
) {
  const { phase, restarts } = ctx.data;
  const name = ctx.input.name;
  const stopped = `the process stopped ${restarts} times while ${name} was`;
  if (phase !== "execute") {
    return finish(ctx, {
      outcome: "not-run",
      output: { error: `${name} was not run: ${stopped} being prepared, so it never started` },
      via: "unknown",
    });
  }
  const intent = ctx.data.data as unknown as Intent;
  const args = tool?.input.safeParse(intent.args);
  if (tool?.confirm && args?.success) {
    try {
      const found = await tool.confirm(intent.operationId, args.data);
      const confirmed = { outcome: "ok", output: found, via: "confirm" } as const;
      if (found !== undefined) return finish(ctx, storedResult(confirmed, tool, intent));
      return finish(ctx, {
        outcome: "not-run",
        output: { error: `${name} did not take effect (confirmed by operation id): ${stopped} running` },
        via: "confirm",
      });
    } catch (error) {
      if (ctx.signal.aborted) throw error;
    }
  }
  return finish(ctx, {
    outcome: "unknown",
    output: {
      error: `whether ${name} took effect is unknown: ${stopped} running, and it could not be confirmed. It may have happened: do not call it again without checking.`,
    },
    via: "unknown",
  });
}

/** A model's tool call, resolved: the tool, its validated arguments and the intent to commit. */
export type ResolvedToolCall =
  | {
      readonly ok: true;
      readonly tool: ToolDefinition<unknown>;
      readonly args: unknown;
      readonly intent: Intent;
    }
  | { readonly ok: false; readonly error: string };

/**
 * Resolves and validates a tool call and runs its pre-checks (DESIGN §5, the `call` step). Bad arguments,
 * unparsable JSON, unknown tools and a precheck that throws are errors the model will see, never exceptions.
 */
export async function resolveToolCall(
  tools: ReadonlyMap<string, ToolDefinition<unknown>>,
  name: string,
  rawArgs: string,
  operationId: string,
): Promise<ResolvedToolCall> {
  const tool = tools.get(name);
  if (!tool) return { ok: false, error: `unknown tool "${name}"` };
  const read = readArguments(tool, rawArgs);
  if ("error" in read) return { ok: false, error: read.error };
  const raw = read.raw;
  const parsed = tool.input.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    return { ok: false, error: `invalid arguments for ${tool.name}: ${issues}` };
  }
  const problem = await precheckProblem(tool, parsed.data);
  if (problem) return { ok: false, error: problem };
  return {
    ok: true,
    tool,
    args: parsed.data,
    intent: { args: raw, replay: tool.replay, operationId },
  };
}

type ToolContext = PhaseContext<ToolTaskInput, ToolPhases>;

/** Runs an approved (or unguarded) call: its own task's work, or `execute` with the committed intent. */
function proceed(ctx: ToolContext, tool: ToolDefinition<unknown>, args: unknown, intent: Intent) {
  if (tool.task !== undefined) {
    // The work is a task of its own: spawn it with the validated arguments and wait for it durably.
    const child = ctx.spawn(tool.task, args as Json, { id: `${ctx.task.id}/run` });
    return ctx.wait([child], { policy: "allSettled", next: "collect" });
  }
  return ctx.next("execute", intent);
}

function reject(ctx: ToolContext, message: string) {
  return finish(ctx, { outcome: "error", output: { error: message }, via: "rejected" });
}

/**
 * Whether a cancelled call's work may have begun: its own task's work once it ran (a task-backed tool's run
 * child), and not a call whose phase never began (created in the cancelling commit, or still queued for
 * its exclusive key) unless it ran before elsewhere (taken back from an executor whose lease ended).
 */
function startedBeforeCancel(task: Task, stage: CancelStage): boolean {
  const run = stage.child(`${task.id}/run`);
  // One created in the commit that cancels it ended there, never run (the task machine's rule).
  if (run && run.createdVersion !== stage.version) return true;
  // Its phase never began, and it never ran before elsewhere (taken back from an executor: `recovering`).
  const recovering = (task.checkpoint.data as { recovering?: boolean } | null)?.recovering === true;
  if (!stage.phaseStarted && !recovering) return false;
  // Its `execute` phase only handed the call to another kind of host (a wait for one to take it), and no
  // earlier attempt of it was cut off (one may have run the tool on a host of that kind, before a move).
  const handedOver = stage.returned === "await" && task.checkpoint.phase === "execute";
  if (handedOver && !recovering && task.restarts === 0) return false;
  return mayHaveStarted(task);
}
