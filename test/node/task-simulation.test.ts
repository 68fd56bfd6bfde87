/**
 * Seeded crash simulation of durable tasks (see test/support/task-simulation.ts). Every seed runs a random
 * forest of task trees through random process deaths until everything is terminal, then checks:
 * - every task ends terminal (none lost, none stuck);
 * - no committed transition is applied twice, and every execution of a phase is a counted attempt;
 * - a parent is never terminal before its owned children; failFast stops siblings; allSettled reports all;
 * - a crash loop ends failed with the restart reason;
 * - a wait ends exactly once (its signal or its deadline, never both), a signal is consumed at most once,
 *   no accepted signal is lost (one sent early is taken when the wait begins), and repeats get the first
 *   outcome while conflicting signals are refused (checked as the harness sends them).
 * Every third seed parks every wait (`liveWaits: 0`): a reopened process reads each back from storage when
 * it is signalled, cancelled or due.
 * SIM_SEEDS=<n> runs more seeds; SIM_SEED=<seed> reruns one exactly.
 */
import { describe, expect, it } from "vitest";
import type { Task } from "../../src/index.ts";
import {
  MAX_RESTARTS,
  type SimSpec,
  type SimulationResult,
  simKey,
  simulate,
} from "../support/task-simulation.ts";

const single = process.env.SIM_SEED;
const seeds =
  single !== undefined
    ? [Number(single)]
    : Array.from({ length: Number(process.env.SIM_SEEDS ?? 2000) }, (_, i) => i + 1);

const TERMINAL = ["succeeded", "failed", "cancelled"];

function check(run: SimulationResult): void {
  const byId = new Map(run.tasks.map((t) => [t.id, t]));
  const childrenOf = (id: string) => run.tasks.filter((t) => t.parentId === id);
  const where = `seed ${run.seed} (rerun: SIM_SEED=${run.seed})`;

  // Every task ends terminal; the tree is exactly the spec's, nothing lost or duplicated.
  for (const task of run.tasks)
    expect(TERMINAL, `${where}: ${task.id} is ${task.state.status}`).toContain(task.state.status);
  const expectedIds: string[] = [];
  const walk = (id: string, spec: SimSpec, spawned: boolean) => {
    if (spawned) expectedIds.push(id);
    const task = byId.get(id);
    // Children exist only if the parent reached its spawn phase (it may have been cancelled before).
    const reachedSpawn = task !== undefined && childrenOf(id).length > 0;
    for (const [i, child] of spec.children.entries()) walk(`${id}.${i}`, child, spawned && reachedSpawn);
  };
  for (const [id, spec] of run.roots) walk(id, spec, true);
  expect(new Set(run.tasks.map((t) => t.id)), where).toEqual(new Set(expectedIds));

  // Replay the change log: no transition applied twice; parents never terminal before their children.
  const status = new Map<string, Task>();
  const closedAttempts = new Map<string, Set<number>>();
  for (const commit of run.log) {
    for (const task of commit.tasks) {
      const before = status.get(task.id);
      if (before && before.state.status === "running" && task.checkpoint !== before.checkpoint) {
        const phaseEnded =
          task.attempts !== before.attempts ||
          task.state.status !== "running" ||
          task.checkpoint.phase !== before.checkpoint.phase;
        if (phaseEnded && task.restarts === 0) {
          const closed = closedAttempts.get(task.id) ?? new Set<number>();
          expect(
            closed.has(before.attempts),
            `${where}: ${task.id} attempt ${before.attempts} committed twice`,
          ).toBe(false);
          closed.add(before.attempts);
          closedAttempts.set(task.id, closed);
        }
      }
      status.set(task.id, task);
    }
    for (const task of commit.tasks) {
      if (!TERMINAL.includes(task.state.status)) continue;
      for (const [id, other] of status) {
        if (other.parentId === task.id) {
          expect(TERMINAL, `${where}: ${task.id} ended at v${commit.version} before child ${id}`).toContain(
            other.state.status,
          );
        }
      }
    }
  }

  for (const task of run.tasks) {
    // Every execution of a step is visible as an attempt; restarts stay within the limit.
    let effects = 0;
    for (const [key, count] of run.world.effects) if (key.startsWith(`${task.id}#`)) effects += count;
    expect(
      effects,
      `${where}: ${task.id} ran ${effects} steps in ${task.attempts} attempts`,
    ).toBeLessThanOrEqual(task.attempts);
    expect(task.restarts).toBeLessThanOrEqual(MAX_RESTARTS);
    const spec = specOf(run, task.id);
    if (task.state.status === "succeeded") {
      const result = task.state.result as { steps: number; children: { id: string; status: string }[] };
      // Steps were counted in committed checkpoints: a doubly applied transition would overshoot.
      expect(result.steps, where).toBe(spec.steps);
      for (let i = 0; i < spec.steps; i++)
        expect(run.world.effects.get(`${task.id}#${i}`), where).toBeGreaterThanOrEqual(1);
      // allSettled (and a failFast that saw no failure) reports every child, each terminal.
      expect(
        result.children.map((c) => c.id),
        where,
      ).toEqual(spec.children.map((_, i) => `${task.id}.${i}`));
      for (const child of result.children) expect(TERMINAL, where).toContain(child.status);
    }
    if (task.state.status === "failed") {
      const code = task.state.error.code;
      expect(
        ["restart-limit", "failed", "child-failed"],
        `${where}: ${task.id} failed with ${code}`,
      ).toContain(code);
      // The restart limit fires for crash loops, or when the process really died that often mid-phase.
      if (code === "restart-limit")
        expect(spec.crashLoop || run.world.kills > MAX_RESTARTS, where).toBe(true);
      if (code === "failed") expect(spec.fail, where).toBe(true);
      if (code === "child-failed") {
        expect(spec.policy, where).toBe("failFast");
        expect(
          childrenOf(task.id).some((c) => c.state.status === "failed"),
          where,
        ).toBe(true);
      }
    }
    if (task.state.status === "cancelled") {
      // Only what was cancelled, or lies under something cancelled or failFast-stopped, ends cancelled.
      let cause: Task | undefined = task;
      let explained = false;
      while (cause && !explained) {
        explained =
          run.cancelled.has(cause.id) ||
          (cause.state.status === "failed" && cause.state.error.code === "child-failed");
        cause = cause.parentId !== undefined ? byId.get(cause.parentId) : undefined;
      }
      expect(explained, `${where}: ${task.id} cancelled without a cause`).toBe(true);
    }
    // A crash-looping task that was not stopped for another reason fails with the restart reason.
    if (spec.crashLoop && !spec.fail && task.state.status === "succeeded") {
      throw new Error(`${where}: crash-looping ${task.id} succeeded`);
    }
  }
}

