/**
 * `durable-agent/testing`: crash-test your own tasks and tools the way the kernel's own suite does. A
 * scenario is your registry, the outside world it talks to (fakes that outlive a process, like a mail
 * provider) and what a client does (submit with fixed requestIds, send signals). `simulateCrashes` runs it
 * once whole, then once per commit with the process killed right after that commit, and once per commit
 * with the process killed as it makes it (so whatever it did since its previous commit — an outside call
 * that went through — is not recorded: the mail accepted by the provider whose receipt never committed),
 * and, with `seeds`, with several kills at seeded random points; each time it reopens the session in a new
 * "process" until the work ends. After every run it checks the kernel's guarantees — every Submission ends,
 * no tool call is answered twice, an unsafe call re-entered after a kill is never run blindly again — and
 * your `check`.
 */

import { systemTimers, type Timers } from "../clock.ts";
import type { CommitRecord, Entry, Submission, Task } from "../records/schemas.ts";
import { isSubmissionFinished } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import { openSession } from "../session/open-session.ts";
import type { Session } from "../session/session.ts";
import { type MemoryStorage, memoryStorage } from "../storage/memory-storage.ts";
import type { CommitGuard, Storage } from "../storage/storage.ts";
import { ForwardingStorage } from "./forwarding-storage.ts";

export { ManualClock, ManualTimers, sequentialIds } from "../clock.ts";
export { ForwardingStorage } from "./forwarding-storage.ts";

/**
 * Where a process dies: right `after` its `commit`-th commit, or `before` it — as it makes that commit,
 * which is then not stored, so what the process did since its previous commit (an outside call that went
 * through) is not recorded.
 */
export interface KillPoint {
  readonly commit: number;
  readonly at: "after" | "before";
}

/**
 * A store handle that dies like the process holding it: after `kill()`, or at its kill point (a number `n`:
 * after its `n`-th commit), every call fails.
 */
export class CrashingStorage extends ForwardingStorage {
  commits = 0;
  private dead = false;
  private readonly killAt: KillPoint | undefined;
  constructor(inner: Storage, killAt?: number | KillPoint) {
    super(inner);
    this.killAt = typeof killAt === "number" ? { commit: killAt, at: "after" } : killAt;
  }
  get isDead(): boolean {
    return this.dead;
  }
  kill(): void {
    this.dead = true;
  }
  protected override target(): Storage {
    if (this.dead) throw new Error("the process holding this store was killed");
    return this.inner;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    const next = this.commits + 1;
    if (this.killAt?.at === "before" && next >= this.killAt.commit) this.kill();
    await super.commit(guard, commits);
    this.commits = next;
    if (this.killAt?.at === "after" && next >= this.killAt.commit) this.kill();
  }
}

/** What `simulateCrashes` runs. `W` is your outside world: created once per run, it survives every kill. */
export interface CrashScenario<W> {
  /** The session id (default "session"). */
  readonly sessionId?: string;
  /** A fresh outside world for one run. */
  world(): W;
  /** The registry of one process (a new one per process, as after a real restart). */
  registry(world: W): Registry;
  /**
   * What the client does in each process, after `resume()`: submit (with the same requestIds every time),
   * signal, commit. Returns the Submissions to wait for.
   */
  drive(session: Session, world: W): Promise<readonly Submission[]>;
  /** A process died: the world stops answering it (a dead process sends nothing more). */
  onDeath?(world: W): void;
  /** A new process starts. */
  onStart?(world: W): void;
  /** Your invariants, once the work ended: throw to fail the run. */
  check?(world: W, session: Session): void | Promise<void>;
}

export interface SimulateOptions {
  /** Runs with several kills at seeded random commit counts, besides one kill after every commit. */
  readonly seeds?: number;
  /** The most processes one run may use before it counts as stuck (default 8). */
  readonly maxProcesses?: number;
  /** Timers for the waits below (default the system's). */
  readonly timers?: Timers;
  /**
   * How long one process waits for its Submissions to end before the run fails as "never ended" (default
   * 30 s): work that waits for something the scenario never sends, say.
   */
  readonly maxWaitMs?: number;
}

/** One run that broke a guarantee. */
export interface CrashFailure {
  /** How it was killed: each process's kill point (`[{ commit: 3, at: "after" }]`: once, after its 3rd commit). */
  readonly kills: readonly KillPoint[];
  readonly error: string;
}

export interface CrashReport {
  /** Commits of the run without any kill. */
  readonly commits: number;
  readonly runs: number;
  readonly failures: readonly CrashFailure[];
}

