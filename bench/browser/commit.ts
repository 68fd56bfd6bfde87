import { stepOverheadBench } from "../agent.ts";
import { roundtripBench, waitingBench } from "../signals.ts";
import { chainBench } from "../tasks.ts";
import { workerCommitBench } from "../worker.ts";
import { compareCommitCost } from "../workload.ts";

const benches = window as unknown as Record<string, () => Promise<{ ours: number; floor: number }>>;
benches.runCommitBench = () => compareCommitCost(`chromium-${Date.now()}`, "strict", 9, 80);
benches.runChainBench = () => chainBench();
benches.runAgentBench = () => stepOverheadBench();
benches.runWorkerCommitBench = () => workerCommitBench();
benches.runSignalBench = () => roundtripBench(60);
benches.runWaitingBench = async () => {
  const { signal, open } = await waitingBench();
  return { ours: signal.ours, floor: signal.floor, openOurs: open.ours, openFloor: open.floor };
};
benches.runToolCallBench = async () => {
  const { compareToolCalls, rawIndexedDb } = await import("../tool-call.ts");
  const { indexedDbStorage } = await import("../../src/index.ts");
  const stamp = Date.now();
  const result = await compareToolCalls(
    (i, onWrite) => indexedDbStorage(`tool-calls-${stamp}-${i}`, { durability: "relaxed", onWrite }),
    () => rawIndexedDb(`tool-calls-raw-${stamp}`, "relaxed"),
    5,
  );
  return { ours: result.ours, floor: result.floor };
};
benches.runLongLifeBench = async () => {
  const { openBench } = await import("../long-life.ts");
  const { open, heap } = await openBench("indexeddb");
  return { ours: open.ours, floor: open.floor, heapOurs: heap.ours, heapFloor: heap.floor };
};
benches.runTurnBench = async () => {
  const { turnBench } = await import("../long-life.ts");
  return turnBench("indexeddb");
};
