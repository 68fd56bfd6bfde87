/**
 * worker/commit (runs in the Chromium bench page): per-commit cost through the worker host — page →
 * worker → IndexedDB → confirmation back on the page — vs a raw IndexedDB transaction writing the same
 * rows from the same page. Both use strict durability.
 */
import { indexedDbStorage } from "../src/index.ts";
import { connectSessionWorker } from "../worker/index.ts";
import { median, rawCommits } from "./workload.ts";

export async function workerCommitBench(): Promise<{ ours: number; floor: number }> {
  const database = `worker-bench-${Date.now()}`;
  const worker = new Worker(new URL("./browser/bench.worker.ts", import.meta.url), {
    type: "module",
    name: database,
  });
  const client = connectSessionWorker(worker);
  while ((await client.role()) !== "leader") await new Promise((resolve) => setTimeout(resolve, 20));
  let n = 0;
  const submitMany = async (count: number) => {
    const start = performance.now();
    for (let i = 0; i < count; i++)
      await client.submit({ requestId: `r${n++}`, conversationId: "main", input: "hello" });
    return (performance.now() - start) / count;
  };
  await submitMany(30); // warm-up
  const rawDatabase = `${database}-raw`;
  const setup = indexedDbStorage(rawDatabase);
  await setup.open("raw", { mode: "write", at: 0, entryTail: 1 });
  await setup.close();
  const ours: number[] = [];
  const floor: number[] = [];
  // Short alternating rounds: the disk's flush latency drifts over seconds and must hit both sides alike.
  for (let round = 0; round < 21; round++) {
    const before = n;
    ours.push(await submitMany(15));
    // The floor writes exactly the rows those commits wrote (each commit's rows in one transaction).
    const log = await client.changes(before + 1, 15);
    floor.push(await rawCommits(rawDatabase, log, "strict"));
  }
  await client.close();
  worker.terminate();
  return { ours: median(ours), floor: median(floor) };
}
