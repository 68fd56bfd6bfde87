/**
 * Why documents diff with `fast-json-patch` (see src/documents/json-patch.ts), measured in one run:
 * - `documents/diff-append-2000`: the kernel's diff of a 2,000-item array with one item appended (a stream
 *   record's chunks, a plan's steps) vs serializing that array once (the floor);
 * - `documents/rfc6902-append-400-vs-100`: `rfc6902`'s `createPatch` on the same edit at 400 items vs 100.
 *   Linear work would be ≈ 4; its minimal edit script for arrays is quadratic (≈ 16), which is why one
 *   append to 2,000 items ran out of a 4 GB heap (not run here).
 */
import { createPatch } from "rfc6902";
import { diffJson } from "../src/documents/json-patch.ts";
import type { Json } from "../src/index.ts";
import { median } from "./workload.ts";

const items = (n: number): Json[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `step-${i}`,
    text: `step ${i} of the plan`,
    done: i % 3 === 0,
  }));

function timed(run: () => unknown, rounds: number): number {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    run();
    samples.push(performance.now() - t0);
  }
  return median(samples);
}

/** ms per diff of one append to 2,000 items, vs one JSON.stringify of the array. */
export function diffAppendBench(): { ours: number; floor: number } {
  const before = { steps: items(2_000) };
  const after = { steps: [...before.steps, { id: "new", text: "one more", done: false }] };
  let ours = 0;
  let floor = 0;
  for (let round = 0; round < 3; round++) {
    ours += timed(() => diffJson(before, after), 50);
    floor += timed(() => JSON.stringify(after), 50);
  }
  return { ours: ours / 3, floor: floor / 3 };
}

/** rfc6902's createPatch on one append at 400 items vs at 100 (alternating). */
export function rfc6902ScalingBench(): { ours: number; floor: number } {
  const edit = (n: number) => {
    const before = { steps: items(n) };
    return [before, { steps: [...before.steps, { id: "new", text: "one more", done: false }] }] as const;
  };
  const [small, smallAfter] = edit(100);
  const [large, largeAfter] = edit(400);
  let ours = 0;
  let floor = 0;
  for (let round = 0; round < 3; round++) {
    floor += timed(() => createPatch(small, smallAfter), 10);
    ours += timed(() => createPatch(large, largeAfter), 10);
  }
  return { ours: ours / 3, floor: floor / 3 };
}
