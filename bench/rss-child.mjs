/**
 * Peak RSS of the tool-call workload (bench/tool-call.ts) run from the built package (`dist/`, as users
 * install it) on fake-indexeddb, in a process of its own: `node bench/rss-child.mjs ours|floor`. `floor`
 * loads the same modules and runs only the raw 300-byte writes. Prints the peak RSS in MiB.
 */
import "fake-indexeddb/auto";
import { z } from "zod";
import {
  createAgent,
  createRegistry,
  defineTool,
  indexedDbStorage,
  openSession,
  scriptedModel,
} from "../dist/src/index.js";

const side = process.argv[2];
const ROUNDS = 100;
const PER_ROUND = 3;

if (side === "ours") {
  const noop = defineTool({
    name: "noop",
    description: "Does nothing",
    input: z.object({ n: z.number() }),
    replay: "unsafe",
    execute: async ({ n }) => ({ n }),
  });
  const turns = Array.from({ length: ROUNDS }, () => ({
    toolCalls: Array.from({ length: PER_ROUND }, (_, n) => ({ name: "noop", args: { n } })),
  }));
  turns.push({ text: "done" });
  const agent = createAgent({ model: scriptedModel(turns), tools: [noop], maxRounds: ROUNDS + 1 });
  const storage = indexedDbStorage("rss", { durability: "relaxed" });
  const session = await openSession({ id: "bench", storage, registry: createRegistry({ ...agent }) });
  await session.resume();
  const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
  const done = await session.wait(sub.id);
  if (done.status !== "succeeded") throw new Error(`the run ended ${done.status}`);
  await session.close();
} else {
  const db = await new Promise((resolve, reject) => {
    const request = indexedDB.open("raw", 1);
    request.onupgradeneeded = () => request.result.createObjectStore("steps");
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  const record = "x".repeat(280);
  for (let i = 0; i < ROUNDS * PER_ROUND; i++) {
    await new Promise((resolve, reject) => {
      const tx = db.transaction("steps", "readwrite", { durability: "relaxed" });
      tx.objectStore("steps").put({ step: i, at: i, record }, i);
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
    });
  }
  db.close();
}
// VmHWM is this process image's own peak; getrusage's maxRSS keeps the peak of the process that spawned us
// (Linux carries it across exec), which a long `npm run bench` run makes hundreds of MiB.
const { readFileSync, existsSync } = await import("node:fs");
const status = existsSync("/proc/self/status") ? readFileSync("/proc/self/status", "utf8") : "";
const hwm = /^VmHWM:\s+(\d+) kB/m.exec(status);
console.log(hwm ? Number(hwm[1]) / 1024 : process.resourceUsage().maxRSS / 1024);
