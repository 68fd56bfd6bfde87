/**
 * Agent-loop benchmarks on fake-indexeddb, with a deterministic model and no-op tools:
 * - agent/step-overhead: one agent run of 100 turns (model rounds) of 3 tool calls each; kernel ms per
 *   committed step vs a raw transaction writing the same rows (one per commit, no grouping), after 8 runs
 *   of warm-up (the first run's ratio as `coldRatio`).
 * - agent/commits-per-tool-call: storage transactions per tool call over that run, the Submission and
 *   final answer included (floor: 2, one for the intent and one for the result, as a naive loop pays).
 * - agent/parallel-tools: 100 turns x 8 parallel tool calls finishing in the same tick; storage
 *   transactions vs commits (the count if every commit had its own transaction).
 */
import { z } from "zod";
import {
  type CommitGuard,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  indexedDbStorage,
  type Model,
  openSession,
} from "../src/index.ts";
import { ForwardingStorage } from "../test/support/storage-wrappers.ts";
import { median, rawCommits } from "./workload.ts";

/** Calls `perRound` tools at once, `rounds` times in a row, then answers; counts rounds within the turn. */
function toolModel(rounds: number, perRound: number): Model {
  return {
    id: "bench",
    async generate(request) {
      const lastUser = request.messages.findLastIndex((m) => m.role === "user");
      const done = request.messages.slice(lastUser).filter((m) => m.role === "assistant").length;
      if (done >= rounds) return { text: "done", toolCalls: [], usage: { inputTokens: 10, outputTokens: 1 } };
      return {
        text: "",
        toolCalls: Array.from({ length: perRound }, (_, i) => ({
          id: `c${done}_${i}`,
          name: "noop",
          args: `{"n":${i}}`,
        })),
        usage: { inputTokens: 10, outputTokens: 5 },
      };
    },
  };
}

let sequential = false;
let previous: Promise<unknown> = Promise.resolve();
const noop = defineTool({
  name: "noop",
  description: "Does nothing",
  input: z.object({ n: z.number() }),
  replay: "unsafe",
  execute: async ({ n }) => {
    if (sequential) {
      // Finish one after another, a macrotask apart, instead of all in the same tick.
      const mine = previous.then(() => new Promise((resolve) => setTimeout(resolve, 0)));
      previous = mine;
      await mine;
    }
    return { n };
  },
});

/** Counts storage transactions and the commits they carried. */
class CountingStorage extends ForwardingStorage {
  transactions = 0;
  commits = 0;
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    this.transactions++;
    this.commits += commits.length;
    await this.inner.commit(guard, commits);
  }
}

let databases = 0;

/** Runs `turns` turns; sequential ones one after another, parallel ones all at once. */
async function runTurns(turns: number, rounds: number, perRound: number, concurrent: boolean) {
  const database = `agent-${databases++}`;
  const storage = new CountingStorage(indexedDbStorage(database, { durability: "relaxed" }));
  const agent = createAgent({ model: toolModel(rounds, perRound), tools: [noop], maxRounds: rounds + 1 });
  const session = await openSession({ id: "bench", storage, registry: createRegistry({ ...agent }) });
  await session.resume();
  const start = performance.now();
  const turn = async (i: number) => {
    const sub = await session.submit({ requestId: `r${i}`, conversationId: `c${i}`, input: "go" });
    const done = await session.wait(sub.id);
    if (done.status !== "succeeded") throw new Error(`turn ${i} ended ${done.status}`);
  };
  if (concurrent) await Promise.all(Array.from({ length: turns }, (_, i) => turn(i)));
  else for (let i = 0; i < turns; i++) await turn(i);
  const ms = performance.now() - start;
  const { changes } = await session.readChanges(0, 100_000);
  await session.close();
  return {
    ms,
    transactions: storage.transactions,
    commits: storage.commits,
    toolCalls: turns * rounds * perRound,
    log: changes,
    database,
  };
}

async function rawFloor(log: CommitRecord[]): Promise<number> {
  const database = `agent-raw-${databases++}`;
  const setup = indexedDbStorage(database);
  await setup.open("raw", { mode: "write", at: 0, entryTail: 1, settled: 0 });
  await setup.close();
  return rawCommits(database, log, "relaxed");
}

/**
 * ms per committed step, warm: V8 optimizes the kernel over its first few thousand commits (a run is 403),
 * so `warmRuns` whole runs go first, each with its floor (both sides warm alike), as the Durable Object
 * lines warm up (bench/edge.ts). The first pair's ratio is reported too (`coldRatio`): the line's first
 * run in this process (in a full `npm run bench`, lines before it have run the kernel already; its floor
 * runs after it, on a warmer fake-indexeddb).
 */
export async function stepOverheadBench(
  warmRuns = 8,
): Promise<{ ours: number; floor: number; coldRatio: number }> {
  // Tools return at once here: waiting inside tools would be charged to the kernel.
  sequential = false;
  let coldRatio = 0;
  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < warmRuns + 5; i++) {
    const run = await runTurns(1, 100, 3, false);
    const step = run.ms / run.commits;
    const raw = await rawFloor(run.log);
    if (i === 0) coldRatio = step / raw;
    if (i >= warmRuns) {
      ours.push(step);
      floor.push(raw);
    }
  }
  return { ours: median(ours), floor: median(floor), coldRatio: Math.round(coldRatio * 1000) / 1000 };
}

export async function commitsPerToolCallBench(): Promise<{ ours: number; floor: number }> {
  sequential = true;
  const run = await runTurns(1, 100, 3, false);
  return { ours: run.transactions / run.toolCalls, floor: 2 };
}

export async function parallelToolsBench(): Promise<{ ours: number; floor: number }> {
  sequential = false;
  const run = await runTurns(100, 1, 8, true);
  return { ours: run.transactions, floor: run.commits };
}
