/**
 * A session that lives long (DESIGN §9): memory and open hold the working set only — unfinished work and
 * the latest K settled Submissions — while everything settled stays reachable in storage, by id, by
 * requestId and by page; views and folded change streams agree on the same rule.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  applyChangeToView,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  emptyView,
  indexedDbStorage,
  memoryStorage,
  openSession,
  type Registry,
  type SessionView,
  type Storage,
  type StoredSession,
  type Submission,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { STORAGE_FORMAT } from "../../src/records/schemas.ts";
import { durable } from "../support/storage-contract.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";

const lookup = defineTool({
  name: "lookup",
  description: "Look something up",
  input: z.object({ q: z.string() }),
  replay: "safe",
  execute: ({ q }) => ({ answer: q.toUpperCase() }),
});

function agentRegistry(): Registry {
  const model = scriptedModel([
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "done" }
        : { toolCalls: [{ name: "lookup", args: { q: String(request.messages.at(-1)?.content) } }] },
  ]);
  return createRegistry({ ...createAgent({ model, tools: [lookup] }) });
}

/** A store handle that records what each open returned. */
class OpenSpy extends ForwardingStorage {
  opened: StoredSession[] = [];
  override open: Storage["open"] = async (...args) => {
    const stored = await this.inner.open(...args);
    if (stored) this.opened.push(stored);
    return stored;
  };
}

async function run(storage: Storage, count: number, retainSettled = 2, start = 0) {
  const session = await openSession({
    id: "long",
    storage,
    registry: agentRegistry(),
    ids: sequentialIds(10_000 + start * 100),
    retainSettled,
  });
  await session.resume();
  const accepted: Submission[] = [];
  for (let i = start; i < start + count; i++) {
    // Each in a conversation of its own, so every turn runs one tool round: a tree of two tasks.
    const submission = await session.submit({ requestId: `r${i}`, conversationId: `c${i}`, input: `q${i}` });
    accepted.push(await session.wait(submission.id));
  }
  return { session, accepted };
}

const stores: [string, () => Storage][] = [
  ["memory", () => memoryStorage()],
  [
    "fake-indexeddb",
    () => indexedDbStorage(`long-${Math.random().toString(36).slice(2)}`, { durability: "relaxed" }),
  ],
];

describe.each(stores)("a long-lived session (%s)", (_name, makeStore) => {
  it("keeps only the latest K settled Submissions and their trees in memory, view and open", async () => {
    const disk = makeStore();
    const { session, accepted } = await run(disk, 12);
    const view = session.view();
    expect(view.submissions.map((s) => s.requestId).sort()).toEqual(["r10", "r11"]);
    expect(view.tasks).toHaveLength(4); // two trees of a generation task and its tool call
    expect(view.limits.settled).toBe(2);
    const spy = new OpenSpy(disk);
    const reopened = await openSession({
      id: "long",
      storage: spy,
      registry: agentRegistry(),
      retainSettled: 2,
    });
    expect(durable(reopened.view())).toEqual(durable(view));
    // What open read: the two settled items, their four tasks, nothing older.
    expect(spy.opened[0]?.submissions).toHaveLength(2);
    expect(spy.opened[0]?.tasks).toHaveLength(4);
    expect(accepted.every((s) => s.status === "succeeded")).toBe(true);
  });

  it("reads evicted work back exactly as it was: by id, by requestId, by page, and task trees", async () => {
    const disk = makeStore();
    const { session, accepted } = await run(disk, 9);
    for (const submission of accepted) {
      expect(await session.readSubmission(submission.id)).toEqual(submission);
      expect(await session.readSubmissionForRequest(submission.requestId)).toEqual(submission);
      const tree = await session.readTaskTree(submission.taskId ?? "");
      expect(tree.map((t) => t.state.status)).toEqual(["succeeded", "succeeded"]);
      expect(await session.readTask(tree[1]?.id ?? "")).toEqual(tree[1]);
    }
    const seen: string[] = [];
    let before: number | undefined;
    for (;;) {
      const page = await session.readSubmissions({ limit: 4, ...(before !== undefined && { before }) });
      seen.push(...page.submissions.map((s) => s.requestId));
      if (page.next === null) break;
      before = page.next;
    }
    expect(seen).toEqual(accepted.map((s) => s.requestId).reverse());
    expect(await session.readSubmission("sub_missing")).toBeUndefined();
  });

  it("answers a retry of a long-evicted requestId with the original Submission, creating no work", async () => {
    const disk = makeStore();
    const { session, accepted } = await run(disk, 6);
    const first = accepted[0] as Submission;
    expect(session.view().submissions.some((s) => s.id === first.id)).toBe(false);
    const version = session.version;
    const retried = await session.submit({ requestId: "r0", conversationId: "elsewhere", input: "again" });
    expect(retried).toEqual(first);
    expect(session.version).toBe(version);
    await session.close();
    const reopened = await openSession({
      id: "long",
      storage: disk,
      registry: agentRegistry(),
      retainSettled: 2,
    });
    expect(await reopened.submit({ requestId: "r0", conversationId: "x", input: "again" })).toEqual(first);
    expect(reopened.version).toBe(version);
    expect(await reopened.wait(first.id)).toEqual(first);
  });

  it("delivers every change to a subscriber across eviction, and the fold equals the view", async () => {
    const disk = makeStore();
    const { session } = await run(disk, 3);
    const folded: CommitRecord[] = [];
    session.subscribe(0, (change) => folded.push(change));
    for (let i = 3; i < 9; i++) {
      const s = await session.submit({ requestId: `r${i}`, conversationId: `c${i}`, input: `q${i}` });
      await session.wait(s.id);
    }
    await session.whenIdle();
    let view: SessionView = emptyView("long", session.view().limits);
    for (const change of folded) view = applyChangeToView(view, change);
    expect(folded.map((c) => c.version)).toEqual(Array.from({ length: session.version }, (_, i) => i + 1));
    expect(view).toEqual(session.view());
  });
});

