/**
 * Edge benchmarks on local workerd (miniflare), timed from Node by the wall clock: inside workerd the
 * clock only moves on I/O, so time is taken around requests that each do many operations, minus the
 * bare request round trip measured in the same run.
 *
 * - edge/commit: per-commit cost of a Session inside a Durable Object vs a raw `transactionSync` writing
 *   the same rows inside another object of the same class (each object holds one session, as in production),
 *   in the steady state: both sides first run {@link WARM_COMMITS} commits. V8 in workerd optimizes the
 *   kernel's functions only after 12,000–20,000 commits (seen with `--trace-opt` in a workerd config with
 *   `v8Flags`: `runGroup`, `prepareGroup`, `seal` reach TurboFan at 11,500–15,000, `appendEntry` and
 *   `commit` later), so the first thousands of commits of a fresh isolate run in its baseline and mid
 *   tiers; `edge/commit-cold` measures those (no warm-up), as a diagnostic. One isolate serves every Durable
 *   Object of a Worker on a machine, so a deployment with traffic runs warm.
 * - edge/submission-roundtrip: a scripted one-tool agent submission over HTTP, in one call (POST ?wait,
 *   answered once the submission has ended) vs a bare HTTP round trip through the same router to the same
 *   Durable Object.
 * - signal/…/do-sqlite: the signal benchmarks of bench/signals.ts in Durable Objects (see
 *   {@link edgeSignalBench}).
 */
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import type { Miniflare } from "miniflare";
import { bundleWorker, startWorkerd } from "../test/support/workerd.ts";
import { median } from "./workload.ts";

/** Commits each side runs before the measured rounds of `edge/commit` (see the header). */
export const WARM_COMMITS = 30_000;
/** Measured rounds per side: each one request of 200 commits, the median taken. */
const ROUNDS = 40;

/** A workerd for the benchmarks; `dispose` also gives this process its CPUs back. */
async function startBenchWorker(): Promise<{ workerd: Miniflare; dispose(): Promise<void> }> {
  const script = await bundleWorker(fileURLToPath(new URL("./edge/bench-worker.ts", import.meta.url)));
  const workerd = startWorkerd(script, { SESSIONS: "BenchSession", COMMITS: "CommitBench" }, undefined, {
    API_TOKEN: "bench",
  });
  await workerd.ready;
  const unpin = pinApart();
  return {
    workerd,
    async dispose() {
      unpin();
      await workerd.dispose();
    },
  };
}

/**
 * Runs workerd (every thread) on the last CPU and this process on the others, so the driver and its garbage
 * collector never preempt the runtime being timed, and both sides of a ratio run under the same conditions
 * (on a 2-CPU machine, three unpinned runs of one build gave 0.98, 1.25 and 1.26; pinned, 1.13–1.20).
 * Linux with `taskset` and ≥ 2 CPUs only; elsewhere it changes nothing and says so. Returns the undo.
 */
function pinApart(): () => void {
  const cpus = availableParallelism();
  const run = (args: string[]) => execFileSync(args[0] as string, args.slice(1), { encoding: "utf8" });
  try {
    if (process.platform !== "linux" || cpus < 2) throw new Error(`${cpus} CPU`);
    const runtimes = run(["pgrep", "-P", String(process.pid), "workerd"])
      .trim()
      .split("\n");
    for (const pid of runtimes) run(["taskset", "-a", "-p", "-c", String(cpus - 1), pid]);
    run(["taskset", "-a", "-p", "-c", `0-${cpus - 2}`, String(process.pid)]);
    return () => void run(["taskset", "-a", "-p", "-c", `0-${cpus - 1}`, String(process.pid)]);
  } catch (error) {
    console.error(`edge benchmarks: workerd not pinned to its own CPU (${(error as Error).message.trim()})`);
    return () => undefined;
  }
}