function checkSignals(run: SimulationResult, where: string): void {
  const signalVersion = new Map<string, number>();
  const consumers = new Map<string, Set<string>>();
  for (const commit of run.log) {
    for (const signal of commit.signals ?? []) {
      if (!signalVersion.has(signal.key)) signalVersion.set(signal.key, signal.version);
      if (signal.consumedBy !== undefined) {
        const set = consumers.get(signal.key) ?? new Set<string>();
        set.add(`${signal.consumedBy}@${signal.consumedAt}`);
        consumers.set(signal.key, set);
      }
    }
    for (const task of commit.tasks) {
      if (task.state.status !== "awaiting") continue;
      const key = simKey(task.id);
      const early = signalVersion.get(key);
      // A signal stored before the wait began must have been taken in the commit that began it.
      expect(early === undefined || early > commit.version, `${where}: early signal ${key} lost`).toBe(true);
    }
  }
  for (const [key, set] of consumers) expect(set.size, `${where}: ${key} consumed twice`).toBe(1);
  for (const key of run.world.confirmed) {
    const stored = run.signals.get(key);
    expect(stored?.payload, `${where}: confirmed signal ${key} lost`).toEqual({ n: run.world.sent.get(key) });
  }
  const phases = new Map<string, Set<string>>();
  for (const commit of run.log)
    for (const task of commit.tasks) {
      const set = phases.get(task.id) ?? new Set<string>();
      set.add(task.checkpoint.phase);
      phases.set(task.id, set);
    }
  for (const task of run.tasks) {
    const key = simKey(task.id);
    const took = [...(consumers.get(key) ?? [])].some((c) => c.startsWith(`${task.id}@`));
    const seen = phases.get(task.id) ?? new Set<string>();
    // Ended by its signal or by its deadline, never both.
    expect(took && seen.has("late"), `${where}: ${task.id}'s wait ended twice`).toBe(false);
    if (took)
      expect(seen.has("answered"), `${where}: ${task.id} took its signal but never used it`).toBe(true);
    const answers = run.world.answers.get(task.id) ?? [];
    expect(answers.length, `${where}: ${task.id} answered differently`).toBeLessThanOrEqual(1);
    if (answers[0]) expect(answers[0], where).toEqual({ [key]: run.signals.get(key)?.payload });
  }
}

function specOf(run: SimulationResult, id: string): SimSpec {
  const [root, ...path] = id.split(".");
  let spec = run.roots.get(root ?? "") as SimSpec;
  for (const i of path) spec = spec.children[Number(i)] as SimSpec;
  return spec;
}

describe("deterministic crash simulation of durable tasks", () => {
  it(`keeps every invariant across ${seeds.length} seeds of random task trees and process deaths`, async () => {
    let kills = 0;
    let tasks = 0;
    let waits = 0;
    let signals = 0;
    let parked = 0;
    for (const seed of seeds) {
      const run = await simulate(seed);
      check(run);
      checkSignals(run, `seed ${run.seed} (rerun: SIM_SEED=${run.seed})`);
      kills += run.world.kills;
      waits += run.tasks.filter((t) => specOf(run, t.id).wait).length;
      signals += run.world.confirmed.size;
      parked += run.world.parkedAtOpen;
      tasks += run.tasks.length;
    }
    // The simulation must actually kill processes and build trees, or it proves nothing.
    expect(kills).toBeGreaterThan(seeds.length / 2);
    expect(tasks).toBeGreaterThan(seeds.length * 2);
    if (seeds.length > 100) {
      expect(waits).toBeGreaterThan(seeds.length / 2);
      expect(signals).toBeGreaterThan(seeds.length / 4);
      // Reopened processes found parked waits left in storage, and read them back to finish them.
      expect(parked).toBeGreaterThan(seeds.length / 20);
    }
  }, 300_000);

  it("reproduces a seed exactly", async () => {
    const a = await simulate(4242);
    const b = await simulate(4242);
    expect(b.log).toEqual(a.log);
    expect(b.world.kills).toBe(a.world.kills);
  });
});
