/**
 * Review of signals and waits at their edges: an app-chosen task id is refused when storage already holds
 * it (parked or finished, not in memory); `keepEarlyMs` holds even before the drop timer fires;
 * `checkSignal` answers exactly as `signal()` would; a refused or read-only call leaves what the session
 * shows (version, view, parked count) as its change log says; a wait that lists a key twice lists it once.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  applyChangeToView,
  createRegistry,
  defineSignal,
  defineTask,
  InvalidArgumentError,
  type Json,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Received,
  type SessionView,
  SignalRefusedError,
  sequentialIds,
} from "../../src/index.ts";

const answer = defineSignal({ key: "answer:*", schema: z.object({ text: z.string().min(1) }) });
const fleeting = defineSignal({
  key: "fleeting:*",
  schema: z.object({ text: z.string() }),
  keepEarlyMs: 60_000,
});

/** Waits for its keys (`any` or `all`), then reports the payloads it received. */
const asker = defineTask({
  kind: "asker",
  version: 1,
  input: z.object({ keys: z.array(z.string()).min(1), mode: z.enum(["any", "all"]).default("any") }),
  phases: {
    ask: (ctx) => ctx.waitFor(ctx.input.keys, { next: "answered", mode: ctx.input.mode, about: { q: 1 } }),
    answered: (ctx) =>
      ctx.complete({ signals: (ctx.data as unknown as Received).signals } as unknown as Json),
  },
});

/** Spawns a child with the id its input names, and waits for it. */
const spawner = defineTask({
  kind: "spawner",
  version: 1,
  input: z.object({ childId: z.string() }),
  phases: {
    start: (ctx) => {
      const child = ctx.spawn("asker", { keys: ["answer:child"] }, { id: ctx.input.childId });
      return ctx.wait([child], { policy: "allSettled", next: "end" });
    },
    end: (ctx) => ctx.complete(null),
  },
});

/** Spawns a child and waits for it, then waits on its key (a standalone root with an ended child). */
const parentTask = defineTask({
  kind: "parent",
  version: 1,
  input: z.object({ key: z.string() }),
  phases: {
    start: (ctx) => {
      const child = ctx.spawn("asker", { keys: [`${ctx.input.key}:child`] });
      return ctx.wait([child], { policy: "allSettled", next: "ask" });
    },
    ask: (ctx) => ctx.waitFor([ctx.input.key], { next: "done" }),
    done: (ctx) => ctx.complete(null),
  },
});

/** A process over `storage` (a new handle on the same data, as a restarted process gets), resumed. */
async function open(storage: MemoryStorage, at = 1_000, options: Record<string, unknown> = {}) {
  const clock = new ManualClock(at);
  const timers = new ManualTimers(clock);
  const session = await openSession({
    id: "s",
    storage: storage.reopen(),
    registry: createRegistry({ tasks: [asker, spawner, parentTask], signals: [answer, fleeting] }),
    clock,
    timers,
    ids: sequentialIds(clock.now()),
    ...options,
  });
  await session.resume();
  return { session, clock, timers };
}

const signalsOf = (data: unknown) => (data as { signals?: Record<string, unknown> } | null)?.signals;

