/**
 * Edge benchmarks on local workerd (miniflare), timed from Node by the wall clock: inside workerd the
 * clock only moves on I/O, so time is taken around requests that each do many operations, minus the
 * bare request round trip measured in the same run.
 *
 * - edge/commit: per-commit cost of a Session inside a Durable Object vs a raw `transactionSync` writing
 *   the same rows in the same object.
 * - edge/submission-roundtrip: a scripted one-tool agent submission over HTTP (POST, then GET ?wait until
 *   it ends) vs a bare HTTP round trip through the same router to the same Durable Object.
 */
import { fileURLToPath } from "node:url";
import type { Miniflare } from "miniflare";
import { bundleWorker, startWorkerd } from "../test/support/workerd.ts";
import { median } from "./workload.ts";

async function startBenchWorker(): Promise<Miniflare> {
  const script = await bundleWorker(fileURLToPath(new URL("./edge/bench-worker.ts", import.meta.url)));
  const workerd = startWorkerd(script, { SESSIONS: "BenchSession", COMMITS: "CommitBench" }, undefined, {
    API_TOKEN: "bench",
  });
  await workerd.ready;
  return workerd;
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

export async function edgeCommitBench(): Promise<{ ours: number; floor: number }> {
  const workerd = await startBenchWorker();
  try {
    await timed(workerd, "/commit/setup");
    const perRound = 400;
    const ours: number[] = [];
    const floor: number[] = [];
    for (let round = 0; round < 9; round++) {
      const from = 50 + round * perRound;
      const ping = (await timed(workerd, "/commit/ping")).elapsed; // a bare round trip to the object
      ours.push(
        ((await timed(workerd, `/commit/ours?n=${perRound}&from=${from}`)).elapsed - ping) / perRound,
      );
      floor.push(
        ((await timed(workerd, `/commit/raw?n=${perRound}&from=${from}`)).elapsed - ping) / perRound,
      );
    }
    return { ours: median(ours), floor: median(floor) };
  } finally {
    await workerd.dispose();
  }
}

export async function edgeSubmissionBench(): Promise<{ ours: number; floor: number }> {
  const workerd = await startBenchWorker();
  try {
    const submit = async (i: number) => {
      const body = JSON.stringify({ requestId: `r${i}`, conversationId: `c${i}`, input: "look it up" });
      const start = performance.now();
      const { text } = await timed(workerd, "/sessions/bench/submissions", { method: "POST", body });
      const { id } = JSON.parse(text) as { id: string };
      const done = JSON.parse((await timed(workerd, `/sessions/bench/submissions/${id}?wait=10000`)).text);
      if ((done as { status: string }).status !== "succeeded")
        throw new Error(`submission ${id} did not succeed`);
      return performance.now() - start;
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
    await workerd.dispose();
  }
}
