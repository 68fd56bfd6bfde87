/**
 * A deterministic crash simulation of the task kernel. A seed determines a random forest of task trees
 * (sequential phases, sleeps, fan-out with both join policies, failing phases, crash-looping phases),
 * waits on signals (answered by the harness, early, twice, or not at all until a deadline passes),
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
  defineSignal,
  defineTask,
  emptyView,
  type Json,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Session,
  type Signal,
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
  /** Waits for signal `sim:<task id>` before spawning; a deadline (ms) continues in `late` without it. */
  wait?: { deadlineMs: number } | undefined;
}

const SpecSchema: z.ZodType<SimSpec> = z.lazy(() =>
  z.object({
    steps: z.number().int(),
    sleepMs: z.number().int(),
    children: z.array(SpecSchema),
    policy: z.enum(["allSettled", "failFast"]),
    fail: z.boolean(),
    crashLoop: z.boolean(),
    wait: z.object({ deadlineMs: z.number().int() }).optional(),
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
    ...(r.chance(0.3) && { wait: { deadlineMs: r.chance(0.4) ? 5 + r.int(100) : 0 } }),
  };
}

/** The signal key a simulated task with a `wait` awaits. */
export const simKey = (taskId: string) => `sim:${taskId}`;
const SimSignal = defineSignal({ key: "sim:*", schema: z.object({ n: z.number().int() }) });

/** The outside world: effects that survive the kernel's crashes, and the kill switch of the process. */
export class World {
  readonly effects = new Map<string, number>();
  /** Signals the harness sent (key → payload), and those whose `signal()` call returned. */
  readonly sent = new Map<string, number>();
  readonly confirmed = new Set<string>();
  /** What the `answered` phase saw, per task (a second entry would mean a wait ended twice). */
  readonly answers = new Map<string, Json[]>();
  readonly late = new Map<string, number>();
  dead = false;
  /** Events left before this incarnation dies (undefined: it does not die on its own). */
  countdown: number | undefined;
  kills = 0;
  /** Parked waits an incarnation opened without (left in storage), summed over incarnations. */
  parkedAtOpen = 0;

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
        ctx.input.sleepMs > 0 ? ctx.sleep(ctx.clock.now() + ctx.input.sleepMs, "ask") : ctx.next("ask"),
      ask: (ctx) => {
        const wait = ctx.input.wait;
        if (!wait) return ctx.next("spawn");
        const deadline =
          wait.deadlineMs > 0 ? { at: ctx.clock.now() + wait.deadlineMs, next: "late" } : undefined;
        return ctx.waitFor(simKey(ctx.task.id), { next: "answered", ...(deadline && { deadline }) });
      },
      answered: (ctx) => {
        const got = (ctx.data as { signals?: Record<string, Json> } | null)?.signals ?? {};
        const seen = world.answers.get(ctx.task.id) ?? [];
        // Recorded once per committed continuation: a re-entered phase sees the same checkpoint.
        if (!seen.some((s) => JSON.stringify(s) === JSON.stringify(got))) seen.push(got);
        world.answers.set(ctx.task.id, seen);
        return ctx.next("spawn");
      },
      late: (ctx) => {
        world.late.set(ctx.task.id, (world.late.get(ctx.task.id) ?? 0) + 1);
        return ctx.next("spawn");
      },
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

/** Sends signal `key` with payload `{ n }`; a repeat must get the first outcome. */
async function sendSignal(session: Session, world: World, key: string, n: number): Promise<void> {
  const receipt = await session.signal(key, { n }, { requestId: `req-${key}` });
  if (world.dead) return;
  if (world.confirmed.has(key) && !receipt.duplicate) throw new Error(`${key}: a repeat was accepted again`);
  if (JSON.stringify(receipt.signal.payload) !== JSON.stringify({ n }))
    throw new Error(`${key}: the receipt holds another payload`);
  world.confirmed.add(key);
}

/** Two callers answer `key` with one payload at once (two tabs, a retried webhook): one signal is stored. */
async function sendTwice(session: Session, world: World, key: string, n: number): Promise<void> {
  const receipts = await Promise.all([
    session.signal(key, { n }, { requestId: `req-${key}` }),
    session.signal(key, { n }, { requestId: `twin-${key}` }),
  ]);
  if (world.dead) return;
  const [first, second] = receipts;
  if (JSON.stringify(first.signal) !== JSON.stringify(second.signal))
    throw new Error(`${key}: two callers at once were answered with different signals`);
  if (JSON.stringify(first.signal.payload) !== JSON.stringify({ n }))
    throw new Error(`${key}: the receipt holds another payload`);
  if (receipts.filter((receipt) => !receipt.duplicate).length !== 1)
    throw new Error(`${key}: two callers at once did not store exactly one signal`);
  world.confirmed.add(key);
}

/**
 * One outside action on signals: answer a pending wait (from one caller or two at once), send one early
 * (for a task that has not asked yet), repeat a sent one, or send a conflicting one (which must be
 * refused). False when none applies.
 */
async function signalSomething(session: Session, world: World, r: Rng, roots: Map<string, SimSpec>) {
  const action = r.int(4);
  if (action === 0) {
    const pending = session.view().pending.filter((p) => !world.sent.has(p.key));
    const target = pending[r.int(pending.length)];
    if (!target) return false;
    world.sent.set(target.key, r.int(100));
    const n = world.sent.get(target.key) as number;
    await (r.int(2) === 0
      ? sendSignal(session, world, target.key, n)
      : sendTwice(session, world, target.key, n));
    return true;
  }
  if (action === 1) {
    const waiting: string[] = [];
    const walk = (id: string, spec: SimSpec) => {
      if (spec.wait && !world.sent.has(simKey(id))) waiting.push(simKey(id));
      for (const [i, child] of spec.children.entries()) walk(`${id}.${i}`, child);
    };
    for (const [id, spec] of roots) walk(id, spec);
    const key = waiting[r.int(waiting.length)];
    if (key === undefined) return false;
    world.sent.set(key, r.int(100));
    await sendSignal(session, world, key, world.sent.get(key) as number);
    return true;
  }
  const confirmed = [...world.confirmed];
  const key = confirmed[r.int(confirmed.length)];
  if (key === undefined) return false;
  const n = world.sent.get(key) as number;
  if (action === 2) {
    await sendSignal(session, world, key, n);
    return true;
  }
  const refused = await session.signal(key, { n: n + 1 }, { requestId: `other-${key}` }).then(
    () => undefined,
    (error: unknown) => error,
  );
  if (world.dead) return true;
  if ((refused as { code?: string } | undefined)?.code !== "signal-conflict")
    throw new Error(`${key}: a conflicting signal was not refused (${String(refused)})`);
  return true;
}

export interface SimulationResult {
  readonly seed: number;
  readonly tasks: Task[];
  readonly log: CommitRecord[];
  /** Every signal in storage at the end, by key. */
  readonly signals: Map<string, Signal>;
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
  const registry = createRegistry({ tasks: [simTask(world)], signals: [SimSignal] });
  const crashBudget = r.int(6);

  let session: Session | undefined;
  let incarnation = 0;
  for (; incarnation < 60; incarnation++) {
    world.dead = false;
    world.countdown = undefined;
    const storage = new DyingStorage(
      disk.reopen({
        retainChanges: 1_000_000,
        // Each process writes the log's tail into rows after its own number of commits.
        tailCommits: 1 + r.int(8),
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
        // Every third seed parks every wait: reopened, it reads each back by key, id or deadline.
        ...(seed % 3 === 1 && { liveWaits: 0 }),
      });
      if (incarnation === 0) {
        for (let i = 0; i < rootCount; i++) {
          const spec = randomSpec(r, 0);
          const task = await session.spawn("sim", spec as unknown as Json, { id: `root${i}` });
          roots.set(task.id, spec);
        }
      }
      world.parkedAtOpen += session.parkedInStorage;
      // The process may die from here on (the roots above are the accepted input).
      world.countdown = incarnation < crashBudget ? r.int(25) : undefined;
      await session.resume();
      // A signal whose call died with the process is sent again, with the same requestId.
      for (const [key, n] of world.sent)
        if (!world.confirmed.has(key)) await sendSignal(session, world, key, n);
      for (let rounds = 0; rounds < 200 && !world.dead; rounds++) {
        await session.whenIdle();
        if (world.dead || session.status !== "open") break;
        if (r.chance(0.2) && (await signalSomething(session, world, r, roots))) continue;
        // Parked waits left in storage on open count as pending work too (listed from storage).
        const parked =
          session.parkedInStorage > 0 ? (await session.readParkedWaits({ limit: 1000 })).waits : [];
        if (r.chance(0.04)) {
          const open = session
            .view()
            .tasks.filter((t) => !["succeeded", "failed", "cancelled"].includes(t.state.status))
            .map((t) => ({ id: t.id }))
            .concat(parked.map((wait) => ({ id: wait.taskId })));
          const victim = open[r.int(open.length)];
          if (victim) {
            cancelled.add(victim.id);
            await session.cancel(victim.id, "simulated user cancel");
            continue;
          }
        }
        const wake = session.wakeInfo();
        if (wake.nextWakeAt !== undefined) timers.advance(Math.max(0, wake.nextWakeAt - clock.now()));
        else if (session.view().pending.length + parked.length > 0) {
          // Nothing wakes by itself: someone answers a wait.
          const pending = [...session.view().pending, ...parked];
          const key = (pending[r.int(pending.length)] ?? pending[0])?.key as string;
          if (!world.sent.has(key)) world.sent.set(key, r.int(100));
          await sendSignal(session, world, key, world.sent.get(key) as number);
        } else break;
      }
    } catch (error) {
      if (!world.dead) throw error;
    }
    if (world.dead) continue;
    const view = session?.view();
    if (
      session?.parkedInStorage === 0 &&
      view?.tasks.every((t) => ["succeeded", "failed", "cancelled"].includes(t.state.status))
    )
      break;
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
  const signals = new Map<string, Signal>();
  const keys = [...world.sent.keys()];
  for (const [i, row] of (await disk.readSignals("sim", keys)).entries())
    if (row) signals.set(keys[i] as string, row.value as Signal);
  return {
    seed,
    tasks: [...all.tasks],
    log: changes,
    signals,
    roots,
    cancelled,
    world,
    incarnations: incarnation + 1,
  };
}