describe("an app-chosen task id that storage already holds", () => {
  it("is refused for a parked wait not in memory, and the parked task still takes its signal", async () => {
    const storage = memoryStorage();
    const first = await open(storage, 1_000, { liveWaits: 1 });
    await first.session.spawn("asker", { keys: ["answer:order-1"] }, { id: "order-1" });
    await first.session.whenIdle();
    await first.session.spawn("asker", { keys: ["answer:order-2"] }, { id: "order-2" }); // parked
    await first.session.whenIdle();
    await first.session.close();

    const { session } = await open(storage, 2_000, { liveWaits: 1 });
    expect(session.task("order-2")).toBeUndefined(); // only in storage
    const spawned = session.spawn("asker", { keys: ["answer:order-2b"] }, { id: "order-2" });
    await expect(spawned).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(spawned).rejects.toThrow(/already exists/);
    const committed = session.commit((d) => d.spawn("asker", { keys: ["answer:x"] }, { id: "order-2" }));
    await expect(committed).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(committed).rejects.toThrow(/already exists/);

    const receipt = await session.signal("answer:order-2", { text: "paid" }, { requestId: "w1" });
    expect(receipt.takenBy).toBe("order-2");
    expect((await session.waitForTask("order-2")).state).toEqual({
      status: "succeeded",
      result: { signals: { "answer:order-2": { text: "paid" } } },
    });
    await session.close();

    const again = await open(storage, 3_000, { liveWaits: 1 });
    const taskIds = (await again.session.readPending({ limit: 100 })).waits.map((w) => w.taskId);
    expect(taskIds).toEqual(["order-1"]);
    await again.session.close();
  });

  it("is refused for a finished task that left memory, and its stored record still shows it succeeded", async () => {
    const { session } = await open(memoryStorage(), 1_000, { retainSettled: 1 });
    for (const id of ["done-1", "done-2", "done-3"]) {
      await session.spawn("asker", { keys: [`answer:${id}`] }, { id });
      await session.whenIdle();
      await session.signal(`answer:${id}`, { text: "ok" }, { requestId: id });
      await session.waitForTask(id);
    }
    expect(session.task("done-1")).toBeUndefined(); // left memory (retainSettled: 1)
    const spawned = session.spawn("asker", { keys: ["answer:again"] }, { id: "done-1" });
    await expect(spawned).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(spawned).rejects.toMatchObject({ code: "invalid-argument", message: /already exists/ });
    await session.whenIdle();
    expect((await session.readTask("done-1"))?.state).toEqual({
      status: "succeeded",
      result: { signals: { "answer:done-1": { text: "ok" } } },
    });
    expect(session.view().pending).toEqual([]);
    // A phase's child with that id is refused too: the phase fails with the refusal, nothing is written over.
    const parent = await session.spawn("spawner", { childId: "done-2" });
    await session.whenIdle();
    expect(session.task(parent.id)?.state).toMatchObject({
      status: "failed",
      error: { code: "invalid-argument", message: "task done-2 already exists" },
    });
    expect((await session.readTask("done-2"))?.parentId).toBeUndefined();
    await session.close();
  });

  it("keeps commits in the order they were made while a chosen id is looked up", async () => {
    const { session } = await open(memoryStorage());
    const first = session.commit((d) => {
      d.spawn("asker", { keys: ["answer:a"] }, { id: "a" });
      d.setDocument("order", "note", { first: true });
      return d.version;
    });
    const second = session.commit((d) => {
      d.setDocument("order", "note", { second: true, sawA: d.task("a") !== undefined });
      return d.version;
    });
    const third = session.spawn("asker", { keys: ["answer:b"] }, { id: "b" });
    expect([(await first).value, (await second).value]).toEqual([1, 2]);
    expect((await third).id).toBe("b");
    expect(session.view().documents.find((d) => d.id === "order")?.value).toEqual({
      second: true,
      sawA: true,
    });
    // A build that chooses another id each time it is built is refused, after a few lookups.
    let n = 0;
    const changing = session.commit((d) => d.spawn("asker", { keys: ["answer:c"] }, { id: `c-${n++}` }));
    await expect(changing).rejects.toMatchObject({ code: "invalid-argument", message: /other task ids/ });
    expect(session.task("c-0")).toBeUndefined();
    await session.close();
  });
});

it("honours keepEarlyMs before the drop timer fires: an expired signal neither conflicts nor is taken", async () => {
  const { session, clock, timers } = await open(memoryStorage());
  await session.signal("fleeting:1", { text: "old one" }, { requestId: "f1" });
  await session.signal("fleeting:2", { text: "old two" }, { requestId: "f2" });
  clock.advance(60_001); // the clock moves; no timer fires
  expect(timers.size).toBeGreaterThan(0);
  // Another payload for an expired key is a new signal, not a conflict.
  const anew = await session.signal("fleeting:1", { text: "new" }, { requestId: "f1b" });
  expect(anew).toMatchObject({ duplicate: false, signal: { payload: { text: "new" } } });
  // A new wait on an expired key waits for a new signal.
  const task = await session.spawn("asker", { keys: ["fleeting:2"] });
  await session.whenIdle();
  expect(session.task(task.id)?.state.status).toBe("awaiting");
  expect(session.view().pending.map((p) => [p.key, p.taskId])).toEqual([["fleeting:2", task.id]]);
  await session.close();
});

