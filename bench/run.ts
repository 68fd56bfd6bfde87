/**
 * `npm run bench [-- <name filter>]`: prints one JSON object per benchmark line:
 * {"bench": "<name>", "ours": <number>, "floor": <number>, "unit": "<unit>", "ratio": <ours/floor>}
 * The floor is the same work done the cheapest raw way, measured in the same run.
 */
import "fake-indexeddb/auto";
import { existsSync } from "node:fs";
import { commitsPerToolCallBench, parallelToolsBench, stepOverheadBench } from "./agent.ts";
import type { ChromiumEntry } from "./chromium.ts";
import {
  edgeCommitBench,
  edgeSignalBench,
  edgeSubmissionBench,
  edgeToolCallBench,
  WARM_COMMITS,
} from "./edge.ts";
import { diffAppendBench, rfc6902ScalingBench } from "./json-patch.ts";
import { openBench, streamBench, turnBench } from "./long-life.ts";
import { reopenBench } from "./reopen.ts";
import { roundtripBench, waitingBench } from "./signals.ts";
import { snapshotImportBench, snapshotVsReplayBench } from "./snapshot.ts";
import { chainBench, fanoutBench } from "./tasks.ts";
import { toolCallBench, toolCallRss } from "./tool-call-node.ts";
import { compareCommitCost, median } from "./workload.ts";

interface Result {
  ours: number;
  floor: number;
  unit: string;
  /** A warmed-up line's ratio on its first, cold run (printed with it). */
  coldRatio?: number;
}

