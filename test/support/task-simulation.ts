/**
 * A deterministic crash simulation of the task kernel. A seed determines a random forest of task trees
 * (sequential phases, sleeps, fan-out with both join policies, failing phases, crash-looping phases),
 * random cancellations, and where each incarnation of the "process" dies: between commits (before,
 * during or after a storage write) or inside a phase right after its external effect. The harness
 * reopens and resumes after every death until all work is terminal, then checks the invariants.
 */
import { z } from "zod";
import {
  applyChangeToView,
  type CommitGuard,
  type CommitRecord,
  createRegistry,
  defineTask,
  emptyView,
  type Json,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Session,
  type Storage,
  sequentialIds,
  type Task,
} from "../../src/index.ts";
import { ForwardingStorage } from "./storage-wrappers.ts";

/** mulberry32: a tiny seeded PRNG, so a seed reproduces the whole run. */
export function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    chance: (p: number) => next() < p,
  };
}
type Rng = ReturnType<typeof rng>;

export interface SimSpec {
  steps: number;
  sleepMs: number;
  children: SimSpec[];
  policy: "allSettled" | "failFast";
  fail: boolean;
  crashLoop: boolean;
}

const SpecSchema: z.ZodType<SimSpec> = z.lazy(() =>
  z.object({
    steps: z.number().int(),
    sleepMs: z.number().int(),
    children: z.array(SpecSchema),
    policy: z.enum(["allSettled", "failFast"]),
    fail: z.boolean(),
    crashLoop: z.boolean(),
  }),
);

function randomSpec(r: Rng, depth: number): SimSpec {
  const childCount = depth < 2 && r.chance(0.55) ? 1 + r.int(3) : 0;
  return {
    steps: r.int(3),
    sleepMs: r.chance(0.3) ? 10 + r.int(200) : 0,
    children: Array.from({ length: childCount }, () => randomSpec(r, depth + 1)),
    policy: r.chance(0.5) ? "allSettled" : "failFast",
    fail: r.chance(0.15),
    crashLoop: r.chance(0.04),
  };
}

/** The outside world: effects that survive the kernel's crashes, and the kill switch of the process. */
export class World {
  readonly effects = new Map<string, number>();
  dead = false;
  /** Events left before this incarnation dies (undefined: it does not die on its own). */
  countdown: number | undefined;
  kills = 0;

  /** Counts down one event; true when the process must die now. */
  tick(): boolean {
    if (this.countdown === undefined || this.dead) return false;
    this.countdown--;
    return this.countdown < 0;
  }

  kill(): never {
    this.dead = true;
    this.kills++;
    throw new Error("process killed");
  }
}

export const MAX_RESTARTS = 3;

function simTask(world: World) {
  return defineTask({
    kind: "sim",
    version: 1,
    input: SpecSchema,
    maxRestarts: MAX_RESTARTS,
    phases: {
      step: (ctx) => {
        const done = (ctx.data as number | null) ?? 0;
        if (done >= ctx.input.steps) return ctx.next("nap");
        if (world.dead) throw new Error("dead process");
        const key = `${ctx.task.id}#${done}`;
        world.effects.set(key, (world.effects.get(key) ?? 0) + 1); // the external effect
        if (world.tick()) world.kill(); // die right after it, before the transition commits
        return ctx.next("step", done + 1);
      },
      nap: (ctx) =>
        ctx.input.sleepMs > 0 ? ctx.sleep(ctx.clock.now() + ctx.input.sleepMs, "spawn") : ctx.next("spawn"),
      spawn: (ctx) => {
        if (ctx.input.children.length === 0) return ctx.next("finish");
        const ids = ctx.input.children.map((child, i) =>
          ctx.spawn("sim", child as unknown as Json, { id: `${ctx.task.id}.${i}` }),
        );
        return ctx.wait(ids, { policy: ctx.input.policy, next: "finish" });
      },
      finish: (ctx) => {
        if (ctx.input.crashLoop && !world.dead) world.kill(); // every entry kills the process
        if (ctx.input.fail) return ctx.fail("planned failure");
        return ctx.complete({
          steps: ctx.input.steps,
          children: ctx.children().map((c) => ({ id: c.id, status: c.state.status })),
        });
      },
    },
  });
}