describe("checkSignal answers as signal() would", () => {
  it("for an `all` wait that took one key: a repeat is a duplicate, another payload a conflict", async () => {
    const { session } = await open(memoryStorage());
    const task = await session.spawn("asker", { keys: ["answer:A", "answer:B"], mode: "all" });
    await session.whenIdle();
    const first = await session.signal("answer:A", { text: "x" }, { requestId: "1" });
    expect(first).toMatchObject({ duplicate: false, takenBy: task.id });
    expect(await session.checkSignal("answer:A", { text: "x" }, { requestId: "1" })).toMatchObject({
      duplicate: true,
    });
    expect(await session.signal("answer:A", { text: "x" }, { requestId: "1" })).toMatchObject({
      duplicate: true,
    });
    for (const attempt of [
      () => session.checkSignal("answer:A", { text: "y" }, { requestId: "2" }),
      () => session.signal("answer:A", { text: "y" }, { requestId: "2" }),
    ]) {
      const refused = attempt();
      await expect(refused).rejects.toBeInstanceOf(SignalRefusedError);
      await expect(refused).rejects.toMatchObject({ code: "signal-conflict", key: "answer:A" });
    }
    await session.whenIdle();
    // The wait still holds the first payload, and still needs only B.
    expect(signalsOf(session.task(task.id)?.checkpoint.data)).toEqual({ "answer:A": { text: "x" } });
    expect(session.view().pending.map((p) => p.key)).toEqual(["answer:B"]);
    await session.signal("answer:B", { text: "z" }, { requestId: "3" });
    expect((await session.waitForTask(task.id)).state).toEqual({
      status: "succeeded",
      result: { signals: { "answer:A": { text: "x" }, "answer:B": { text: "z" } } },
    });
    await session.close();
  });

  it("refuses a new early signal with early-signals-full when maxEarlySignals are kept", async () => {
    const { session } = await open(memoryStorage(), 1_000, { maxEarlySignals: 1 });
    await session.signal("answer:e1", { text: "one" }, { requestId: "e1" });
    const version = session.version;
    for (const attempt of [
      () => session.checkSignal("answer:e2", { text: "two" }, { requestId: "e2" }),
      () => session.signal("answer:e2", { text: "two" }, { requestId: "e2" }),
    ]) {
      const refused = attempt();
      await expect(refused).rejects.toBeInstanceOf(SignalRefusedError);
      await expect(refused).rejects.toMatchObject({ code: "early-signals-full", key: "answer:e2" });
    }
    expect(session.version).toBe(version);
    expect(session.earlySignals().map((s) => s.key)).toEqual(["answer:e1"]);
    await session.close();
  });
});

it("a refused or read-only call leaves what the session shows as its change log says", async () => {
  const storage = memoryStorage();
  const first = await open(storage, 1_000, { liveWaits: 1 });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    ids.push((await first.session.spawn("asker", { keys: [`answer:${i}`] })).id);
    await first.session.whenIdle();
  }
  await first.session.close();

  const { session } = await open(storage, 2_000, { liveWaits: 1 });
  const version = session.version;
  const parked = session.parkedInStorage;
  const before = session.view();
  expect(parked).toBe(2);
  expect(before.pending.map((p) => p.key)).toEqual(["answer:0"]);
  const tasksBefore = before.tasks.map((t) => t.id);
  let folded: SessionView = before;
  session.subscribe(version, (change) => {
    folded = applyChangeToView(folded, change);
  });

  const invalid = session.signal("answer:1", { text: "" }, { requestId: "bad" });
  await expect(invalid).rejects.toBeInstanceOf(InvalidArgumentError);
  await expect(invalid).rejects.toMatchObject({ code: "invalid-argument" });
  expect(await session.checkSignal("answer:2", { text: "fine" }, { requestId: "check" })).toBeUndefined();
  await session.whenIdle();
  expect(session.version).toBe(version);
  expect(session.parkedInStorage).toBe(parked);
  expect(session.view().pending).toEqual(folded.pending);
  expect(session.pending()).toEqual(folded.pending);
  expect(session.view().pending.map((p) => p.key)).toEqual(["answer:0"]);
  expect(session.view().tasks.map((t) => t.id)).toEqual(tasksBefore);

  const receipt = await session.signal("answer:1", { text: "real" }, { requestId: "good" });
  expect(receipt.takenBy).toBe(ids[1]);
  await session.waitForTask(ids[1] as string);
  await session.whenIdle();
  expect(folded.version).toBe(session.version);
  expect(session.view().pending).toEqual(folded.pending);
  expect(session.view().pending.map((p) => p.key)).toEqual(["answer:0"]);
  await session.close();
});

