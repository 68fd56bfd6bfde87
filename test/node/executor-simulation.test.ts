/**
 * The seeded executor simulation (issue 21): a session owned at the edge makes three calls of an unsafe tool
 * only a browser can run. At seeded points executors take calls and die before running them, die after
 * running them but before reporting, report too late, or work; the owner restarts and its clock jumps past
 * leases. Invariants after every run: the run ends, each call is answered once, each operation took effect
 * exactly once (a call whose executor was lost is confirmed by operation id before it runs again, never run
 * blindly), no late report was ever applied, and each call's three marks are in order — accepted, then
 * completed, then applied — with the result naming the executor of the last acceptance.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  type ExecutorTarget,
  executePlacedCalls,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  type Session,
  SignalRefusedError,
  scriptedModel,
} from "../../src/index.ts";
import { rng } from "../support/task-simulation.ts";

const LEASE_MS = 2_000;
const SEEDS = Number(process.env.EXECUTOR_SIM_SEEDS ?? 60);

const settle = async (rounds = 40) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** The outside world: a provider that applies each operation id's effect, and logs every call to it. */
class Provider {
  readonly applied = new Map<string, number>();
  readonly log: { op: "run" | "lookup"; id: string }[] = [];
  run(id: string) {
    this.log.push({ op: "run", id });
    this.applied.set(id, (this.applied.get(id) ?? 0) + 1);
    return { stamped: id };
  }
  lookup(id: string) {
    this.log.push({ op: "lookup", id });
    return this.applied.has(id) ? { stamped: id, found: true } : undefined;
  }
}

function stampTool(provider: Provider) {
  return defineTool({
    name: "stamp",
    description: "Stamps a document with the user's key (in the browser)",
    input: z.object({ n: z.number() }),
    replay: "unsafe",
    runsOn: "browser",
    confirm: (operationId) => provider.lookup(operationId),
    execute: (_args, { operationId }) => provider.run(operationId),
  });
}

const registry = (provider: Provider) =>
  createRegistry({
    ...createAgent({
      model: scriptedModel([
        { toolCalls: [0, 1, 2].map((n) => ({ name: "stamp", args: { n } })) },
        { text: "stamped" },
      ]),
      tools: [stampTool(provider)],
    }),
  });

