/**
 * Durable waits on the outside world (DESIGN §4): a phase waits for signal keys; `session.signal()` hands
 * the payload to the waiting task in the same commit that stores it; early signals are kept; a key takes
 * one signal; deadlines are timed wake-ups; cancellation ends a wait. Run on memory and fake-indexeddb.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitRecord,
  createRegistry,
  DefinitionError,
  defineSignal,
  defineTask,
  EdgeRequestError,
  InvalidArgumentError,
  indexedDbStorage,
  isSettledElsewhere,
  type Json,
  ManualClock,
  ManualTimers,
  memoryStorage,
  OwnedElsewhereError,
  openSession,
  type Received,
  type Session,
  SignalRefusedError,
  type Storage,
  type SubmitInput,
  sequentialIds,
} from "../../src/index.ts";
import { ForwardingStorage } from "../../src/testing/forwarding-storage.ts";
import { acceptInboxRow, inboxDrop, inboxRowId } from "../../worker/inbox.ts";

const answer = defineSignal({ key: "answer:*", schema: z.object({ text: z.string().min(1) }) });
const strict = defineSignal({ key: "strict:*", schema: z.object({ ok: z.boolean() }), early: false });
const note = defineSignal({ key: "note:*", schema: z.object({ text: z.string() }), early: false });
const fleeting = defineSignal({
  key: "fleeting:*",
  schema: z.object({ text: z.string() }),
  keepEarlyMs: 60_000,
});

/** Asks a question (key from input), then reports what arrived, or that the deadline passed. */
const asker = defineTask({
  kind: "asker",
  version: 1,
  input: z.object({
    keys: z.array(z.string()).min(1),
    mode: z.enum(["any", "all"]).default("any"),
    deadlineMs: z.number().optional(),
  }),
  phases: {
    ask: (ctx) =>
      ctx.waitFor(
        ctx.input.keys,
        {
          next: "answered",
          mode: ctx.input.mode,
          about: { question: "which one?" },
          ...(ctx.input.deadlineMs !== undefined && {
            deadline: { at: ctx.clock.now() + ctx.input.deadlineMs, next: "late" },
          }),
        },
        { asked: ctx.clock.now() },
      ),
    answered: (ctx) => {
      const got = ctx.data as unknown as Received;
      return ctx.complete({ via: "signal", signals: got.signals, data: got.data } as unknown as Json);
    },
    late: (ctx) => {
      const got = ctx.data as unknown as Received;
      return ctx.complete({ via: "deadline", signals: got.signals } as unknown as Json);
    },
  },
});

const registry = () => createRegistry({ tasks: [asker], signals: [answer, strict, note, fleeting] });

let databases = 0;
function stores(): [string, () => Storage][] {
  return [
    ["memory", () => memoryStorage()],
    [
      "fake-indexeddb",
      () => {
        databases += 1;
        return indexedDbStorage(`signals-${databases}`);
      },
    ],
  ];
}

async function open(
  storage: Storage,
  clock = new ManualClock(1_000),
  limits: { maxEarlySignals?: number } = {},
) {
  const timers = new ManualTimers(clock);
  const commits: CommitRecord[] = [];
  const session = await openSession({
    id: "waits",
    storage,
    registry: registry(),
    clock,
    timers,
    // A later process of the same session starts its ids past the earlier one's (by the clock).
    ids: sequentialIds(clock.now()),
    ...limits,
  });
  session.subscribe(session.version, (c) => commits.push(c));
  return { session, clock, timers, commits };
}

