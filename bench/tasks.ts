/**
 * Task benchmarks on fake-indexeddb:
 * - fanout/10000-vs-1000: time per child for a parent waiting (allSettled) on 10,000 children vs 1,000.
 * - phases/chain-1000: a chain of 1,000 no-op phases vs 1,000 raw transactions writing the same rows.
 */
import { z } from "zod";
import {
  type CommitRecord,
  createRegistry,
  defineTask,
  indexedDbStorage,
  openSession,
} from "../src/index.ts";
import { median, rawCommits } from "./workload.ts";

const noop = defineTask({
  kind: "noop",
  version: 1,
  input: z.object({}),
  phases: { run: (ctx) => ctx.complete() },
});
const parent = defineTask({
  kind: "parent",
  version: 1,
  input: z.object({ children: z.number().int() }),
  phases: {
    spawn: (ctx) => {
      const ids = Array.from({ length: ctx.input.children }, () => ctx.spawn("noop", {}));
      return ctx.wait(ids, { policy: "allSettled", next: "done" });
    },
    done: (ctx) => ctx.complete({ children: ctx.children().length }),
  },
});
const chain = defineTask({
  kind: "chain",
  version: 1,
  input: z.object({ phases: z.number().int() }),
  phases: {
    step: (ctx) => {
      const n = (ctx.data as number | null) ?? 0;
      return n + 1 < ctx.input.phases ? ctx.next("step", n + 1) : ctx.complete(n + 1);
    },
  },
});
const registry = () => createRegistry({ tasks: [noop, parent, chain] });

let databases = 0;
async function fanoutMsPerChild(children: number): Promise<number> {
  const storage = indexedDbStorage(`fanout-${databases++}`, { durability: "relaxed" });
  const session = await openSession({ id: "fanout", storage, registry: registry() });
  await session.resume();
  const start = performance.now();
  const task = await session.spawn("parent", { children });
  const done = await session.waitForTask(task.id);
  const elapsed = performance.now() - start;
  if ((done.state as { result?: { children: number } }).result?.children !== children) {
    throw new Error(`fanout ${children}: parent ended ${JSON.stringify(done.state)}`);
  }
  await session.close();
  await storage.close();
  return elapsed / children;
}

export async function fanoutBench(): Promise<{ ours: number; floor: number }> {
  await fanoutMsPerChild(1_000); // warm-up
  const ours: number[] = [];
  const floor: number[] = [];
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
  for (let i = 0; i < 5; i++) {
    gc();
    floor.push(await fanoutMsPerChild(1_000));
    gc();
    ours.push(await fanoutMsPerChild(10_000));
  }
  return { ours: median(ours), floor: median(floor) };
}

async function chainRun(phases: number): Promise<{ ms: number; log: CommitRecord[] }> {
  const database = `chain-${databases++}`;
  const storage = indexedDbStorage(database, { durability: "relaxed" });
  const session = await openSession({ id: "chain", storage, registry: registry() });
  await session.resume();
  const task = await session.spawn("chain", { phases });
  const start = performance.now();
  await session.waitForTask(task.id);
  const ms = performance.now() - start;
  const { changes } = await session.readChanges(0, phases + 10);
  await session.close();
  await storage.close();
  return { ms, log: changes };
}

export async function chainBench(): Promise<{ ours: number; floor: number }> {
  // Warm-up: the JIT and the IndexedDB shim. (No forced GC here: a full collection flushes the bytecode of
  // functions it considers cold, which would charge recompilation to whichever side runs next.)
  for (let i = 0; i < 3; i++) {
    const { log } = await chainRun(1_000);
    await rawChain(log);
  }
  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < 7; i++) {
    const { ms, log } = await chainRun(1_000);
    ours.push(ms / 1_000);
    floor.push(await rawChain(log));
  }
  return { ours: median(ours), floor: median(floor) };
}

/**
 * The floor: the very rows the chain committed (one task row and one change record per phase), written
 * one raw transaction per phase into a database with the kernel's schema. Returns ms per transaction.
 */
async function rawChain(log: CommitRecord[]): Promise<number> {
  const database = `chain-raw-${databases++}`;
  const setup = indexedDbStorage(database);
  await setup.open("raw", { mode: "write", at: 0, entryTail: 1, settled: 0 });
  await setup.close();
  return rawCommits(database, log.slice(1, 1_001), "relaxed");
}
