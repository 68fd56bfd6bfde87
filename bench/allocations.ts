/**
 * Bytes allocated while a piece of work runs, garbage-collected objects included, from V8's sampling heap
 * profiler (Node's inspector, in this process): an estimate, good to a few percent over a run of megabytes.
 */
import { Session } from "node:inspector/promises";

interface ProfileNode {
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

function total(node: ProfileNode): number {
  let sum = node.selfSize;
  for (const child of node.children) sum += total(child);
  return sum;
}

/** Runs `work` and returns what it allocated, in bytes. */
export async function allocatedBy(work: () => Promise<unknown>): Promise<number> {
  const session = new Session();
  session.connect();
  try {
    await session.post("HeapProfiler.enable");
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await work();
    const { profile } = (await session.post("HeapProfiler.stopSampling")) as unknown as {
      profile: { head: ProfileNode };
    };
    return total(profile.head);
  } finally {
    session.disconnect();
  }
}
