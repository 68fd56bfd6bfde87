/**
 * `durable-agent/testing`: crash-test your own tasks and tools the way the kernel's own suite does. A
 * scenario is your registry, the outside world it talks to (fakes that outlive a process, like a mail
 * provider) and what a client does (submit with fixed requestIds, send signals). `simulateCrashes` runs it
 * once whole, then once per commit with the process killed right after that commit (and, with `seeds`,
 * with several kills at seeded random points), each time reopening the session in a new "process" until
 * the work ends. After every run it checks the kernel's guarantees — every Submission ends, no tool call is
 * answered twice, an unsafe call re-entered after a kill is never run blindly again — and your `check`.
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

/** A store handle that dies like the process holding it: after `kill()` (or its `killAfter`-th commit) every call fails. */
export class CrashingStorage extends ForwardingStorage {
  commits = 0;
  private dead = false;
  constructor(
    inner: Storage,
    private readonly killAfter = Number.POSITIVE_INFINITY,
  ) {
    super(inner);
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
    await super.commit(guard, commits);
    if (++this.commits >= this.killAfter) this.kill();
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
  /** Timers for the wait on a dead process's phases (default the system's). */
  readonly timers?: Timers;
}

/** One run that broke a guarantee. */
export interface CrashFailure {
  /** How it was killed: after which commit of each process (`[3]`: once, after its 3rd commit). */
  readonly kills: readonly number[];
  readonly error: string;
}

export interface CrashReport {
  /** Commits of the run without any kill. */
  readonly commits: number;
  readonly runs: number;
  readonly failures: readonly CrashFailure[];
}

/** Runs `scenario` whole, then killed after each commit, then under `seeds` random multi-kill plans. */
export async function simulateCrashes<W>(
  scenario: CrashScenario<W>,
  options: SimulateOptions = {},
): Promise<CrashReport> {
  const failures: CrashFailure[] = [];
  const whole = await runOnce(scenario, [], options);
  if (whole.error) failures.push({ kills: [], error: whole.error });
  const plans: number[][] = [];
  for (let k = 1; k < whole.commits; k++) plans.push([k]);
  let seed = 0x2545f491;
  const random = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  for (let s = 0; s < (options.seeds ?? 0); s++) {
    const kills = 1 + Math.floor(random() * 3);
    plans.push(
      Array.from({ length: kills }, () => 1 + Math.floor(random() * Math.max(1, whole.commits - 1))),
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
  kills: readonly number[],
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
      for (const submission of submissions) await session.wait(submission.id);
      commits += storage.commits;
      if (storage.isDead) throw new Error("killed");
      const error = await checkRun(scenario, world, session);
      await session.close();
      return { commits, ...(error !== undefined && { error }) };
    } catch (error) {
      commits += storage.commits;
      if (!storage.isDead) return { commits, error: `process ${process + 1}: ${(error as Error).message}` };
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
