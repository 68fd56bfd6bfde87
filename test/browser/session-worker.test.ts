/** The kernel in a real dedicated Web Worker in Chromium, driven from the page through the comlink client. */
import { describe, expect, it } from "vitest";
import {
  type CommitRecord,
  HistoryTruncatedError,
  InvalidArgumentError,
  indexedDbStorage,
  openSession,
  SignalRefusedError,
} from "../../src/index.ts";
import { connectSessionWorker } from "../../worker/index.ts";
import { writeParkedWaitsForTest } from "../support/parked-seed.ts";

function startWorker(db: string, session: string, quotaAfter?: number, retain?: number) {
  const worker = new Worker(new URL("./fixtures/session.worker.ts", import.meta.url), {
    type: "module",
    name: JSON.stringify({ db, session, quotaAfter, retain }),
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
    const trimmed = await client.view({ entries: 1, tasks: "active" });
    expect(trimmed?.conversations[0]?.entries.map((e) => e.content.kind)).toEqual(["note"]);
    expect(trimmed?.tasks).toEqual([]);
    await client.close();
    worker.terminate();
  });

  it("lists the parked waits left in storage, and a signal for one reads it back and runs it", async () => {
    const db = `worker-parked-${Math.random().toString(36).slice(2)}`;
    const seed = indexedDbStorage(db, { durability: "relaxed" });
    await writeParkedWaitsForTest(seed, "s-parked", 120, 30);
    await seed.close();
    const { worker, client } = startWorker(db, "s-parked");
    for (let i = 0; i < 200 && (await client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect((await client.view())?.pending).toEqual([]); // none of them is in the worker's memory
    const keys: string[] = [];
    let page = await client.parkedWaits({ limit: 50 });
    expect(page?.parked).toBe(120);
    for (let n = 0; n < 10 && page; n++) {
      keys.push(...page.waits.map((w) => w.key));
      if (page.next === undefined) break;
      page = await client.parkedWaits({ before: page.next, limit: 50 });
    }
    expect(new Set(keys)).toEqual(new Set(Array.from({ length: 120 }, (_, n) => `ask:${n}`)));
    const receipt = await client.signal("ask:7", { answer: "seven" }, { requestId: "a7" });
    expect(receipt.takenBy).toBeDefined();
    const done = async () => (await client.view())?.tasks.find((t) => t.id === receipt.takenBy)?.state.status;
    for (let i = 0; i < 200 && (await done()) !== "succeeded"; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(await done()).toBe("succeeded");
    expect((await client.parkedWaits())?.parked).toBe(119);
    // One no wait takes (its key awaited by none) is kept, listed, and dropped on request.
    await client.signal("ask:500", { answer: "early" }, { requestId: "e1" });
    expect((await client.earlySignals()).map((signal) => signal.key)).toEqual(["ask:500"]);
    expect(await client.dropEarlySignal("ask:500")).toMatchObject({ key: "ask:500", requestId: "e1" });
    expect(await client.earlySignals()).toEqual([]);
    expect(await client.dropEarlySignal("ask:500")).toBeUndefined();
    await client.close();
    worker.terminate();
  });

  it("finds a reloaded page's Submission by its requestId without submitting again", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const first = startWorker(db, "s5");
    for (let i = 0; i < 200 && (await first.client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    const sub = await first.client.submit({ requestId: "page-run-1", conversationId: "main", input: "once" });
    await first.client.wait(sub.id);
    await first.client.close();
    first.worker.terminate(); // the page reloads
    const again = startWorker(db, "s5");
    for (let i = 0; i < 200 && (await again.client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(await again.client.submissionForRequest("page-run-1")).toMatchObject({
      id: sub.id,
      status: "succeeded",
    });
    expect(await again.client.submissionForRequest("never-sent")).toBeUndefined();
    // Nothing was submitted by looking: the session still holds one Submission.
    expect((await again.client.view())?.submissions).toHaveLength(1);
    await again.client.close();
    again.worker.terminate();
  });

  it("tells the page when a subscription cannot go on because the history it needs was pruned", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const { worker, client } = startWorker(db, "s6", undefined, 10);
    for (let i = 0; i < 200 && (await client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    // Past the first pruning boundary (every 256 versions), with 10 commits kept.
    for (let i = 0; i < 140; i++)
      await client.submit({ requestId: `p${i}`, conversationId: "main", input: `n${i}` });
    const last = await client.submit({ requestId: "last", conversationId: "main", input: "last" });
    await client.wait(last.id);
    const errors: Error[] = [];
    const stop = await client.subscribe(
      1,
      () => undefined,
      (error) => errors.push(error),
    );
    for (let i = 0; i < 200 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(errors.map((e) => e.name)).toEqual(["HistoryTruncatedError"]);
    expect(errors[0]).toBeInstanceOf(HistoryTruncatedError);
    expect(errors[0]).toMatchObject({ requestedAfter: 1 });
    await stop();
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

  it("rebuilds errors on the page as the class thrown, with its fields, in the leader tab and a follower tab", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const leader = startWorker(db, "s7");
    for (let i = 0; i < 200 && (await leader.client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    const follower = startWorker(db, "s7");
    await follower.client.submit({ requestId: "r1", conversationId: "main", input: "x" }); // its copy exists
    expect(await follower.client.role()).toBe("follower");
    for (const { client } of [leader, follower]) {
      const refused = await client.signal("nope:1", {}, { requestId: "z" }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(SignalRefusedError);
      expect(refused).toMatchObject({ name: "SignalRefusedError", code: "unknown-signal", key: "nope:1" });
      const invalid = await client
        .submit({ requestId: "", conversationId: "main", input: "x" })
        .catch((e: unknown) => e);
      expect(invalid).toBeInstanceOf(InvalidArgumentError);
      expect((invalid as InvalidArgumentError).issues.map((issue) => issue.path)).toContain("requestId");
    }
    await follower.client.close();
    await leader.client.close();
    follower.worker.terminate();
    leader.worker.terminate();
  });

  it("answers a cancel in a follower tab as the leader would, no longer refusing it for the tab's role", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const leader = startWorker(db, "s8");
    for (let i = 0; i < 200 && (await leader.client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    const follower = startWorker(db, "s8");
    const sub = await follower.client.submit({ requestId: "r1", conversationId: "main", input: "x" });
    expect(await follower.client.role()).toBe("follower");
    await follower.client.wait(sub.id);
    // Ended already: the cancel changes nothing and answers with it as it ended, as on the leader.
    expect(await follower.client.cancelSubmission(sub.id, "stop")).toMatchObject({
      id: sub.id,
      status: "succeeded",
    });
    const unknown = await follower.client.cancelSubmission("no-such-submission").catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(InvalidArgumentError);
    await follower.client.close();
    await leader.client.close();
    follower.worker.terminate();
    leader.worker.terminate();
  });

  it("releases listeners across the boundary when unsubscribed", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const { worker, client } = startWorker(db, "s3");
    let calls = 0;
    for (let i = 0; i < 50; i++) {
      const stop = await client.subscribe(0, () => calls++);
      await stop();
    }
    expect(await client.subscriptionCount()).toBe(0);
    await client.submit({ requestId: "after", conversationId: "main", input: "nobody is listening" });
    await new Promise((r) => setTimeout(r, 100));
    expect(calls).toBe(0);
    await client.close();
    worker.terminate();
  });

  it("surfaces a full quota to the page as a typed error, keeping what was committed", async () => {
    const db = `worker-${Math.random().toString(36).slice(2)}`;
    const { worker, client } = startWorker(db, "s4", 6); // room for one submission's 5 rows, not two
    for (let i = 0; i < 200 && (await client.role()) !== "leader"; i++)
      await new Promise((r) => setTimeout(r, 10));
    const kept = await client.submit({ requestId: "kept", conversationId: "main", input: "fits" });
    expect((await client.wait(kept.id)).status).toBe("succeeded");
    const error = await client
      .submit({ requestId: "too-much", conversationId: "main", input: "does not fit" })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "StorageError", code: "quota-exceeded" });
    const again = await client
      .submit({ requestId: "later", conversationId: "main", input: "x" })
      .catch((e: unknown) => e);
    // The stopped session is opened again for the next call, and the full store refuses that too.
    expect(again).toMatchObject({ name: "StorageError", code: "quota-exceeded" });
    await client.close();
    worker.terminate();
    // Reopened elsewhere, the session holds exactly what was committed before the quota ran out.
    const reopened = await openSession({ id: "s4", storage: indexedDbStorage(db), mode: "read" });
    expect(reopened.view().submissions.map((s) => s.requestId)).toEqual(["kept"]);
  });
});