describe.each(stores())("durable waits on %s", (_name, makeStorage) => {
  it("waits, lists the wait as pending, and continues in one commit when the signal comes", async () => {
    const { session, commits } = await open(makeStorage());
    await session.resume();
    const task = await session.spawn("asker", { keys: ["answer:1"] });
    await session.whenIdle();
    expect(session.view().tasks.find((t) => t.id === task.id)?.state.status).toBe("awaiting");
    expect(session.view().pending).toEqual([
      {
        key: "answer:1",
        taskId: task.id,
        kind: "asker",
        about: { question: "which one?" },
        keys: ["answer:1"],
        mode: "any",
        since: 1_000,
      },
    ]);
    const before = commits.length;
    const receipt = await session.signal("answer:1", { text: "the blue one" }, { requestId: "r1" });
    expect(receipt).toMatchObject({ duplicate: false, takenBy: task.id });
    // The signal and the task made runnable with its payload: one commit.
    const resolved = commits[before] as CommitRecord;
    expect(resolved.signals?.map((s) => [s.key, s.consumedBy])).toEqual([["answer:1", task.id]]);
    expect(resolved.tasks.find((t) => t.id === task.id)?.state.status).toBe("running");
    expect(session.view().pending).toEqual([]);
    const done = await session.waitForTask(task.id);
    expect(done.state).toEqual({
      status: "succeeded",
      result: { via: "signal", signals: { "answer:1": { text: "the blue one" } }, data: { asked: 1_000 } },
    });
  });

  it("keeps a signal that comes before the wait, durably, and the wait takes it in the commit that starts it", async () => {
    const storage = makeStorage();
    const first = await open(storage);
    await first.session.resume();
    const early = await first.session.signal(
      "answer:early",
      { text: "already decided" },
      { requestId: "e1" },
    );
    expect(early).toMatchObject({ duplicate: false });
    expect(early.takenBy).toBeUndefined();
    await first.session.close();
    // A new process: the early signal came back from storage.
    const second = await open(storage);
    await second.session.resume();
    const task = await second.session.spawn("asker", { keys: ["answer:early"] });
    const done = await second.session.waitForTask(task.id);
    expect(done.state).toMatchObject({
      result: { signals: { "answer:early": { text: "already decided" } } },
    });
    // It never looked pending: the commit that started the wait also took the signal.
    const awaitCommit = second.commits.find((c) => c.signals?.some((s) => s.key === "answer:early"));
    expect(awaitCommit?.tasks.find((t) => t.id === task.id)?.state.status).toBe("running");
  });

  it("gives a repeat the first outcome, refuses a different payload, also after the signal left memory", async () => {
    const storage = makeStorage();
    const { session } = await open(storage);
    await session.resume();
    const task = await session.spawn("asker", { keys: ["answer:2"] });
    await session.whenIdle();
    const first = await session.signal("answer:2", { text: "yes" }, { requestId: "r1" });
    await session.waitForTask(task.id);
    const version = session.version;
    const again = await session.signal("answer:2", { text: "yes" }, { requestId: "r1" });
    expect(again).toMatchObject({ duplicate: true, takenBy: task.id, signal: first.signal });
    expect(session.version).toBe(version);
    await expect(session.signal("answer:2", { text: "no" }, { requestId: "r2" })).rejects.toMatchObject({
      name: "SignalRefusedError",
      code: "signal-conflict",
      key: "answer:2",
    });
    await session.close();
    // Reopened: the consumed signal is only in storage; the store's key index answers.
    const reopened = await open(storage);
    const reopenedAt = reopened.session.version;
    // Checked before it is given again (a follower tab's retried click): its first outcome, not "accepted".
    const checked = await reopened.session.checkSignal("answer:2", { text: "yes" }, { requestId: "r1" });
    expect(checked).toMatchObject({ duplicate: true, takenBy: task.id });
    const stored = await reopened.session.signal("answer:2", { text: "yes" }, { requestId: "r1" });
    expect(stored).toMatchObject({ duplicate: true, takenBy: task.id });
    expect(stored.signal.version).toBe(first.signal.version);
    const conflict = reopened.session.signal("answer:2", { text: "other" }, { requestId: "r3" });
    await expect(conflict).rejects.toBeInstanceOf(SignalRefusedError);
    expect(reopened.session.version).toBe(reopenedAt); // neither the repeat nor the refusal committed anything
  });

  it("answers two deliveries racing for one wait as one signal and its repeat, or a conflict", async () => {
    const { session } = await open(makeStorage());
    await session.resume();
    const task = await session.spawn("asker", { keys: ["strict:3"] });
    await session.whenIdle();
    // Both are checked while the wait is open; the first commit takes it, the second finds it gone.
    const [first, second] = await Promise.all([
      session.signal("strict:3", { ok: true }, { requestId: "tab-a" }),
      session.signal("strict:3", { ok: true }, { requestId: "tab-b" }),
    ]);
    expect(first).toMatchObject({ duplicate: false, takenBy: task.id });
    expect(second).toMatchObject({ duplicate: true, takenBy: task.id, signal: first.signal });
    const other = await session.spawn("asker", { keys: ["strict:4"] });
    await session.whenIdle();
    const [won, lost] = await Promise.allSettled([
      session.signal("strict:4", { ok: true }, { requestId: "tab-a" }),
      session.signal("strict:4", { ok: false }, { requestId: "tab-b" }),
    ]);
    expect(won).toMatchObject({ status: "fulfilled", value: { takenBy: other.id } });
    expect(lost).toMatchObject({ status: "rejected", reason: { code: "signal-conflict", key: "strict:4" } });
    // The same on a key that keeps early signals, and on one nothing awaits yet.
    for (const key of ["answer:5", "answer:6"]) {
      const asker = key === "answer:5" ? await session.spawn("asker", { keys: [key] }) : undefined;
      await session.whenIdle();
      const [a, b] = await Promise.all([
        session.signal(key, { text: "yes" }, { requestId: "tab-a" }),
        session.signal(key, { text: "yes" }, { requestId: "tab-b" }),
      ]);
      expect([a.duplicate, b.duplicate]).toEqual([false, true]);
      expect(b.signal).toEqual(a.signal);
      expect(a.takenBy).toBe(asker?.id);
    }
  });

  it("refuses bad input with a typed error naming the field, and stores nothing", async () => {
    const { session } = await open(makeStorage());
    await session.resume();
    const version = session.version;
    const wrongShape = session.signal("answer:3", { text: 42 }, { requestId: "r1" });
    await expect(wrongShape).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(wrongShape).rejects.toMatchObject({ issues: [{ path: "payload.text" }] });
    await expect(session.signal("nobody:1", {}, { requestId: "r1" })).rejects.toMatchObject({
      code: "unknown-signal",
    });
    const huge = { text: "x".repeat(70_000) };
    await expect(session.signal("answer:3", huge, { requestId: "r1" })).rejects.toMatchObject({
      code: "invalid-argument",
      issues: [{ path: "payload" }],
    });
    await expect(session.signal("answer:\uD800", { text: "a" }, { requestId: "r1" })).rejects.toMatchObject({
      code: "invalid-argument",
      issues: [{ path: "key" }],
    });
    await expect(session.signal("answer:3", { text: "a" }, { requestId: "" })).rejects.toMatchObject({
      issues: [{ path: "requestId" }],
    });
    // A key that takes signals only while awaited, with nobody awaiting it.
    await expect(session.signal("strict:1", { ok: true }, { requestId: "r1" })).rejects.toMatchObject({
      code: "signal-not-awaited",
    });
    expect(session.version).toBe(version);
    expect(session.view().pending).toEqual([]);
  });

  it("needs every key of an `all` wait, and at the deadline continues with what arrived in time", async () => {
    const { session, timers } = await open(makeStorage());
    await session.resume();
    const task = await session.spawn("asker", {
      keys: ["answer:a", "answer:b"],
      mode: "all",
      deadlineMs: 60_000,
    });
    await session.whenIdle();
    expect(session.wakeInfo()).toEqual({ runnableNow: false, nextWakeAt: 61_000 });
    await session.signal("answer:a", { text: "A" }, { requestId: "ra" });
    await session.whenIdle();
    expect(session.view().pending.map((p) => [p.key, p.until])).toEqual([["answer:b", 61_000]]);
    timers.advance(59_999);
    await session.whenIdle();
    expect(session.task(task.id)?.state.status).toBe("awaiting");
    timers.advance(1);
    const done = await session.waitForTask(task.id);
    expect(done.state).toEqual({
      status: "succeeded",
      result: { via: "deadline", signals: { "answer:a": { text: "A" } } },
    });
    // The wait ended once: a signal for its other key now is kept for a later wait, not given to this task.
    const late = await session.signal("answer:b", { text: "B" }, { requestId: "rb" });
    expect(late.takenBy).toBeUndefined();
    expect((await session.waitForTask(task.id)).state).toEqual(done.state);
  });

  it("fires a deadline that passed while no process ran, on resume, as planned by the recovery preview", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock);
    await first.session.resume();
    const task = await first.session.spawn("asker", { keys: ["answer:x"], deadlineMs: 5_000 });
    await first.session.whenIdle();
    await first.session.close();
    clock.set(3_000);
    const early = await open(storage, clock);
    expect(early.session.previewRecovery().awaiting).toEqual([
      { taskId: task.id, keys: ["answer:x"], mode: "any", received: [], until: 6_000 },
    ]);
    await early.session.close();
    clock.set(10_000);
    const late = await open(storage, clock);
    expect(late.session.previewRecovery().events).toEqual([
      { type: "deadline-passed", taskId: task.id, phase: "late" },
    ]);
    await late.session.resume();
    expect((await late.session.waitForTask(task.id)).state).toMatchObject({ result: { via: "deadline" } });
  });

  it("ends a wait when its task is cancelled: nothing pending, and a later signal does not revive it", async () => {
    const { session } = await open(makeStorage());
    await session.resume();
    const task = await session.spawn("asker", { keys: ["strict:9"] });
    await session.whenIdle();
    expect(session.view().pending.map((p) => p.key)).toEqual(["strict:9"]);
    await session.cancel(task.id, "no longer needed");
    expect(session.task(task.id)?.state).toEqual({ status: "cancelled", reason: "no longer needed" });
    expect(session.view().pending).toEqual([]);
    await expect(session.signal("strict:9", { ok: true }, { requestId: "r1" })).rejects.toMatchObject({
      code: "signal-not-awaited",
    });
    expect(session.wakeInfo()).toEqual({ runnableNow: false, nextWakeAt: undefined });
  });

  it("keeps at most maxEarlySignals signals no wait has taken: past it one is refused and nothing is stored", async () => {
    const storage = makeStorage();
    const { session } = await open(storage, new ManualClock(1_000), { maxEarlySignals: 2 });
    await session.resume();
    await session.signal("answer:e1", { text: "one" }, { requestId: "e1" });
    const awaited = await session.spawn("asker", { keys: ["answer:awaited"] });
    await session.whenIdle();
    // Two at once with one place left: both in one commit group, counted together.
    const raced = await Promise.allSettled([
      session.signal("answer:e2", { text: "two" }, { requestId: "e2" }),
      session.signal("answer:e3", { text: "three" }, { requestId: "e3" }),
    ]);
    expect(raced.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
    const refused = (raced[1] as PromiseRejectedResult).reason;
    expect(refused).toBeInstanceOf(SignalRefusedError);
    expect(refused).toMatchObject({ code: "early-signals-full", key: "answer:e3" });
    const version = session.version;
    await expect(session.signal("answer:e4", { text: "four" }, { requestId: "e4" })).rejects.toMatchObject({
      code: "early-signals-full",
    });
    expect(session.version).toBe(version);
    expect(await storage.readSignals("waits", ["answer:e3", "answer:e4"])).toEqual([undefined, undefined]);
    // A repeat of a kept one is still answered, and a key a task awaits is never refused for the bound.
    expect(await session.signal("answer:e1", { text: "one" }, { requestId: "e1" })).toMatchObject({
      duplicate: true,
    });
    const taken = await session.signal("answer:awaited", { text: "now" }, { requestId: "a1" });
    expect(taken.takenBy).toBe(awaited.id);
    // Two deliveries racing for one awaited key while the bound is full: the second, checked while the wait
    // was open, finds its signal taken — answered as its repeat, or the conflict, never as one too many.
    for (const [key, second, code] of [
      ["answer:r1", "yes", undefined],
      ["answer:r2", "no", "signal-conflict"],
    ] as const) {
      const asker = await session.spawn("asker", { keys: [key] });
      await session.whenIdle();
      const [a, b] = await Promise.allSettled([
        session.signal(key, { text: "yes" }, { requestId: "tab-a" }),
        session.signal(key, { text: second }, { requestId: "tab-b" }),
      ]);
      expect(a).toMatchObject({ status: "fulfilled", value: { duplicate: false, takenBy: asker.id } });
      if (code) expect(b).toMatchObject({ status: "rejected", reason: { code, key } });
      else expect(b).toMatchObject({ status: "fulfilled", value: { duplicate: true, takenBy: asker.id } });
    }
    await session.close();
    // Reopened, the kept ones count again; a wait that takes one frees its place.
    const again = await open(storage, new ManualClock(2_000), { maxEarlySignals: 2 });
    await again.session.resume();
    await expect(
      again.session.signal("answer:e5", { text: "five" }, { requestId: "e5" }),
    ).rejects.toMatchObject({ code: "early-signals-full" });
    const task = await again.session.spawn("asker", { keys: ["answer:e1"] });
    expect((await again.session.waitForTask(task.id)).state).toMatchObject({
      result: { signals: { "answer:e1": { text: "one" } } },
    });
    expect(await again.session.signal("answer:e5", { text: "five" }, { requestId: "e5" })).toMatchObject({
      duplicate: false,
    });
    await expect(open(storage, new ManualClock(3_000), { maxEarlySignals: -1 })).rejects.toMatchObject({
      code: "invalid-argument",
      issues: [{ path: "maxEarlySignals" }],
    });
    await again.session.close();
    // Infinity keeps every one.
    const unbounded = await open(storage, new ManualClock(4_000), { maxEarlySignals: Infinity });
    await unbounded.session.resume();
    for (const n of [6, 7, 8])
      expect(
        await unbounded.session.signal(`answer:e${n}`, { text: "more" }, { requestId: `e${n}` }),
      ).toMatchObject({ duplicate: false });
    await unbounded.session.close();
  });

  it("drops early signals no wait took — past keepEarlyMs (the scheduler wakes for it) or by dropEarlySignal — and their keys take new ones", async () => {
    const storage = makeStorage();
    const { session, clock, timers } = await open(storage);
    await session.resume();
    const one = await session.signal("fleeting:1", { text: "one" }, { requestId: "f1" });
    timers.advance(10_000);
    await session.signal("fleeting:2", { text: "two" }, { requestId: "f2" });
    await session.signal("answer:9", { text: "nine" }, { requestId: "a9" });
    const keys = () => session.earlySignals().map((signal) => signal.key);
    expect(keys()).toEqual(["fleeting:1", "fleeting:2", "answer:9"]);
    expect(session.wakeInfo().nextWakeAt).toBe(one.signal.receivedAt + 60_000);
    // A wait that begins in time takes its early signal: it is not dropped later.
    const taker = await session.spawn("asker", { keys: ["fleeting:2"] });
    expect((await session.waitForTask(taker.id)).state).toMatchObject({
      result: { signals: { "fleeting:2": { text: "two" } } },
    });
    // Its time run out, fleeting:1 is dropped by the scheduler, with no call: its row goes with it.
    const before = session.version;
    timers.advance(50_000);
    await session.whenIdle();
    expect(keys()).toEqual(["answer:9"]);
    expect(session.version).toBe(before + 1);
    expect(await storage.readSignals("waits", ["fleeting:1"])).toEqual([undefined]);
    expect(session.wakeInfo().nextWakeAt).toBeUndefined(); // answer:* keeps its early signals
    // The key takes a new signal, another payload included (the dropped one is no conflict).
    const anew = await session.signal("fleeting:1", { text: "other" }, { requestId: "f1" });
    expect(anew).toMatchObject({ duplicate: false, signal: { payload: { text: "other" } } });
    // Dropped by the app: returned, committed once; nothing more to drop after.
    const dropped = await session.dropEarlySignal("answer:9");
    expect(dropped).toMatchObject({ key: "answer:9", requestId: "a9", payload: { text: "nine" } });
    const at = session.version;
    expect(await session.dropEarlySignal("answer:9")).toBeUndefined();
    expect(await session.dropEarlySignal("answer:never")).toBeUndefined();
    expect(session.version).toBe(at);
    await expect(session.dropEarlySignal("")).rejects.toBeInstanceOf(InvalidArgumentError);
    await session.close();
    // Reopened past the new fleeting:1's time: only it was kept, and it is dropped on resume.
    const later = new ManualClock(clock.now() + 60_000);
    const reopened = await open(storage, later);
    expect(reopened.session.earlySignals().map((s) => [s.key, s.payload])).toEqual([
      ["fleeting:1", { text: "other" }],
    ]);
    await reopened.session.resume();
    reopened.timers.advance(0);
    await reopened.session.whenIdle();
    expect(reopened.session.earlySignals()).toEqual([]);
    // A wait on a dropped key waits for a new signal, which it takes.
    const waiter = await reopened.session.spawn("asker", { keys: ["answer:9"] });
    await reopened.session.whenIdle();
    expect(reopened.session.pending().map((wait) => wait.key)).toEqual(["answer:9"]);
    const taken = await reopened.session.signal("answer:9", { text: "again" }, { requestId: "a9" });
    expect(taken).toMatchObject({ duplicate: false, takenBy: waiter.id });
    await reopened.session.close();
  });

  it("answers a repeat (or another payload) of a kept early signal after a drop queued before it: as a new delivery, kept", async () => {
    const { session } = await open(makeStorage());
    const first = await session.signal("answer:3", { text: "three" }, { requestId: "t3" });
    // The drop is queued first; the repeat comes in the same tick, before the drop's commit has landed.
    const dropping = session.dropEarlySignal("answer:3");
    const again = session.signal("answer:3", { text: "three" }, { requestId: "t3" });
    expect(await dropping).toMatchObject({ version: first.signal.version });
    const receipt = await again;
    expect(receipt.duplicate).toBe(false);
    expect(receipt.signal.version).toBeGreaterThan(first.signal.version);
    // What the caller was told is what the session keeps.
    expect(session.earlySignals()).toEqual([receipt.signal]);
    // And a repeat with no drop before it is still answered as one, committing nothing.
    const at = session.version;
    expect(await session.signal("answer:3", { text: "three" }, { requestId: "t3" })).toMatchObject({
      duplicate: true,
      signal: { version: receipt.signal.version },
    });
    expect(session.version).toBe(at);
    // Another payload after a queued drop is no conflict: the dropped signal is gone when it is taken.
    const droppingAgain = session.dropEarlySignal("answer:3");
    const other = session.signal("answer:3", { text: "other" }, { requestId: "t4" });
    expect(await droppingAgain).toMatchObject({ version: receipt.signal.version });
    expect(await other).toMatchObject({ duplicate: false, signal: { payload: { text: "other" } } });
    expect(session.earlySignals().map((signal) => signal.requestId)).toEqual(["t4"]);
    // With no drop before it, another payload is still the conflict.
    await expect(session.signal("answer:3", { text: "third" }, { requestId: "t5" })).rejects.toMatchObject({
      code: "signal-conflict",
    });
    await session.close();
  });

  it("drops an early signal from a tab's inbox row only while it is still the one that row names", async () => {
    const { session } = await open(makeStorage());
    const first = await session.signal("answer:7", { text: "one" }, { requestId: "o1" });
    const at = session.version;
    await acceptInboxRow(session, inboxDrop("answer:7", first.signal.version + 1));
    expect(session.earlySignals().map((signal) => signal.key)).toEqual(["answer:7"]);
    expect(session.version).toBe(at);
    const row = inboxDrop("answer:7", first.signal.version);
    await acceptInboxRow(session, row);
    expect(session.earlySignals()).toEqual([]);
    await acceptInboxRow(session, row); // a repeat
    expect(session.version).toBe(at + 1);
    // A leader of an older version reads the row as a submission: refused under the row's own id, so it is
    // removed and its asker told (a row without one would jam that leader's inbox).
    expect(inboxRowId(row)).toBe(row.requestId);
    await expect(session.submit(row as unknown as SubmitInput)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(session.version).toBe(at + 1);
    await session.close();
  });

  it("never asks for a timer longer than setTimeout can wait (2^31 − 1 ms): a 30-day keepEarlyMs drops on its day", async () => {
    const day = 86_400_000;
    const clock = new ManualClock(1_000);
    const manual = new ManualTimers(clock);
    const asked: number[] = [];
    const timers = {
      setTimeout: (callback: () => void, ms: number) => {
        asked.push(ms);
        return manual.setTimeout(callback, ms);
      },
      clearTimeout: (handle: unknown) => manual.clearTimeout(handle as never),
    };
    const month = defineSignal({
      key: "month:*",
      schema: z.object({ text: z.string() }),
      keepEarlyMs: 30 * day,
    });
    const session = await openSession({
      id: "long",
      storage: makeStorage(),
      registry: createRegistry({ signals: [month] }),
      clock,
      timers,
      ids: sequentialIds(),
    });
    await session.resume();
    await session.signal("month:1", { text: "kept" }, { requestId: "m1" });
    expect(session.wakeInfo().nextWakeAt).toBe(1_000 + 30 * day);
    expect(asked.length).toBeGreaterThan(0);
    expect(Math.max(...asked)).toBe(2 ** 31 - 1);
    manual.advance(29 * day); // the capped timer fires early (day 24.8), finds nothing due, and waits again
    await session.whenIdle();
    expect(session.earlySignals().map((signal) => signal.key)).toEqual(["month:1"]);
    manual.advance(day);
    await session.whenIdle();
    expect(session.earlySignals()).toEqual([]);
    expect(asked.every((ms) => ms <= 2 ** 31 - 1)).toBe(true);
    await session.close();
  });

  it("refuses a second wait on a key another task awaits, failing the second task with the reason", async () => {
    const { session } = await open(makeStorage());
    await session.resume();
    const one = await session.spawn("asker", { keys: ["answer:shared"] });
    await session.whenIdle();
    const two = await session.spawn("asker", { keys: ["answer:shared"] });
    const failed = await session.waitForTask(two.id);
    expect(failed.state).toMatchObject({ status: "failed", error: { code: "key-taken" } });
    expect(session.task(one.id)?.state.status).toBe("awaiting");
  });

  it("reads the stored signals and parked waits of many waits beginning at once in a few reads, and still refuses a spent or held key among them", async () => {
    const counted = new (class extends ForwardingStorage {
      reads: number[] = [];
      waitingReads: number[] = [];
      override readSignals: Storage["readSignals"] = async (sessionId, keys) => {
        this.reads.push(keys.length);
        return this.inner.readSignals(sessionId, keys);
      };
      override readWaiting: Storage["readWaiting"] = async (sessionId, keys) => {
        this.waitingReads.push(keys.length);
        return this.inner.readWaiting(sessionId, keys);
      };
    })(makeStorage());
    const first = await open(counted);
    await first.session.resume();
    const one = await first.session.spawn("asker", { keys: ["answer:once"] });
    await first.session.whenIdle();
    await first.session.signal("answer:once", { text: "yes" }, { requestId: "r1" });
    await first.session.waitForTask(one.id);
    await first.session.close();
    /** Waits on `count` new keys and a last one on `last`, begun in one commit: the last one's state. */
    const beginTogether = async (session: Session, prefix: string, count: number, last: string) => {
      const { value: ids } = await session.commit((draft) => {
        const ids: string[] = [];
        for (let i = 0; i < count; i++) ids.push(draft.spawn("asker", { keys: [`${prefix}${i}`] }));
        ids.push(draft.spawn("asker", { keys: [last] }));
        return ids;
      });
      await session.whenIdle();
      return session.task(ids.at(-1) as string)?.state;
    };
    // Each key read once, in at most a few reads (the first goes alone; the rest queue behind it).
    const expectFewReads = (reads: number[], keys: number) => {
      expect(reads.reduce((a, b) => a + b, 0)).toBe(keys);
      expect(reads.length).toBeLessThanOrEqual(3);
    };
    const later = await open(counted, new ManualClock(5_000));
    await later.session.resume();
    counted.reads = [];
    const last = await beginTogether(later.session, "answer:many-", 300, "answer:once");
    expectFewReads(counted.reads, 301);
    expect(later.session.pending()).toHaveLength(300);
    expect(last).toMatchObject({ status: "failed", error: { code: "key-resolved" } });
    // Past liveWaits (100) the waits park, and the next process leaves them in storage: a new wait's key may
    // be held by one, read back by key. 100 more waits read their keys' parked waits in a few reads too; the
    // one on a parked wait's key finds it held.
    await later.session.close();
    const third = await open(counted, new ManualClock(9_000));
    await third.session.resume();
    expect(third.session.parkedInStorage).toBe(200);
    counted.waitingReads = [];
    const held = await beginTogether(third.session, "answer:more-", 100, "answer:many-250");
    expectFewReads(counted.waitingReads, 101);
    expect(held).toMatchObject({ status: "failed", error: { code: "key-taken" } });
    const { waits } = await third.session.readPending({ limit: 1_000 });
    expect(waits).toHaveLength(400);
  });

  it("fails a wait on a key whose signal a wait already took, instead of leaving it pending forever", async () => {
    const storage = makeStorage();
    const first = await open(storage);
    await first.session.resume();
    const one = await first.session.spawn("asker", { keys: ["answer:once"] });
    await first.session.whenIdle();
    await first.session.signal("answer:once", { text: "yes" }, { requestId: "r1" });
    expect((await first.session.waitForTask(one.id)).state.status).toBe("succeeded");
    // In the same process, and in a later one (the taken signal is in storage only). A wait that needs all
    // its keys cannot end if one is spent; one that needs any of them still can, by another key.
    const sameProcess = await first.session.spawn("asker", {
      keys: ["answer:other", "answer:once"],
      mode: "all",
    });
    const refused = await first.session.waitForTask(sameProcess.id);
    expect(refused.state).toMatchObject({ status: "failed", error: { code: "key-resolved" } });
    expect(refused.state.status === "failed" && refused.state.error.message).toContain(`task ${one.id}`);
    const either = await first.session.spawn("asker", { keys: ["answer:once", "answer:else"] });
    await first.session.whenIdle();
    expect(first.session.pending().map((wait) => wait.key)).toEqual(["answer:else", "answer:once"]);
    await first.session.signal("answer:else", { text: "by the other key" }, { requestId: "e1" });
    expect((await first.session.waitForTask(either.id)).state).toMatchObject({
      result: { signals: { "answer:else": { text: "by the other key" } } },
    });
    await first.session.close();
    const later = await open(storage, new ManualClock(5_000));
    await later.session.resume();
    const again = await later.session.spawn("asker", { keys: ["answer:once"] });
    expect((await later.session.waitForTask(again.id)).state).toMatchObject({
      status: "failed",
      error: { code: "key-resolved" },
    });
    expect(later.session.pending()).toEqual([]);
    // The key keeps its one signal: a repeat is answered as one, another payload refused.
    const repeat = await later.session.signal("answer:once", { text: "yes" }, { requestId: "r1" });
    expect(repeat).toMatchObject({ duplicate: true, takenBy: one.id });
    await expect(
      later.session.signal("answer:once", { text: "no" }, { requestId: "r2" }),
    ).rejects.toMatchObject({ code: "signal-conflict" });
    await later.session.close();
  });

  it("lets a key be awaited again when its earlier wait ended without a signal", async () => {
    const { session, timers } = await open(makeStorage());
    await session.resume();
    const one = await session.spawn("asker", { keys: ["answer:retry"], deadlineMs: 1_000 });
    await session.whenIdle();
    timers.advance(1_000);
    expect((await session.waitForTask(one.id)).state).toMatchObject({ result: { via: "deadline" } });
    const two = await session.spawn("asker", { keys: ["answer:retry"] });
    await session.whenIdle();
    expect(session.pending().map((wait) => wait.key)).toEqual(["answer:retry"]);
    await session.signal("answer:retry", { text: "now" }, { requestId: "late" });
    expect((await session.waitForTask(two.id)).state).toMatchObject({
      result: { via: "signal", signals: { "answer:retry": { text: "now" } } },
    });
    await session.close();
  });
});

