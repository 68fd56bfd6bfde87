/** The Node side of agent/tool-call-vs-minimal (bench/tool-call.ts): fake-indexeddb, allocations, peak RSS. */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { indexedDbStorage, memoryStorage } from "../src/index.ts";
import { allocatedBy } from "./allocations.ts";
import { compareToolCalls, rawIndexedDb, rawWrites, runWorkload } from "./tool-call.ts";

type Line = { ours: number; floor: number };
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
let databases = 0;

export async function toolCallBench(): Promise<{
  time: Line;
  bytes: Line;
  rows: Line;
  allocations: Line;
}> {
  const durability = "relaxed";
  const result = await compareToolCalls(
    (_, onWrite) => indexedDbStorage(`tool-calls-${databases++}`, { durability, onWrite }),
    () => rawIndexedDb(`tool-calls-raw-${databases++}`, durability),
    5,
    gc,
  );
  const { run } = result;
  // Allocations: the kernel alone (the in-memory store), per commit, vs one raw write on fake-indexeddb.
  let commits = 0;
  gc();
  const ours = await allocatedBy(async () => {
    commits = (await runWorkload((onWrite) => memoryStorage({ onWrite }))).counter.count().commits;
  });
  const writer = await rawIndexedDb(`tool-calls-raw-${databases++}`, durability);
  await rawWrites(writer, 50);
  gc();
  const floor = await allocatedBy(() => rawWrites(writer, 300, 100));
  await writer.close();
  return {
    time: { ours: result.ours, floor: result.floor },
    bytes: { ours: run.bytes / run.toolCalls, floor: 300 },
    rows: { ours: run.rows / run.toolCalls, floor: 1 },
    allocations: { ours: ours / commits / 1024, floor: floor / 300 / 1024 },
  };
}

/** Peak RSS (MiB) of bench/rss-child.mjs from the built package; builds `dist/` first (a stale one measures old code). */
export async function toolCallRss(): Promise<Line> {
  const root = fileURLToPath(new URL("..", import.meta.url));
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
  const peak = (side: string) =>
    Number(execFileSync(process.execPath, ["bench/rss-child.mjs", side], { cwd: root, encoding: "utf8" }));
  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < 3; i++) {
    ours.push(peak("ours"));
    floor.push(peak("floor"));
  }
  return { ours: Math.max(...ours), floor: Math.max(...floor) };
}
