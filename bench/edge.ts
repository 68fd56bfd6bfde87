/**
 * Edge benchmarks on local workerd (miniflare), timed from Node by the wall clock: inside workerd the
 * clock only moves on I/O, so time is taken around requests that each do many operations, minus the
 * bare request round trip measured in the same run.
 *
 * - edge/commit: per-commit cost of a Session inside a Durable Object vs a raw `transactionSync` writing
 *   the same rows inside another object of the same class (each object holds one session, as in production).
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

/**
 * `durable`: every commit on both sides is followed by `storage.sync()`, so each is its own durable SQLite
 * commit, as in production, where a phase ends after I/O. Without it, a request's commits share the
 * platform's one implicit transaction and only the per-commit work inside `transactionSync` is compared.
 */
export async function edgeCommitBench(durable = false): Promise<{ ours: number; floor: number }> {
  const workerd = await startBenchWorker();
  try {
    const template = (await timed(workerd, "/commit/ours/setup-ours")).text;
    await timed(workerd, "/commit/raw/setup-raw", { method: "POST", body: template });
    const perRound = 200;
    const samples = { ours: [] as number[], raw: [] as number[] };
    let from = 50;
    // Each measured request follows an unmeasured one of its own kind, so it pays only for itself (as a
    // Durable Object that runs one session does), never for what the other side's writes left behind;
    // which side goes first alternates, and the median of many short rounds shrugs off machine noise.
    for (let round = 0; round < 24; round++) {
      const sides = round % 2 ? (["ours", "raw"] as const) : (["raw", "ours"] as const);
      for (const side of sides) {
        const flag = durable ? "&durable" : "";
        await timed(workerd, `/commit/${side}/${side}?n=50&from=${from}${flag}`);
        from += 50;
        const ping = (await timed(workerd, `/commit/${side}/ping`)).elapsed; // a bare round trip to the object
        const { elapsed } = await timed(workerd, `/commit/${side}/${side}?n=${perRound}&from=${from}${flag}`);
        from += perRound;
        samples[side].push((elapsed - ping) / perRound);
      }
    }
    return { ours: median(samples.ours), floor: median(samples.raw) };
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