async function simulate(seed: number) {
  const random = rng(seed);
  const provider = new Provider();
  const clock = new ManualClock(1_000);
  const timers = new ManualTimers(clock);
  const disk = memoryStorage();
  const changes: CommitRecord[] = [];
  const events: string[] = [];
  const open = async () => {
    const session = await openSession({
      id: "sim",
      storage: disk.reopen(),
      registry: registry(provider),
      host: "edge",
      clock,
      timers,
    });
    session.subscribe(session.version, (change) => changes.push(change));
    await session.resume();
    return session;
  };
  let owner: Session = await open();
  const target = (): ExecutorTarget => ({
    pending: () => owner.pending(),
    signal: (key, payload, options) => owner.signal(key, payload, options),
  });
  const submission = await owner.submit({ requestId: "r", conversationId: "main", input: "stamp them" });
  await settle();
  let executors = 0;
  /** An executor that works: it takes every waiting call, runs it and reports it. */
  const working = () =>
    executePlacedCalls(target(), {
      host: "browser",
      executor: `ok-${++executors}`,
      tools: [stampTool(provider)],
      leaseMs: LEASE_MS,
    });
  const late: { key: string; executor: string; result: unknown }[] = [];
  /** An executor that accepts the first waiting call and then dies: before running it, or after. */
  const dying = async (runsFirst: boolean) => {
    const wait = owner.pending().find((w) => w.key.startsWith("run-on:"));
    if (!wait) return;
    const executor = `dying-${++executors}`;
    await owner.signal(
      wait.key,
      { host: "browser", executor, leaseMs: LEASE_MS },
      { requestId: `${wait.key}:${executor}` },
    );
    await settle();
    const held = owner.pending().find((w) => w.taskId === wait.taskId && w.key.startsWith("done:"));
    const about = held?.about as { operationId: string; recovering: boolean } | undefined;
    if (!held || !about) return;
    if (!runsFirst) return;
    // It runs the call by the rules (a call that may have run is confirmed first), then never reports.
    const found = about.recovering ? provider.lookup(about.operationId) : undefined;
    const result = found ?? provider.run(about.operationId);
    late.push({ key: held.key, executor, result });
  };
  for (let step = 0; step < 12 && owner.submission(submission.id)?.status !== "succeeded"; step++) {
    const move = random.int(6);
    if (move === 0) {
      events.push("executor dies before running");
      await dying(false);
    } else if (move === 1) {
      events.push("executor dies after running");
      await dying(true);
    } else if (move === 2) {
      events.push("owner restarts");
      await owner.close();
      owner = await open();
    } else if (move === 3) {
      events.push("leases end");
      timers.advance(LEASE_MS + 1);
    } else if (move === 4 && late.length > 0) {
      events.push("a lost executor reports late");
      const report = late.shift() as (typeof late)[number];
      timers.advance(LEASE_MS + 1); // its lease is certainly over by now
      await settle();
      const refused = await owner
        .signal(
          report.key,
          { executor: report.executor, outcome: "ok", output: report.result as never, via: "run" },
          { requestId: `late:${report.key}` },
        )
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(refused, `seed ${seed}: ${events.join(", ")}`).toBeInstanceOf(SignalRefusedError);
    } else {
      events.push("a working executor");
      await working();
    }
    await settle();
  }
  // Then time passes and working executors come until the run ends.
  for (let round = 0; round < 10 && owner.submission(submission.id)?.status !== "succeeded"; round++) {
    timers.advance(LEASE_MS + 1);
    await settle();
    await working();
    await settle();
  }
  const why = `seed ${seed}: ${events.join(", ")}`;
  expect(owner.submission(submission.id)?.status, why).toBe("succeeded");
  const calls = owner.view().tasks.filter((t) => t.kind === "agent.tool");
  expect(calls, why).toHaveLength(3);
  const results =
    owner.view().conversations[0]?.entries.filter((e) => e.content.kind === "tool-result") ?? [];
  expect(
    new Set(results.map((e) => (e.content.kind === "tool-result" ? e.content.toolCallId : ""))).size,
    why,
  ).toBe(3);
  expect(results, why).toHaveLength(3);
  for (const call of calls) {
    const result = (
      call.state as { result?: { via?: string; executor?: string; output?: { stamped?: string } } }
    ).result;
    const operationId = result?.output?.stamped as string;
    // Exactly one effect per call, and never a second run of an operation without a lookup before it.
    expect(provider.applied.get(operationId), why).toBe(1);
    const ops = provider.log.filter((l) => l.id === operationId);
    const runs = ops.filter((l) => l.op === "run").length;
    expect(runs, why).toBe(1);
    // The marks, in order: the last acceptance, its report, then the result entry.
    const acceptedAt = changes.findLastIndex((c) =>
      c.tasks.some(
        (t) => t.id === call.id && t.state.status === "awaiting" && t.state.keys[0]?.startsWith("done:"),
      ),
    );
    const accepting = changes[acceptedAt]?.tasks.find((t) => t.id === call.id);
    const acceptedBy = (accepting?.state as { about?: { acceptedBy?: string } } | undefined)?.about
      ?.acceptedBy;
    const completedAt = changes.findIndex((c) =>
      (c.signals ?? []).some((s) => s.key.startsWith(`done:${call.id}:`)),
    );
    const appliedAt = changes.findIndex((c) =>
      c.entries.some((e) => e.content.kind === "tool-result" && e.taskId === call.id),
    );
    expect(acceptedAt, why).toBeGreaterThan(-1);
    expect(completedAt, why).toBeGreaterThan(acceptedAt);
    expect(appliedAt, why).toBeGreaterThan(completedAt);
    expect(result?.executor, why).toBe(acceptedBy);
    // A call whose earlier executor was lost was confirmed before anything ran again.
    const lost = changes.filter((c) =>
      c.tasks.some(
        (t) => t.id === call.id && t.state.status === "awaiting" && t.state.keys[0]?.startsWith("done:"),
      ),
    ).length;
    if (lost > 1) expect(["confirm", "run-after-confirm"], why).toContain(result?.via);
  }
  await owner.close();
  return events;
}

describe("executor simulation", () => {
  it(`keeps every call's effect exactly once and its marks in order (${SEEDS} seeds)`, async () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= SEEDS; seed++) for (const event of await simulate(seed)) seen.add(event);
    // The seeds reached every kind of trouble.
    expect([...seen].sort()).toEqual(
      [
        "a lost executor reports late",
        "a working executor",
        "executor dies after running",
        "executor dies before running",
        "leases end",
        "owner restarts",
      ].sort(),
    );
  }, 120_000);
});