describe("memory of a long-lived session", () => {
  it("does not grow with settled history: 1,500 turns hold what 20 do", async () => {
    const { session } = await run(memoryStorage(), 1_500, 5);
    const view = session.view();
    expect(view.submissions).toHaveLength(5);
    expect(view.tasks).toHaveLength(10);
    // Each conversation keeps its tail; the session itself keeps nothing per past turn but its conversation.
    expect(view.conversations).toHaveLength(1_500);
  }, 60_000);
});

describe("a session stored by format 2 (no settled index)", () => {
  it("opens read-only as before, and a writer's open adds the index and moves it to the current format", async () => {
    const storage = memoryStorage();
    const { session } = await run(storage, 8, 3);
    const open = await session.submit({ requestId: "open", conversationId: "main", input: "still running" });
    const expected = session.view();
    await session.close();
    // Back to the format-2 layout: the session row says 2 and no item has a settled row.
    const { items } = await storage.readItems("long", Number.MAX_SAFE_INTEGER, 1_000);
    for (const item of items) storage.unsafeDeleteRaw("long", "settled", [item.version, item.id]);
    const spy = new OpenSpy(storage);
    const raw = await spy.open("long", { mode: "read", at: 0, entryTail: 1, settled: 0 });
    storage.unsafeWriteRaw("long", "sessions", [], { ...(raw?.meta.value as object), format: 2 });

    const reader = await openSession({
      id: "long",
      storage,
      registry: agentRegistry(),
      mode: "read",
      retainSettled: 3,
    });
    expect(reader.view().submissions.map((s) => s.id)).toEqual(expected.submissions.map((s) => s.id));
    await reader.close();

    const writer = await openSession({ id: "long", storage, registry: agentRegistry(), retainSettled: 3 });
    expect(writer.view().submissions.map((s) => s.id)).toEqual(expected.submissions.map((s) => s.id));
    expect(writer.submission(open.id)?.status).not.toBe("succeeded");
    await writer.close();
    const upgraded = await spy.open("long", { mode: "read", at: 0, entryTail: 1, settled: 3 });
    expect((upgraded?.meta.value as { format?: number } | undefined)?.format).toBe(STORAGE_FORMAT);
    // The latest three finished items come from the new index, read directly.
    expect(upgraded?.items?.filter((i) => i.id !== open.id).length).toBe(3);
  });
});