/** Runs `scenario` whole, then killed after and before each commit, then under `seeds` random multi-kill plans. */
export async function simulateCrashes<W>(
  scenario: CrashScenario<W>,
  options: SimulateOptions = {},
): Promise<CrashReport> {
  const failures: CrashFailure[] = [];
  const whole = await runOnce(scenario, [], options);
  // A run that fails with no kill at all says what is wrong; kill plans on top of it would only repeat it.
  if (whole.error) return { commits: whole.commits, runs: 1, failures: [{ kills: [], error: whole.error }] };
  const plans: KillPoint[][] = [];
  for (let k = 1; k < whole.commits; k++) plans.push([{ commit: k, at: "after" }]);
  for (let k = 1; k <= whole.commits; k++) plans.push([{ commit: k, at: "before" }]);
  let seed = 0x2545f491;
  const random = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  for (let s = 0; s < (options.seeds ?? 0); s++) {
    const kills = 1 + Math.floor(random() * 3);
    plans.push(
      Array.from({ length: kills }, () => ({
        commit: 1 + Math.floor(random() * Math.max(1, whole.commits - 1)),
        at: random() < 0.5 ? ("after" as const) : ("before" as const),
      })),
    );
  }
  for (const kills of plans) {
    const run = await runOnce(scenario, kills, options);
    if (run.error) failures.push({ kills, error: run.error });
  }
  return { commits: whole.commits, runs: plans.length + 1, failures };
}

async function runOnce<W>(
  scenario: CrashScenario<W>,
  kills: readonly KillPoint[],
  options: SimulateOptions,
): Promise<{ commits: number; error?: string }> {
  const world = scenario.world();
  const disk: MemoryStorage = memoryStorage();
  const id = scenario.sessionId ?? "session";
  let commits = 0;
  for (let process = 0; process < (options.maxProcesses ?? 8); process++) {
    const storage = new CrashingStorage(disk.reopen(), kills[process]);
    scenario.onStart?.(world);
    let session: Session | undefined;
    try {
      session = await openSession({ id, storage, registry: scenario.registry(world) });
      await session.resume();
      const submissions = await scenario.drive(session, world);
      for (const submission of submissions) await waitForEnd(session, submission, options);
      commits += storage.commits;
      if (storage.isDead) throw new Error("killed");
      const error = await checkRun(scenario, world, session);
      await session.close();
      return { commits, ...(error !== undefined && { error }) };
    } catch (error) {
      commits += storage.commits;
      if (!storage.isDead) {
        await session?.close().catch(() => undefined); // its timers and subscriptions end with the run
        return { commits, error: `process ${process + 1}: ${(error as Error).message}` };
      }
      storage.kill();
      scenario.onDeath?.(world);
      void session?.close().catch(() => undefined); // its timers stop; its store is already dead
      // The dead process's phases wind down (their writes fail) before the next one starts.
      const timers = options.timers ?? systemTimers;
      await Promise.race([
        session?.whenIdle(),
        new Promise<void>((resolve) => timers.setTimeout(() => resolve(), 2_000)),
      ]);
    }
  }
  return { commits, error: `the work did not end within ${options.maxProcesses ?? 8} processes` };
}

/** Waits for a Submission to end, at most `maxWaitMs`; one that does not is a failure, not a hang. */
async function waitForEnd(session: Session, submission: Submission, options: SimulateOptions): Promise<void> {
  const timers = options.timers ?? systemTimers;
  const maxWaitMs = options.maxWaitMs ?? 30_000;
  const controller = new AbortController();
  const timer = timers.setTimeout(() => controller.abort(), maxWaitMs);
  try {
    await session.wait(submission.id, { signal: controller.signal });
  } catch (error) {
    if (!controller.signal.aborted) throw error;
    throw new Error(`submission ${submission.id} never ended (waited ${maxWaitMs} ms)`);
  } finally {
    timers.clearTimeout(timer);
  }
}

/** The kernel's guarantees and the scenario's own, on the finished run. */
async function checkRun<W>(
  scenario: CrashScenario<W>,
  world: W,
  session: Session,
): Promise<string | undefined> {
  const view = session.view();
  const open = view.submissions.filter((s) => !isSubmissionFinished(s));
  if (open.length > 0) return `submissions never ended: ${open.map((s) => s.id).join(", ")}`;
  for (const conversation of view.conversations) {
    const answered = new Set<string>();
    for (const entry of conversation.entries as readonly Entry[]) {
      if (entry.content.kind !== "tool-result") continue;
      if (answered.has(entry.content.toolCallId))
        return `tool call ${entry.content.toolCallId} answered twice in ${conversation.id}`;
      answered.add(entry.content.toolCallId);
    }
  }
  for (const task of view.tasks as readonly Task[]) {
    const blind = blindReplay(task);
    if (blind) return blind;
  }
  try {
    await scenario.check?.(world, session);
  } catch (error) {
    return `check: ${(error as Error).message}`;
  }
  return undefined;
}

/** An unsafe tool call that was re-entered after a kill must not have simply run again. */
function blindReplay(task: Task): string | undefined {
  if (task.kind !== "agent.tool" || task.state.status !== "succeeded") return undefined;
  const result = task.state.result as { via?: string } | null;
  const intent = task.checkpoint.data as { replay?: string } | null;
  // Re-entered after a kill (restarts > 0), an unsafe call must be confirmed, never simply run again.
  if (intent?.replay === "unsafe" && task.restarts > 0 && (result?.via === "run" || result?.via === "replay"))
    return `unsafe tool call ${task.id} was run again blindly after a crash`;
  return undefined;
}