describe("durable waits: a delivery racing one the store refuses", () => {
  it("is delivered once the other's commit was refused, instead of being refused as not awaited", async () => {
    // Rows of at most 4 KB: the first delivery's payload makes its commit too large for the store.
    const { session } = await open(memoryStorage({ maxRowBytes: 4_096 }));
    await session.resume();
    const task = await session.spawn("asker", { keys: ["note:1"] });
    await session.whenIdle();
    const [big, small] = await Promise.allSettled([
      session.signal("note:1", { text: "x".repeat(8_000) }, { requestId: "big" }),
      session.signal("note:1", { text: "short" }, { requestId: "small" }),
    ]);
    expect(big).toMatchObject({ status: "rejected", reason: { code: "record-too-large" } });
    expect(small).toMatchObject({ status: "fulfilled", value: { duplicate: false, takenBy: task.id } });
    expect((await session.waitForTask(task.id)).state).toMatchObject({ status: "succeeded" });
  });
});

describe("isSettledElsewhere: a signal someone else settled, not a failure of the caller's", () => {
  it("reads an error's code when it has one, and a bare 409 only when it has none", () => {
    expect(isSettledElsewhere(new EdgeRequestError(404, "gone", "wait-not-found"))).toBe(true);
    const refused = (code: ConstructorParameters<typeof SignalRefusedError>[0]) =>
      new SignalRefusedError(code, "k:1", "refused");
    expect(isSettledElsewhere(refused("signal-conflict"))).toBe(true);
    expect(isSettledElsewhere(refused("signal-not-awaited"))).toBe(true);
    expect(isSettledElsewhere(refused("wait-not-found"))).toBe(true); // its task is gone: nothing to settle
    expect(isSettledElsewhere(refused("early-signals-full"))).toBe(false);
    // Another host writes the session: nothing was settled, the signal must be sent again later.
    expect(isSettledElsewhere(new OwnedElsewhereError("a tab leads", "tab", null))).toBe(false);
    expect(isSettledElsewhere(new EdgeRequestError(409, "a tab leads", "owned-elsewhere"))).toBe(false);
    expect(isSettledElsewhere(new EdgeRequestError(409, "conflict", "signal-conflict"))).toBe(true);
    expect(isSettledElsewhere(new EdgeRequestError(409, "conflict"))).toBe(true);
    expect(isSettledElsewhere(new EdgeRequestError(503, "later"))).toBe(false);
  });
});