const benches: Record<string, () => Promise<Result | undefined>> = {
  "commit/fake-indexeddb": async () => ({
    ...(await compareCommitCost("node", "strict", 9, 200)),
    unit: "ms/commit",
  }),
  "commit/chromium-indexeddb": async () => inChromium("runCommitBench", "ms/commit"),
  "reopen/10000-vs-100": async () => ({ ...(await reopenBench()), unit: "ms/reopen" }),
  "fanout/10000-vs-1000": async () => ({ ...(await fanoutBench()), unit: "ms/child" }),
  "phases/chain-1000": async () => ({ ...(await chainBench()), unit: "ms/phase" }),
  "phases/chain-1000/chromium-indexeddb": async () => inChromium("runChainBench", "ms/phase"),
  "agent/step-overhead": async () => ({ ...(await stepOverheadBench()), unit: "ms/step" }),
  "agent/step-overhead/chromium-indexeddb": async () => inChromium("runAgentBench", "ms/step"),
  "worker/commit": async () => workerCommit(),
  // Diagnostics from the same run: the hop floor (the raw transaction inside a plain worker, one message
  // each) against the page's raw transaction, and the session worker against that hop floor.
  "worker/commit-hop-only": async () => {
    const result = await workerCommit();
    return result?.hop === undefined ? undefined : { ...result, ours: result.hop };
  },
  "worker/commit-vs-hop": async () => {
    const result = await workerCommit();
    return result?.hop === undefined ? undefined : { ...result, floor: result.hop };
  },
  "worker/resume-10000-vs-100": async () => {
    const { chromiumPath } = await import("../test/support/chromium.ts");
    if (!existsSync(chromiumPath)) return undefined;
    const { resumeBench } = await import("./worker-resume.ts");
    return { ...(await resumeBench()), unit: "ms/resume" };
  },
  "edge/commit": async () => ({
    ...(await edgeCommitBench({ warmCommits: WARM_COMMITS })),
    unit: "ms/commit",
  }),
  // Diagnostics: the first commits of a fresh isolate (no warm-up: the kernel not yet optimized by V8), and
  // each commit on both sides made durable on its own (storage.sync()), as a phase ending after I/O commits.
  "edge/commit-cold": async () => ({ ...(await edgeCommitBench({ warmCommits: 0 })), unit: "ms/commit" }),
  "edge/commit-durable": async () => ({
    ...(await edgeCommitBench({ durable: true, warmCommits: WARM_COMMITS })),
    unit: "ms/commit",
  }),
  "edge/submission-roundtrip": async () => ({ ...(await edgeSubmissionBench()), unit: "ms/submission" }),
  // Why fast-json-patch (bench/json-patch.ts): our diff of one append to 2,000 items vs one stringify of
  // them, and rfc6902 on that edit at 400 items vs 100 (≈ 4 if linear, ≈ 16 if quadratic).
  "documents/diff-append-2000": async () => ({ ...diffAppendBench(), unit: "ms/diff" }),
  "documents/rfc6902-append-400-vs-100": async () => ({ ...rfc6902ScalingBench(), unit: "ms/diff" }),
  // The tool-call workload (bench/tool-call.ts): ms per tool call vs one raw 300-byte transaction.
  "agent/tool-call-vs-minimal/fake-indexeddb": async () => ({
    ...(await toolCalls()).time,
    unit: "ms/tool-call",
  }),
  // What the run writes per tool call (the floor: the one 300-byte record or row a minimal step writes).
  "agent/tool-call-bytes": async () => ({ ...(await toolCalls()).bytes, unit: "bytes/tool-call" }),
  "agent/tool-call-rows": async () => ({ ...(await toolCalls()).rows, unit: "rows/tool-call" }),
  // Bytes allocated per commit (garbage included) on the in-memory store vs per raw fake-indexeddb write.
  "agent/tool-call-allocations": async () => ({ ...(await toolCalls()).allocations, unit: "KiB/commit" }),
  // Peak RSS of the workload from the built package vs the same process doing only the raw writes.
  "agent/tool-call-rss": async () => ({ ...(await toolCallRss()), unit: "MiB" }),
  "agent/tool-call-vs-minimal/chromium": async () => inChromium("runToolCallBench", "ms/tool-call"),
  "agent/tool-call-vs-minimal/do-sqlite": async () => ({ ...(await edgeToolCalls()), unit: "ms/tool-call" }),
  // Rows SQLite writes per tool call in the Durable Object (index rows included: what the platform bills).
  "agent/tool-call-rows/do-sqlite": async () => {
    const run = await edgeToolCalls();
    return { ours: run.sqliteRows, floor: 1, unit: "rows/tool-call" };
  },
  "agent/commits-per-tool-call": async () => ({
    ...(await commitsPerToolCallBench()),
    unit: "txn/tool-call",
  }),
  "agent/parallel-tools": async () => ({ ...(await parallelToolsBench()), unit: "txn" }),
  "session/snapshot-vs-replay-10000/fake-indexeddb": async () => ({
    ...(await snapshotVsReplayBench()),
    unit: "ms/copy",
  }),
  "session/snapshot-import-vs-raw-10000/fake-indexeddb": async () => ({
    ...(await snapshotImportBench()),
    unit: "ms/import",
  }),
  "session/open-50000-vs-100/memory": async () => ({ ...(await longLife("memory")).open, unit: "ms/open" }),
  "session/heap-50000-vs-100/memory": async () => ({ ...(await longLife("memory")).heap, unit: "KiB" }),
  "session/open-50000-vs-100/fake-indexeddb": async () => ({
    ...(await longLife("fake-indexeddb")).open,
    unit: "ms/open",
  }),
  "session/heap-50000-vs-100/fake-indexeddb": async () => ({
    ...(await longLife("fake-indexeddb")).heap,
    unit: "KiB",
  }),
  "session/open-50000-vs-100/chromium-indexeddb": async () => {
    const run = await chromiumLongLife();
    return run && { ours: run.ours, floor: run.floor, unit: "ms/open" };
  },
  "session/heap-50000-vs-100/chromium-indexeddb": async () => {
    const run = await chromiumLongLife();
    return run && { ours: run.heapOurs, floor: run.heapFloor, unit: "KiB" };
  },
  "agent/turn-20000-vs-20": async () => ({ ...(await turnBench()), unit: "ms/turn" }),
  "agent/turn-20000-vs-20/chromium-indexeddb": async () => inChromium("runTurnBench", "ms/turn"),
  "session/open-50000-vs-100/do-sqlite": async () => {
    const { historyHeap } = await import("../test/support/history-heap.ts");
    const big: number[] = [];
    const small: number[] = [];
    for (let i = 0; i < 3; i++) {
      big.push((await historyHeap(50_000, { heap: false })).openMs);
      small.push((await historyHeap(100, { heap: false })).openMs);
    }
    return { ours: median(big), floor: median(small), unit: "ms/open" };
  },
  "session/heap-50000-vs-100/do-sqlite": async () => {
    const { historyHeap } = await import("../test/support/history-heap.ts");
    const big = await historyHeap(50_000);
    const small = await historyHeap(100);
    return { ours: big.heap / 1024, floor: small.heap / 1024, unit: "KiB" };
  },
  // Heap of the workerd isolate with the session open, in MB: 100,000 settled Submissions vs 100 (target ≤ 32).
  "edge/heap-100000": async () => {
    const { historyHeap } = await import("../test/support/history-heap.ts");
    const big = await historyHeap(100_000);
    const small = await historyHeap(100);
    return { ours: big.heap / 2 ** 20, floor: small.heap / 2 ** 20, unit: "MB" };
  },
  "stream/bytes-2000-chars": async () => ({ ...(await streamBench()), unit: "bytes" }),
  "devtools/first-paint-20000-vs-100": async () => {
    const run = await devtoolsRun();
    return run && { ...run.paint, unit: "ms" };
  },
  "devtools/history-20000-vs-100": async () => {
    const run = await devtoolsRun();
    return run && { ...run.history, unit: "ms" };
  },
  "devtools/action-20000-vs-100": async () => {
    const run = await devtoolsRun();
    return run && { ...run.action, unit: "ms/action" };
  },
  "signal/roundtrip": async () => ({ ...(await roundtripBench()), unit: "ms" }),
  "signal/roundtrip/chromium-indexeddb": async () => inChromium("runSignalBench", "ms"),
  "signal/waiting-10000-vs-100/signal": async () => ({ ...(await waiting()).signal, unit: "ms/signal" }),
  "signal/waiting-10000-vs-100/open": async () => ({ ...(await waiting()).open, unit: "ms/open" }),
  // In Durable Objects (workerd, SQLite): both lines share one run.
  "signal/roundtrip/do-sqlite": async () => ({ ...(await edgeSignals()).roundtrip, unit: "ms" }),
  "signal/waiting-10000-vs-100/signal/do-sqlite": async () => ({
    ...(await edgeSignals()).waiting,
    unit: "ms/signal",
  }),
  // The same in Chromium, IndexedDB on disk (strict): both lines share one run.
  "signal/waiting-10000-vs-100/signal/chromium-indexeddb": async () => chromiumWaiting(),
  "signal/waiting-10000-vs-100/open/chromium-indexeddb": async () => {
    const run = await chromiumWaiting();
    return run && { ours: run.openOurs, floor: run.openFloor, unit: "ms/open" };
  },
  // A linked session (bench/handoff.ts): commits with replication on vs off; hand-off to the edge's first commit.
  "handoff/replication": async () => {
    const { replicationBench } = await import("./handoff.ts");
    return { ...(await replicationBench()), unit: "ms/commit" };
  },
  "handoff/latency": async () => {
    const { latencyBench } = await import("./handoff.ts");
    return { ...(await latencyBench(false)), unit: "ms" };
  },
  "handoff/latency-crashed": async () => {
    const { latencyBench } = await import("./handoff.ts");
    return { ...(await latencyBench(true)), unit: "ms" };
  },
};

