/**
 * A Durable Object session of 100,000 settled Submissions, opened cold inside real workerd: it loads its
 * working set only, and the isolate's heap with it open (measured through V8's inspector) stays well under a
 * Durable Object's 128 MB.
 */
import { describe, expect, it } from "vitest";
import { historyHeap } from "../support/history-heap.ts";

describe("a long-lived session inside workerd", () => {
  it("opens 100,000 settled Submissions with the working set only, its heap measured there", async () => {
    const big = await historyHeap(100_000);
    expect(big.version).toBe(100_000);
    expect(big.view).toEqual({ submissions: 20, tasks: 20, entries: 200 });
    const mb = big.heap / 1024 / 1024;
    expect(mb).toBeLessThan(32);
    // And the open session itself is small: the isolate grew by less than 4 MB when it opened.
    expect((big.heap - big.baseline) / 1024 / 1024).toBeLessThan(4);
  }, 240_000);
});
