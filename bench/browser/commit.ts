import { compareCommitCost } from "../workload.ts";

(window as unknown as { runCommitBench: () => Promise<{ ours: number; floor: number }> }).runCommitBench =
  () => compareCommitCost(`chromium-${Date.now()}`, "strict", 7, 60);