it("a wait that names one key twice lists it once, and one signal on it completes the task", async () => {
  const { session } = await open(memoryStorage());
  const task = await session.spawn("asker", { keys: ["answer:d", "answer:d"], mode: "all" });
  await session.whenIdle();
  const pending = session.view().pending.filter((p) => p.taskId === task.id);
  expect(pending.map((p) => p.key)).toEqual(["answer:d"]);
  const receipt = await session.signal("answer:d", { text: "done" }, { requestId: "d" });
  expect(receipt.takenBy).toBe(task.id);
  expect((await session.waitForTask(task.id)).state).toEqual({
    status: "succeeded",
    result: { signals: { "answer:d": { text: "done" } } },
  });
  expect(session.view().pending).toEqual([]);
  await session.close();
});

it("shows a read-back tree whole once a commit moves its wait on, as a session opened after it would", async () => {
  const storage = memoryStorage();
  const first = await open(storage, 1_000, { liveWaits: 1 });
  for (const key of ["answer:p0", "answer:p1"]) {
    const parent = await first.session.spawn("parent", { key });
    await first.session.whenIdle();
    await first.session.signal(`${key}:child`, { text: "child done" }, { requestId: `${key}-child` });
    await first.session.whenIdle();
    expect(first.session.task(parent.id)?.state.status).toBe("awaiting");
  }
  await first.session.close();
  const { session } = await open(storage, 2_000, { liveWaits: 1 });
  expect(session.parkedInStorage).toBe(1);
  // Read back (not shown, still parked), then moved on by the signal's commit: shown whole, its ended child too.
  expect((await session.readParkedWaits()).waits.map((w) => w.key)).toEqual(["answer:p1"]);
  await session.checkSignal("answer:p1", { text: "go" }, { requestId: "p1" });
  expect((await session.readParkedWaits()).waits.map((w) => w.key)).toEqual(["answer:p1"]);
  await session.signal("answer:p1", { text: "go" }, { requestId: "p1" });
  await session.whenIdle();
  expect(session.parkedInStorage).toBe(0);
  const ids = (s: { view(): { tasks: readonly { id: string }[] } }) => s.view().tasks.map((t) => t.id);
  const reader = await openSession({
    id: "s",
    storage: storage.reopen(),
    registry: createRegistry({ tasks: [asker, spawner, parentTask], signals: [answer, fleeting] }),
    mode: "read",
  });
  expect(ids(session)).toEqual(ids(reader));
  expect(ids(session)).toHaveLength(4);
  await reader.close();
  await session.close();
});

it("checkSignal agrees with signal() when an expired early signal of the key fills maxEarlySignals", async () => {
  const { session, clock } = await open(memoryStorage(), 1_000, { maxEarlySignals: 1 });
  await session.signal("fleeting:1", { text: "old" }, { requestId: "a" });
  clock.advance(60_001);
  expect(await session.checkSignal("fleeting:1", { text: "new" }, { requestId: "b" })).toBeUndefined();
  expect(await session.signal("fleeting:1", { text: "new" }, { requestId: "b" })).toMatchObject({
    duplicate: false,
    signal: { payload: { text: "new" } },
  });
  await expect(session.checkSignal("fleeting:2", { text: "x" }, { requestId: "c" })).rejects.toMatchObject({
    code: "early-signals-full",
  });
  await session.close();
});