describe("durable waits: a wait that begins while another takes its key's signal", () => {
  it("is refused in its commit, instead of waiting forever on a spent key", async () => {
    const storage = memoryStorage();
    const commit = storage.commit.bind(storage);
    let hold: Promise<void> | undefined;
    storage.commit = async (guard, commits) => {
      await hold;
      return commit(guard, commits);
    };
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = defineTask({
      kind: "slow-asker",
      version: 1,
      input: z.object({ key: z.string() }),
      phases: {
        ask: async (ctx) => {
          await gate;
          return ctx.waitFor(ctx.input.key, { next: "answered" });
        },
        answered: (ctx) => ctx.complete(null),
      },
    });
    const clock = new ManualClock(1_000);
    const session = await openSession({
      id: "race",
      storage,
      registry: createRegistry({ tasks: [asker, slow], signals: [answer] }),
      clock,
      timers: new ManualTimers(clock),
      ids: sequentialIds(),
    });
    await session.resume();
    const turns = async () => {
      for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    const taker = await session.spawn("asker", { keys: ["answer:x"] });
    const late = await session.spawn("slow-asker", { key: "answer:x" });
    await turns();
    expect(session.task(taker.id)?.state.status).toBe("awaiting");
    // The signal's commit is held in storage while the slow phase ends with a wait on the same key: its
    // read sees the other task still awaiting it, and its commit comes after the signal's.
    let unhold: () => void = () => undefined;
    hold = new Promise<void>((resolve) => {
      unhold = resolve;
    });
    const signalled = session.signal("answer:x", { text: "yes" }, { requestId: "r1" });
    await turns();
    release();
    await turns();
    hold = undefined;
    unhold();
    await signalled;
    await session.whenIdle();
    expect(session.task(taker.id)?.state.status).toBe("succeeded");
    expect(session.task(late.id)?.state).toMatchObject({ status: "failed", error: { code: "key-resolved" } });
    expect(session.pending()).toEqual([]);
    await session.close();
  });
});

describe('signal keys "." and ".."', () => {
  it("are refused where keys are defined, taken by no prefix, and refused when signalled", async () => {
    const schema = z.object({ text: z.string() });
    for (const key of [".", ".."]) {
      expect(() => defineSignal({ key, schema })).toThrow(DefinitionError);
      expect(() => defineSignal({ key, schema })).toThrow(/a URL cannot name it/);
      expect(() => createRegistry({ signals: [{ key, schema }] })).toThrow(DefinitionError);
    }
    const registry = createRegistry({ signals: [defineSignal({ key: ".*", schema })] });
    expect(registry.signalFor(".x")).toBeDefined();
    expect(registry.signalFor(".")).toBeUndefined();
    expect(registry.signalFor("..")).toBeUndefined();
    const session = await openSession({ id: "dots", storage: memoryStorage(), registry });
    await expect(session.signal("..", { text: "yes" }, { requestId: "r1" })).rejects.toMatchObject({
      code: "unknown-signal",
      message: expect.stringContaining("a URL cannot name it"),
    });
    await session.close();
  });
});

describe("a payload nested as deep as JSON allows at its root", () => {
  const deepSignal = defineSignal({ key: "deep:*", schema: z.unknown() });
  const deepWaiter = defineTask({
    kind: "deep-waiter",
    version: 1,
    input: z.object({}),
    phases: { ask: (ctx) => ctx.waitFor("deep:1", { next: "done" }), done: (ctx) => ctx.complete(null) },
  });
  const nested = (depth: number) => {
    let payload: Json = 1;
    for (let i = 0; i < depth; i++) payload = [payload];
    return payload;
  };
  const openDeep = async () => {
    const session = await openSession({
      id: "deep",
      storage: memoryStorage(),
      registry: createRegistry({ tasks: [deepWaiter], signals: [deepSignal] }),
    });
    await session.resume();
    return session;
  };

  it("is refused when the wait that takes it could not hold it, kept early or not; nothing is stored", async () => {
    for (const early of [false, true]) {
      const session = await openDeep();
      if (!early) await session.spawn("deep-waiter", {});
      await session.whenIdle();
      const version = session.version;
      // Before, a live wait's commit failed with a ValidationError of the task's checkpoint, and a signal
      // kept early was taken later by a wait that then failed its task.
      const refused = session.signal("deep:1", nested(256), { requestId: "r" });
      await expect(refused).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(refused).rejects.toMatchObject({ issues: [{ path: "payload" }] });
      expect(session.version).toBe(version);
      expect(await session.readSignal("deep:1")).toBeUndefined();
      // One level less goes through, and the task that waits for it ends well.
      await session.signal("deep:1", nested(255), { requestId: "r2" });
      const task = early ? await session.spawn("deep-waiter", {}) : session.view().tasks[0];
      expect((await session.waitForTask(task?.id ?? "")).state.status).toBe("succeeded");
      await session.close();
    }
  });
});