/** A run several lines share: started by the first line that asks for it, then the same for the others. */
function shared<T>(start: () => Promise<T>): () => Promise<T> {
  let run: Promise<T> | undefined;
  return () => {
    run ??= start();
    return run;
  };
}

/** The fake-indexeddb tool-call lines share one run. */
const toolCalls = shared(toolCallBench);
/** Both Durable Object tool-call lines share one run. */
const edgeToolCalls = shared(edgeToolCallBench);
/** Both signal/waiting lines share one run. */
const waiting = shared(waitingBench);
/** Both Durable Object signal lines share one run. */
const edgeSignals = shared(edgeSignalBench);
/** Both Chromium signal/waiting lines share one run. */
const chromiumWaiting = shared(
  () =>
    inChromium("runWaitingBench", "ms/signal") as Promise<
      (Result & { openOurs: number; openFloor: number }) | undefined
    >,
);
/** Both devtools lines share one run (a 20,000-commit history is written once). */
const devtoolsRun = shared(async () => {
  const { chromiumPath } = await import("../test/support/chromium.ts");
  if (!existsSync(chromiumPath)) return undefined;
  const { devtoolsBench } = await import("./devtools.ts");
  return devtoolsBench();
});
/** The Chromium open and heap lines share one run (real IndexedDB on disk; GC and exact heap sizes on). */
const chromiumLongLife = shared(
  () =>
    inChromium("runLongLifeBench", "ms/open", [
      "--js-flags=--expose-gc",
      "--enable-precise-memory-info",
    ]) as Promise<(Result & { heapOurs: number; heapFloor: number }) | undefined>,
);
/** The open and heap lines of one store share one run. */
const longLifeRuns = {
  memory: shared(() => openBench("memory")),
  "fake-indexeddb": shared(() => openBench("indexeddb")),
};
const longLife = (store: "memory" | "fake-indexeddb") => longLifeRuns[store]();
/** worker/commit and its diagnostics share one Chromium run. */
const workerCommit = shared(() => inChromium("runWorkerCommitBench", "ms/commit"));

/** Runs a benchmark page entry in Debian's Chromium, if it is installed. */
async function inChromium(
  entry: ChromiumEntry,
  unit: string,
  args: readonly string[] = [],
): Promise<(Result & { hop?: number }) | undefined> {
  // Loaded only here: Vite and Playwright would otherwise bloat the heap every other benchmark runs in.
  const { chromiumPath } = await import("../test/support/chromium.ts");
  if (!existsSync(chromiumPath)) {
    console.error(`${entry}: skipped, no Chromium at ${chromiumPath}`);
    return undefined;
  }
  const { runInChromium } = await import("./chromium.ts");
  return { ...(await runInChromium(entry, args)), unit };
}

const filter = process.argv[2] ?? "";
for (const [name, bench] of Object.entries(benches)) {
  if (!name.includes(filter)) continue;
  const result = await bench();
  if (!result) continue;
  const ratio = Math.round((result.ours / result.floor) * 1000) / 1000;
  const round = (n: number) => Math.round(n * 10_000) / 10_000;
  console.log(
    JSON.stringify({
      bench: name,
      ours: round(result.ours),
      floor: round(result.floor),
      unit: result.unit,
      ratio,
      ...(result.coldRatio !== undefined && { coldRatio: result.coldRatio }),
    }),
  );
}
