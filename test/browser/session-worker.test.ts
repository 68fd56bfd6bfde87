/** The kernel in a real dedicated Web Worker in Chromium, driven from the page through the comlink client. */
import { describe, expect, it } from "vitest";
import type { CommitRecord } from "../../src/index.ts";
import { connectSessionWorker } from "../../worker/index.ts";

function startWorker(db: string, session: string) {
  const worker = new Worker(new URL("./fixtures/session.worker.ts", import.meta.url), {
    type: "module",
    name: JSON.stringify({ db, session }),
  });
  return { worker, client: connectSessionWorker(worker) };
}

describe("session worker (comlink)", () => {
  it("submits, streams committed changes to the page, and waits for the result", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const { worker, client } = startWorker(db, "s1");
    for (let i = 0; i < 200 && (await client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(await client.role()).toBe("leader");
    const changes: CommitRecord[] = [];
    const stop = await client.subscribe(0, (change) => changes.push(change));
    const sub = await client.submit({ requestId: "r1", conversationId: "main", input: "over the boundary" });
    const done = await client.wait(sub.id);
    expect(done).toMatchObject({ status: "succeeded", result: { echoed: "over the boundary" } });
    // The listener runs in the page, called from the worker: wait for the commit that ended the run.
    const ended = () => changes.some((c) => c.submissions.some((s) => s.status === "succeeded"));
    for (let i = 0; i < 200 && !ended(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(changes.map((c) => c.version)).toEqual(changes.map((_, i) => i + 1)); // in order, no gap
    expect(changes.flatMap((c) => c.entries.map((e) => e.content.kind))).toEqual(["user", "note"]);
    await stop();
    const view = await client.view();
    expect(view?.submissions[0]?.status).toBe("succeeded");
    await client.close();
    worker.terminate();
  });

  it("delivers errors across the boundary with their name and code", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const { worker, client } = startWorker(db, "s2");
    const error = await client
      .submit({ requestId: "", conversationId: "main", input: "x" })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "InvalidArgumentError", code: "invalid-argument" });
    expect((error as Error).message).toContain("requestId");
    await client.close();
    worker.terminate();
  });
});