/** Dies at the planned storage write: before it, in the middle of it (it aborts), or after it is durable. */
class DyingStorage extends ForwardingStorage {
  constructor(
    inner: Storage,
    private readonly world: World,
    private readonly mode: () => "before" | "during" | "after",
    private readonly during: { armed: boolean },
  ) {
    super(inner);
  }
  protected override target(): Storage {
    if (this.world.dead) throw new Error("process killed");
    return this.inner;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    const inner = this.target();
    if (!this.world.tick()) return inner.commit(guard, commits);
    const mode = this.mode();
    if (mode === "before") this.world.kill();
    if (mode === "during") {
      this.during.armed = true;
      try {
        await inner.commit(guard, commits); // the write hook kills it midway
      } finally {
        this.during.armed = false;
      }
    } else await inner.commit(guard, commits);
    this.world.kill(); // after: durable, but the process never hears back
  }
}

export interface SimulationResult {
  readonly seed: number;
  readonly tasks: Task[];
  readonly log: CommitRecord[];
  readonly roots: Map<string, SimSpec>;
  readonly cancelled: Set<string>;
  readonly world: World;
  readonly incarnations: number;
}

/** Runs one seed to completion. Throws if the run does not converge. */
export async function simulate(seed: number): Promise<SimulationResult> {
  const r = rng(seed);
  const world = new World();
  const clock = new ManualClock(0);
  const during = { armed: false };
  const disk: MemoryStorage = memoryStorage();
  const roots = new Map<string, SimSpec>();
  const cancelled = new Set<string>();
  const rootCount = 1 + r.int(3);
  const registry = createRegistry({ tasks: [simTask(world)] });
  const crashBudget = r.int(6);

  let session: Session | undefined;
  let incarnation = 0;
  for (; incarnation < 60; incarnation++) {
    world.dead = false;
    world.countdown = undefined;
    const storage = new DyingStorage(
      disk.reopen({
        retainChanges: 1_000_000,
        onWrite: (_row, index) => {
          if (during.armed && index >= 1) world.kill();
        },
      }),
      world,
      () => (["before", "during", "after"] as const)[r.int(3)] ?? "before",
      during,
    );
    const timers = new ManualTimers(clock);
    try {
      session = await openSession({
        id: "sim",
        storage,
        registry,
        clock,
        timers,
        ids: sequentialIds(incarnation * 1000),
        maxRestarts: MAX_RESTARTS,
        // Even seeds run with a small working set: finished trees leave memory after the latest two.
        ...(seed % 2 === 0 && { retainSettled: 2 }),
      });
      if (incarnation === 0) {
        for (let i = 0; i < rootCount; i++) {
          const spec = randomSpec(r, 0);
          const task = await session.spawn("sim", spec as unknown as Json, { id: `root${i}` });
          roots.set(task.id, spec);
        }
      }
      // The process may die from here on (the roots above are the accepted input).
      world.countdown = incarnation < crashBudget ? r.int(25) : undefined;
      await session.resume();
      for (let rounds = 0; rounds < 200 && !world.dead; rounds++) {
        await session.whenIdle();
        if (world.dead || session.status !== "open") break;
        if (r.chance(0.04)) {
          const open = session
            .view()
            .tasks.filter((t) => !["succeeded", "failed", "cancelled"].includes(t.state.status));
          const victim = open[r.int(open.length)];
          if (victim) {
            cancelled.add(victim.id);
            await session.cancel(victim.id, "simulated user cancel");
            continue;
          }
        }
        const wake = session.wakeInfo();
        if (wake.nextWakeAt !== undefined) timers.advance(Math.max(0, wake.nextWakeAt - clock.now()));
        else break;
      }
    } catch (error) {
      if (!world.dead) throw error;
    }
    if (world.dead) continue;
    const view = session?.view();
    if (view?.tasks.every((t) => ["succeeded", "failed", "cancelled"].includes(t.state.status))) break;
    if (!world.dead) throw new Error(`seed ${seed}: stuck with unfinished tasks and nothing scheduled`);
  }
  const final = await openSession({ id: "sim", storage: disk.reopen(), registry, mode: "read" });
  const { changes } = await final.readChanges(0, 1_000_000);
  // Every task ever committed, from the whole change log (a view holds the working set only).
  let all = emptyView("sim", { settled: Number.POSITIVE_INFINITY, entries: 0 });
  for (const change of changes) all = applyChangeToView(all, change);
  for (const task of final.view().tasks)
    if (JSON.stringify(all.tasks.find((t) => t.id === task.id)) !== JSON.stringify(task))
      throw new Error(`seed ${seed}: ${task.id} in the reopened session differs from the change log`);
  return {
    seed,
    tasks: [...all.tasks],
    log: changes,
    roots,
    cancelled,
    world,
    incarnations: incarnation + 1,
  };
}
