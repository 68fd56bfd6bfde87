/**
 * worker/commit (runs in the Chromium bench page): per-commit cost through the worker host — page →
 * worker → IndexedDB → confirmation back on the page — vs a raw IndexedDB transaction writing the same
 * rows from the same page. Both use strict durability.
 */
import { indexedDbStorage } from "../src/index.ts";
import { connectSessionWorker } from "../worker/index.ts";
import { median, openRawWriter, renumber } from "./workload.ts";

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
  // The floor writes the rows of the warm-up commits, renumbered as new ones (new keys each time).
  const template = await client.changes(0, 30);
  const raw = await openRawWriter(rawDatabase, "strict");
  const ours: number[] = [];
  const floor: number[] = [];
  // Small alternating blocks: the disk's flush latency drifts over seconds and must hit both sides alike.
  for (let block = 0; block < 40; block++) {
    ours.push(await submitMany(5));
    floor.push(await raw.write(renumber(template, 1000 + block * 5, 5)));
  }
  raw.close();
  await client.close();
  worker.terminate();
  return { ours: median(ours), floor: median(floor) };
}