/** Wall time of one request in ms; fails on a non-2xx answer. */
async function timed(workerd: Miniflare, path: string, init?: { method: string; body: string }) {
  const start = performance.now();
  const response = await workerd.dispatchFetch(`http://bench${path}`, {
    headers: { authorization: "Bearer bench", "content-type": "application/json" },
    ...init,
  });
  const text = await response.text();
  const elapsed = performance.now() - start;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status} ${text}`);
  return { elapsed, text };
}

/**
 * `durable`: every measured commit on both sides is followed by `storage.sync()`, so each is its own durable
 * SQLite commit, as in production, where a phase ends after I/O. Without it, a request's commits share the
 * platform's one implicit transaction and only the per-commit work inside `transactionSync` is compared.
 * `warmCommits`: commits each side runs first (not durable, not measured).
 */
export async function edgeCommitBench(options: {
  durable?: boolean;
  warmCommits: number;
}): Promise<{ ours: number; floor: number }> {
  const { durable = false, warmCommits } = options;
  const { workerd, dispose } = await startBenchWorker();
  try {
    const template = (await timed(workerd, "/commit/ours/setup-ours")).text;
    await timed(workerd, "/commit/raw/setup-raw", { method: "POST", body: template });
    const perRound = 200;
    const samples = { ours: [] as number[], raw: [] as number[] };
    // Each side numbers its own commits from 50 on (the setup wrote 1–50), as a session does.
    const next = { ours: 50, raw: 50 };
    const commits = async (side: "ours" | "raw", n: number, flag = "") => {
      const result = await timed(workerd, `/commit/${side}/${side}?n=${n}&from=${next[side]}${flag}`);
      next[side] += n;
      return result;
    };
    for (let done = 0; done < warmCommits; done += 1000) {
      await commits("ours", 1000);
      await commits("raw", 1000);
    }
    // Each measured request follows an unmeasured one of its own kind, so it pays only for itself (as a
    // Durable Object that runs one session does), never for what the other side's writes left behind;
    // which side goes first alternates, and the median of many short rounds shrugs off machine noise.
    for (let round = 0; round < ROUNDS; round++) {
      const sides = round % 2 ? (["ours", "raw"] as const) : (["raw", "ours"] as const);
      for (const side of sides) {
        const flag = durable ? "&durable" : "";
        await commits(side, 50, flag);
        const ping = (await timed(workerd, `/commit/${side}/ping`)).elapsed; // a bare round trip to the object
        const { elapsed } = await commits(side, perRound, flag);
        samples[side].push((elapsed - ping) / perRound);
      }
    }
    return { ours: median(samples.ours), floor: median(samples.raw) };
  } finally {
    await dispose();
  }
}

export async function edgeSubmissionBench(): Promise<{ ours: number; floor: number }> {
  const { workerd, dispose } = await startBenchWorker();
  try {
    const submit = async (i: number) => {
      const body = JSON.stringify({ requestId: `r${i}`, conversationId: `c${i}`, input: "look it up" });
      const { text, elapsed } = await timed(workerd, "/sessions/bench/submissions?wait=10000", {
        method: "POST",
        body,
      });
      const done = JSON.parse(text) as { id: string; status: string };
      if (done.status !== "succeeded") throw new Error(`submission ${done.id} did not succeed`);
      return elapsed;
    };
    for (let i = 0; i < 20; i++) await submit(i); // warm-up
    const ours: number[] = [];
    const floor: number[] = [];
    for (let i = 0; i < 100; i++) {
      ours.push(await submit(100 + i));
      floor.push((await timed(workerd, "/__ping/bench")).elapsed);
    }
    return { ours: median(ours), floor: median(floor) };
  } finally {
    await dispose();
  }
}

/**
 * agent/tool-call-vs-minimal/do-sqlite: the tool-call workload (bench/tool-call.ts) in a Durable Object, ms
 * per tool call from Node's clock around the request, minus a bare round trip; the floor is one
 * `transactionSync` writing a 300-byte record, timed inside the object (its clock moves on I/O only, and
 * those awaits settle at once, so the floor is timed over many writes in one request). Also reports rows
 * per tool call as SQLite counts them (index rows included).
 */
export async function edgeToolCallBench(): Promise<{
  ours: number;
  floor: number;
  rows: number;
  sqliteRows: number;
  bytes: number;
}> {
  const { workerd, dispose } = await startBenchWorker();
  try {
    type Run = { toolCalls: number; rows: number; bytes: number; sqliteRowsWritten: number };
    const run = async (n?: number) => {
      const { elapsed, text } = await timed(workerd, `/commit/agent/toolcalls${n ? `?n=${n}` : ""}`);
      const { toolCalls } = JSON.parse(text) as { toolCalls: number };
      const counted = JSON.parse((await timed(workerd, "/commit/agent/toolcalls-count")).text) as Omit<
        Run,
        "toolCalls"
      >;
      return { elapsed, run: { ...counted, toolCalls } };
    };
    // Warm-up: 40 runs, 16,000 commits. workerd's V8 optimizes the kernel only after some 12,000-20,000
    // commits (see `edge/commit`); with 600 commits of warm-up this line measured 0.28 ms, warm 0.19.
    for (let i = 0; i < 40; i++) await run();
    const ours: number[] = [];
    const floor: number[] = [];
    let last: Run | undefined;
    for (let round = 0; round < 7; round++) {
      const ping = (await timed(workerd, "/commit/agent/ping")).elapsed;
      const ran = await run();
      last = ran.run;
      ours.push((ran.elapsed - ping) / ran.run.toolCalls);
      const raw = await timed(workerd, `/commit/steps/rawsteps?n=3000&from=${round * 3000}`);
      floor.push((raw.elapsed - ping) / 3000);
    }
    if (!last) throw new Error("no rounds");
    return {
      ours: median(ours),
      floor: median(floor),
      rows: last.rows / last.toolCalls,
      sqliteRows: last.sqliteRowsWritten / last.toolCalls,
      bytes: last.bytes / last.toolCalls,
    };
  } finally {
    await dispose();
  }
}

/** Signals per measured request of {@link edgeSignalBench}, and its rounds (the first ones warm V8 up). */
const SIGNALS = 20;
const SIGNAL_ROUNDS = { warm: 250, measured: 30 };

/**
 * The signal benchmarks of bench/signals.ts in Durable Objects (each session in its own object, as in
 * production), ms per signal from Node's clock around requests of {@link SIGNALS} signals, minus a bare round
 * trip to the same object:
 * - roundtrip: from `signal()` to the waiting task's next phase starting (a live wait), vs a plain commit of
 *   the same payload in the same session;
 * - waiting: `signal()` in a reopened session of some 10,000 open waits (15,600 at first: each round takes
 *   20), on keys of parked waits (read back by key), vs one of 100 live waits.
 * A signalled task's next phase then holds (it commits nothing), and each round spawns new waits, untimed,
 * where it signalled some. The first {@link SIGNAL_ROUNDS}.warm rounds (some 40,000 commits) are not measured:
 * workerd's V8 optimizes the kernel only after 12,000–20,000 commits (see `edge/commit`), and with 100 rounds
 * of warm-up the round trip read anywhere from 1.16 to 1.70 between runs (1.02–1.37 with 250).
 */
export async function edgeSignalBench(): Promise<{
  roundtrip: { ours: number; floor: number };
  waiting: { ours: number; floor: number };
}> {
  const { workerd, dispose } = await startBenchWorker();
  try {
    const on = (object: string, path: string) => timed(workerd, `/commit/${object}${path}`);
    /** ms per signal (or commit) of one request to `object`, its bare round trip taken off. */
    const per = async (object: string, path: string) => {
      const ping = (await on(object, "/ping")).elapsed;
      return ((await on(object, path)).elapsed - ping) / SIGNALS;
    };
    // The big session keeps some 10,000 open waits through the measured rounds: each round takes 20.
    const taken = (SIGNAL_ROUNDS.warm + SIGNAL_ROUNDS.measured) * SIGNALS;
    for (const [object, n] of [
      ["rt", 100],
      ["small", 100],
      ["big", 10_000 + taken],
    ] as const) {
      const { parked } = JSON.parse((await on(object, `/waits-setup?n=${n}&name=${object}`)).text);
      if (parked !== Math.max(0, n - 100)) throw new Error(`${object}: ${parked} parked waits`);
    }
    const samples = {
      signal: [] as number[],
      plain: [] as number[],
      small: [] as number[],
      big: [] as number[],
    };
    // Keys signalled next: the first ones of rt and small (live), those of big past its live ones (parked).
    const next = { rt: 0, small: 0, big: 200 };
    const spawned = { rt: 100, small: 100 };
    for (let round = 0; round < SIGNAL_ROUNDS.warm + SIGNAL_ROUNDS.measured; round++) {
      const measured = round >= SIGNAL_ROUNDS.warm;
      // Which side of each pair goes first alternates, so neither pays for what the other left (garbage).
      const pair = async (a: () => Promise<number>, b: () => Promise<number>) => {
        if (round % 2 === 0) {
          const first = await a();
          return [first, await b()] as const;
        }
        const second = await b();
        return [await a(), second] as const;
      };
      const [signal, plain] = await pair(
        () => per("rt", `/waits-signal?n=${SIGNALS}&from=${next.rt}&name=rt&phase`),
        () => per("rt", `/waits-plain?n=${SIGNALS}`),
      );
      const [small, big] = await pair(
        () => per("small", `/waits-signal?n=${SIGNALS}&from=${next.small}&name=small`),
        () => per("big", `/waits-signal?n=${SIGNALS}&from=${next.big}&name=big`),
      );
      if (measured) {
        samples.signal.push(signal);
        samples.plain.push(plain);
        samples.small.push(small);
        samples.big.push(big);
      }
      next.rt += SIGNALS;
      next.small += SIGNALS;
      next.big += SIGNALS;
      // The live waits signalled are replaced (untimed): rt and small keep 100 open waits.
      for (const object of ["rt", "small"] as const) {
        await on(object, `/waits-spawn?n=${SIGNALS}&from=${spawned[object]}&name=${object}`);
        spawned[object] += SIGNALS;
      }
    }
    return {
      roundtrip: { ours: median(samples.signal), floor: median(samples.plain) },
      waiting: { ours: median(samples.big), floor: median(samples.small) },
    };
  } finally {
    await dispose();
  }
}
