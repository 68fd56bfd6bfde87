/**
 * Parked waits (DESIGN §9, `session/parking.ts`): past `liveWaits` waits of task trees started without a
 * Submission, new ones are stored apart from live work. A reopened session loads none of them — it counts
 * them — and reads one back when its key is signalled, when it is cancelled or awaited by id, or when its
 * deadline comes. Every outcome must equal what the wait would have done in memory. Memory and
 * fake-indexeddb.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitRecord,
  createRegistry,
  defineSignal,
  defineTask,
  InvalidArgumentError,
  indexedDbStorage,
  type Json,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type PendingWait,
  type Received,
  type Storage,
  sequentialIds,
} from "../../src/index.ts";
import { deferred } from "../support/storage-wrappers.ts";

const answer = defineSignal({ key: "answer:*", schema: z.object({ text: z.string().min(1) }) });
const strict = defineSignal({ key: "strict:*", schema: z.object({ ok: z.boolean() }), early: false });

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
      ctx.waitFor(ctx.input.keys, {
        next: "answered",
        mode: ctx.input.mode,
        about: { question: ctx.input.keys.join("+") },
        ...(ctx.input.deadlineMs !== undefined && {
          deadline: { at: ctx.clock.now() + ctx.input.deadlineMs, next: "late" },
        }),
      }),
    answered: (ctx) =>
      ctx.complete({ via: "signal", signals: (ctx.data as unknown as Received).signals } as unknown as Json),
    late: (ctx) => ctx.complete({ via: "deadline" }),
  },
});

/** Version 2 of a one-key asker whose input is renamed: stored version-1 waits are migrated when read back. */
const askerV1 = defineTask({
  kind: "renamed",
  version: 1,
  input: z.object({ question: z.string() }),
  phases: {
    ask: (ctx) => ctx.waitFor(`answer:${ctx.input.question}`, { next: "answered" }),
    answered: (ctx) => ctx.complete(`v1 ${ctx.input.question}`),
  },
});
const askerV2 = defineTask({
  kind: "renamed",
  version: 2,
  input: z.object({ topic: z.string() }),
  phases: {
    ask: (ctx) => ctx.waitFor(`answer:${ctx.input.topic}`, { next: "answered" }),
    answered: (ctx) => ctx.complete(`v2 ${ctx.input.topic}`),
  },
  migrations: {
    1: (stored) => ({ ...stored, input: { topic: (stored.input as { question: string }).question } }),
  },
});

let databases = 0;
let processes = 0;
const stores: [string, () => Storage][] = [
  ["memory", () => memoryStorage()],
  ["fake-indexeddb", () => indexedDbStorage(`parked-${++databases}`)],
];

/** A process over `storage` (memory stores are shared between processes through `reopen`). */
async function open(
  storage: Storage,
  clock: ManualClock,
  liveWaits = 3,
  mode: "write" | "read" = "write",
  renamed: typeof askerV1 | typeof askerV2 = askerV1,
) {
  const timers = new ManualTimers(clock);
  const commits: CommitRecord[] = [];
  const session = await openSession({
    id: "parked",
    storage: "reopen" in storage ? (storage as ReturnType<typeof memoryStorage>).reopen() : storage,
    registry: createRegistry({ tasks: [asker, renamed], signals: [answer, strict] }),
    clock,
    timers,
    // Every process numbers its records apart (a new task must never take an id storage already holds).
    ids: sequentialIds(1_000 * ++processes),
    liveWaits,
    mode,
  });
  session.subscribe(session.version, (c) => commits.push(c));
  if (mode === "write") await session.resume();
  return { session, timers, commits };
}

/** Ten waits, one per key `answer:0` … `answer:9` (the fifth with a deadline): three live, seven parked. */
async function tenWaits(storage: Storage, clock: ManualClock) {
  const first = await open(storage, clock);
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const input = { keys: [`answer:${i}`], ...(i === 4 && { deadlineMs: 60_000 }) };
    ids.push((await first.session.spawn("asker", input)).id);
    await first.session.whenIdle();
  }
  const pending = first.session.pending();
  const parked = first.commits.flatMap((c) => c.parked ?? []).map((w) => w.id);
  await first.session.close();
  return { ids, pending, parked };
}

async function allParkedWaits(session: Awaited<ReturnType<typeof open>>["session"], limit: number) {
  const waits: PendingWait[] = [];
  let before: string | undefined;
  for (let page = 0; page < 100; page++) {
    const next = await session.readParkedWaits({ limit, ...(before !== undefined && { before }) });
    waits.push(...next.waits);
    if (next.next === undefined) break;
    before = next.next;
  }
  return waits;
}

describe.each(stores)("parked waits on %s", (_name, makeStorage) => {
  it("parks waits past liveWaits; a reopened session loads the live ones, counts the parked and lists them from storage", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const { ids, pending, parked } = await tenWaits(storage, clock);
    expect(pending).toHaveLength(10);
    expect(parked).toEqual(ids.slice(3));
    const { session } = await open(storage, clock);
    expect(session.pending().map((w) => w.taskId)).toEqual(ids.slice(0, 3));
    expect(session.view().tasks.map((t) => t.id)).toEqual(ids.slice(0, 3));
    expect(session.parkedInStorage).toBe(7);
    // Paged two at a time, the parked waits are exactly what pending() listed before the reopen.
    const listed = await allParkedWaits(session, 2);
    expect(new Set(listed.map((w) => w.key)).size).toBe(7);
    expect(listed.sort((a, b) => (a.key < b.key ? -1 : 1))).toEqual(pending.slice(3));
    // The next deadline among them is the scheduler's next wake-up (an alarm at the edge).
    expect(session.wakeInfo().nextWakeAt).toBe(61_000);
  });

  it("lists parked waits a page at a time, each exactly once, also when one commit parked more than a page", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock, 0);
    // Seven waits created in one commit (one version), then three in commits of their own.
    await first.session.commit((d) => {
      for (let i = 0; i < 7; i++) d.spawn("asker", { keys: [`answer:many-${i}`] });
    });
    for (let i = 0; i < 3; i++) await first.session.spawn("asker", { keys: [`answer:one-${i}`] });
    await first.session.whenIdle();
    await first.session.close();
    const { session } = await open(storage, clock, 0);
    expect(session.parkedInStorage).toBe(10);
    for (const limit of [1, 2, 3, 7, 100]) {
      const keys = (await allParkedWaits(session, limit)).map((w) => w.key);
      expect(keys.length, `pages of ${limit}`).toBe(10);
      expect(new Set(keys).size, `pages of ${limit}`).toBe(10);
    }
  });

  it("lists every wait, in memory and in storage, in pages no larger than asked, each exactly once", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock);
    for (let i = 0; i < 12; i++) await first.session.spawn("asker", { keys: [`answer:${i}`] });
    await first.session.whenIdle();
    const everyKey = first.session.pending().map((w) => w.key);
    expect(everyKey).toHaveLength(12); // parked past the first three, yet all still in this process's memory
    const pages = async (session: typeof first.session, limit: number) => {
      const keys: string[] = [];
      let before: string | undefined;
      for (let n = 0; n < 50; n++) {
        const page = await session.readPending({ limit, ...(before !== undefined && { before }) });
        expect(page.waits.length, `a page of ${limit}`).toBeLessThanOrEqual(limit);
        keys.push(...page.waits.map((w) => w.key));
        if (page.next === undefined) break;
        before = page.next;
      }
      return keys;
    };
    for (const limit of [1, 5, 100]) expect((await pages(first.session, limit)).sort()).toEqual(everyKey);
    // Newest first.
    expect((await first.session.readPending({ limit: 1 })).waits.map((w) => w.key)).toEqual(["answer:11"]);
    await first.session.close();
    // Reopened: three in memory, nine in storage, merged into the same pages.
    const { session } = await open(storage, clock);
    expect(session.pending()).toHaveLength(3);
    for (const limit of [1, 2, 7, 100]) expect((await pages(session, limit)).sort()).toEqual(everyKey);
    const whole = await session.readPending({ limit: 100 });
    expect(whole.stored).toBe(9);
    expect(whole.next).toBeUndefined();
  });

  it("a signal for a parked wait reads it back and continues it in the commit that stores the signal", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const { ids } = await tenWaits(storage, clock);
    const { session, commits } = await open(storage, clock);
    const receipt = await session.signal("answer:7", { text: "seven" }, { requestId: "r7" });
    expect(receipt).toMatchObject({ duplicate: false, takenBy: ids[7] });
    const resolved = commits.find((c) => c.signals?.some((s) => s.key === "answer:7")) as CommitRecord;
    expect(resolved.tasks.find((t) => t.id === ids[7])?.state.status).toBe("running");
    expect(resolved.unparked?.map((w) => w.id)).toEqual([ids[7]]);
    const done = await session.waitForTask(ids[7] as string);
    expect(done.state).toEqual({
      status: "succeeded",
      result: { via: "signal", signals: { "answer:7": { text: "seven" } } },
    });
    expect(session.parkedInStorage).toBe(6);
    // A repeat gets the first outcome; another payload is refused — also from a new process.
    await session.close();
    const again = await open(storage, clock);
    expect(again.session.parkedInStorage).toBe(6);
    const repeat = await again.session.signal("answer:7", { text: "seven" }, { requestId: "r7" });
    expect(repeat).toMatchObject({ duplicate: true, takenBy: ids[7] });
    await expect(
      again.session.signal("answer:7", { text: "eight" }, { requestId: "r8" }),
    ).rejects.toMatchObject({ code: "signal-conflict" });
    expect((await again.session.readParkedWaits({ limit: 100 })).waits.map((w) => w.key)).not.toContain(
      "answer:7",
    );
  });

  it("signals every parked wait at once while each is awaited by id: every read back overlaps, each wait ends once", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const { ids, parked } = await tenWaits(storage, clock);
    const { session, commits } = await open(storage, clock);
    const keys = parked.map((id) => `answer:${ids.indexOf(id)}`);
    const ended = parked.map((id) => session.waitForTask(id));
    const receipts = await Promise.all(
      keys.map((key) => session.signal(key, { text: key }, { requestId: `r-${key}` })),
    );
    expect(receipts.map((r) => r.takenBy)).toEqual(parked);
    expect((await Promise.all(ended)).map((task) => task.state.status)).toEqual(
      parked.map(() => "succeeded"),
    );
    // Each taken once, and none kept as an early signal for a wait that was read back late.
    const taken = commits.flatMap((c) => c.signals ?? []).filter((s) => s.consumedBy !== undefined);
    expect(taken.map((s) => s.key).sort()).toEqual([...keys].sort());
    expect(session.earlySignals()).toEqual([]);
    expect(session.parkedInStorage).toBe(0);
  });

  it("refuses a bad payload for a parked wait and stores nothing; a strict key is found when parked", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock, 0);
    const task = await first.session.spawn("asker", { keys: ["strict:1"] });
    await first.session.whenIdle();
    await first.session.close();
    const { session } = await open(storage, clock, 0);
    expect(session.parkedInStorage).toBe(1);
    const version = session.version;
    await expect(session.signal("strict:1", { ok: "yes" }, { requestId: "bad" })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    expect(session.version).toBe(version);
    // `early: false` takes a signal only while a wait has the key: the parked one does.
    await session.signal("strict:1", { ok: true }, { requestId: "good" });
    expect((await session.waitForTask(task.id)).state).toMatchObject({ status: "succeeded" });
    await expect(session.signal("strict:2", { ok: true }, { requestId: "nobody" })).rejects.toMatchObject({
      code: "signal-not-awaited",
    });
  });

  it("cancels a parked wait by id; awaiting one by id reads it back", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const { ids } = await tenWaits(storage, clock);
    const { session } = await open(storage, clock);
    await session.cancel(ids[5] as string, "no longer needed");
    const cancelled = await session.waitForTask(ids[5] as string);
    expect(cancelled.state).toEqual({ status: "cancelled", reason: "no longer needed" });
    expect(session.parkedInStorage).toBe(6);
    // Waiting on a parked task by id reads it back, and it ends when its signal comes.
    const waiting = session.waitForTask(ids[9] as string);
    await session.signal("answer:9", { text: "nine" }, { requestId: "r9" });
    expect((await waiting).state).toMatchObject({ status: "succeeded" });
    await session.close();
    const again = await open(storage, clock);
    expect(again.session.parkedInStorage).toBe(5);
    expect((await again.session.readTask(ids[5] as string))?.state.status).toBe("cancelled");
    const listed = (await again.session.readParkedWaits()).waits.map((w) => w.taskId);
    expect(listed).not.toContain(ids[5]);
    expect(listed).not.toContain(ids[9]);
  });

  it("a parked wait's deadline wakes a reopened session, with no signal and nothing else running", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const { ids } = await tenWaits(storage, clock);
    const { session, timers } = await open(storage, clock);
    expect(session.task(ids[4] as string)).toBeUndefined();
    timers.advance(60_000);
    const done = await session.waitForTask(ids[4] as string);
    expect(done.state).toEqual({ status: "succeeded", result: { via: "deadline" } });
    expect(session.parkedInStorage).toBe(6);
    // No other deadline is left among the parked waits.
    expect(session.wakeInfo().nextWakeAt).toBeUndefined();
    await expect(
      session.signal("answer:4", { text: "too late" }, { requestId: "late" }),
    ).resolves.toMatchObject({ duplicate: false });
    expect((await session.readTask(ids[4] as string))?.state).toEqual(done.state);
  });

  it("a parked wait on all of two keys stays parked as it takes the first, and continues with both", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock, 0);
    const task = await first.session.spawn("asker", { keys: ["answer:a", "answer:b"], mode: "all" });
    await first.session.whenIdle();
    await first.session.close();
    const second = await open(storage, clock, 0);
    await second.session.signal("answer:a", { text: "A" }, { requestId: "ra" });
    await second.session.whenIdle();
    await second.session.close();
    const third = await open(storage, clock, 0);
    expect(third.session.parkedInStorage).toBe(1);
    expect((await third.session.readParkedWaits()).waits.map((w) => w.key)).toEqual(["answer:b"]);
    await third.session.signal("answer:b", { text: "B" }, { requestId: "rb" });
    expect((await third.session.waitForTask(task.id)).state).toEqual({
      status: "succeeded",
      result: { via: "signal", signals: { "answer:a": { text: "A" }, "answer:b": { text: "B" } } },
    });
    expect(third.session.parkedInStorage).toBe(0);
  });

  it("migrates a parked wait of an older task version when it is read back, before it takes its signal", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock, 0);
    const task = await first.session.spawn("renamed", { question: "colour" });
    await first.session.whenIdle();
    await first.session.close();
    const second = await open(storage, clock, 0, "write", askerV2);
    await second.session.signal("answer:colour", { text: "blue" }, { requestId: "c" });
    const done = await second.session.waitForTask(task.id);
    expect(done).toMatchObject({
      kindVersion: 2,
      input: { topic: "colour" },
      state: { result: "v2 colour" },
    });
  });

  it("refuses a new wait on a key a parked wait holds, and the parked one still takes its signal", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock, 0);
    const held = await first.session.spawn("asker", { keys: ["answer:shared"] });
    await first.session.whenIdle();
    await first.session.close();
    const { session } = await open(storage, clock, 0);
    const second = await session.spawn("asker", { keys: ["answer:shared"] });
    expect((await session.waitForTask(second.id)).state).toMatchObject({
      status: "failed",
      error: { code: "key-taken" },
    });
    await session.signal("answer:shared", { text: "mine" }, { requestId: "s" });
    expect((await session.waitForTask(held.id)).state).toMatchObject({ status: "succeeded" });
  });

  it("answers a read-only session's check of a signal for a parked wait as the writer would", async () => {
    const storage = makeStorage();
    const clock = new ManualClock(1_000);
    const first = await open(storage, clock, 0);
    await first.session.spawn("asker", { keys: ["strict:9"] });
    await first.session.whenIdle();
    await first.session.close();
    const reader = await open(storage, clock, 0, "read");
    await expect(
      reader.session.checkSignal("strict:9", { ok: true }, { requestId: "x" }),
    ).resolves.toBeUndefined();
    await expect(
      reader.session.checkSignal("strict:8", { ok: true }, { requestId: "x" }),
    ).rejects.toMatchObject({
      code: "signal-not-awaited",
    });
  });
});

it("reports a corrupt parked wait blocked when its deadline comes, and passes the deadlines of the others", async () => {
  const storage = memoryStorage();
  const clock = new ManualClock(1_000);
  const first = await open(storage, clock, 0);
  const broken = await first.session.spawn("asker", { keys: ["answer:x"], deadlineMs: 10_000 });
  const fine = await first.session.spawn("asker", { keys: ["answer:y"], deadlineMs: 20_000 });
  await first.session.whenIdle();
  await first.session.close();
  storage.unsafeWriteRaw("parked", "tasks", [broken.id], { id: broken.id, state: "not a task" });
  const { session, timers } = await open(storage, clock, 0);
  // Listed without it (and it is reported blocked), not failing the whole page.
  expect((await session.readParkedWaits()).waits.map((w) => w.key)).toEqual(["answer:y"]);
  expect(session.view().blocked.map((b) => b.id)).toEqual([broken.id]);
  timers.advance(10_000);
  await session.whenIdle();
  expect(session.task(fine.id)).toBeUndefined(); // not due yet: still in storage only
  timers.advance(10_000);
  await session.whenIdle();
  expect(session.task(fine.id)?.state).toEqual({ status: "succeeded", result: { via: "deadline" } });
  expect(session.view().blocked).toEqual([
    expect.objectContaining({ kind: "task", id: broken.id, record: `tasks/${broken.id}` }),
  ]);
  expect(session.wakeInfo().nextWakeAt).toBeUndefined();
});

/**
 * A parked wait on `answer:old` (with `deadlineMs`, when given) and newer finished work, so the wait is the
 * oldest item and leaves memory when it ends; then `wrap` may wrap the store, and a process opens it that
 * keeps one finished item (`retainSettled: 1`).
 */
async function oldestParkedWait(deadlineMs?: number, wrap = (storage: MemoryStorage) => storage) {
  const base = memoryStorage();
  const clock = new ManualClock(1_000);
  const first = await open(base, clock, 0);
  const parked = await first.session.spawn("asker", {
    keys: ["answer:old"],
    ...(deadlineMs !== undefined && { deadlineMs }),
  });
  await first.session.whenIdle();
  for (let i = 0; i < 2; i++) {
    const newer = await first.session.spawn("asker", { keys: [`answer:new-${i}`] });
    await first.session.signal(`answer:new-${i}`, { text: "done" }, { requestId: `n${i}` });
    await first.session.waitForTask(newer.id);
  }
  await first.session.close();
  // Opened over this very handle (the `open` above reopens a memory store, which would drop a wrapper).
  const timers = new ManualTimers(clock);
  const commits: CommitRecord[] = [];
  const session = await openSession({
    id: "parked",
    storage: wrap(base.reopen()),
    registry: createRegistry({ tasks: [asker], signals: [answer, strict] }),
    clock,
    timers,
    ids: sequentialIds(1_000 * ++processes),
    liveWaits: 0,
    retainSettled: 1,
  });
  session.subscribe(session.version, (c) => commits.push(c));
  await session.resume();
  return { parked, session, timers, commits };
}

it("a parked wait awaited by id resolves when it ends, also when ending it evicts it from memory", async () => {
  const { parked, session } = await oldestParkedWait();
  const waiting = session.waitForTask(parked.id);
  await session.signal("answer:old", { text: "finally" }, { requestId: "old" });
  expect((await waiting).state).toMatchObject({ status: "succeeded" });
  expect(session.task(parked.id)).toBeUndefined(); // it did leave memory
});

it("never adopts a parked wait read before a commit moved it on: its deadline ended it while a signal's read of it was held", async () => {
  // The signal's read of the wait by its key is held until the wait's deadline has ended it.
  const held = deferred();
  const readStarted = deferred();
  const { parked, session, timers, commits } = await oldestParkedWait(60_000, (storage) => {
    const readWaiting = storage.readWaiting.bind(storage);
    storage.readWaiting = async (sessionId, keys) => {
      const trees = await readWaiting(sessionId, keys);
      readStarted.resolve();
      await held.promise;
      return trees; // read before the deadline: the wait as it was, awaiting
    };
    return storage;
  });
  const signalled = session.signal("answer:old", { text: "late" }, { requestId: "old" });
  await readStarted.promise;
  timers.advance(60_000);
  await session.whenIdle();
  expect(session.task(parked.id)).toBeUndefined(); // ended by its deadline, and gone from memory
  held.resolve();
  // The held read brought the wait back as it was: it is not adopted, so the signal finds no wait and is
  // kept (a wait ends once).
  expect(await signalled).toMatchObject({ duplicate: false });
  expect((await signalled).takenBy).toBeUndefined();
  await session.whenIdle();
  const ends = commits
    .flatMap((c) => c.tasks)
    .filter((t) => t.id === parked.id && t.state.status !== "awaiting" && t.state.status !== "running");
  expect(ends.map((t) => t.state)).toEqual([{ status: "succeeded", result: { via: "deadline" } }]);
  expect(session.task(parked.id)).toBeUndefined();
});

describe("pending pages over memory and storage", () => {
  /** Waits on `answer:0` … (one live, the rest parked), reopened over a store whose `corrupt` rows fail. */
  async function reopenedWith(count: number, corrupt: (ids: string[]) => string[]) {
    const base = memoryStorage();
    const clock = new ManualClock(1_000);
    const first = await open(base, clock, 1);
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      ids.push((await first.session.spawn("asker", { keys: [`answer:${i}`] })).id);
      await first.session.whenIdle();
    }
    await first.session.close();
    const storage = base.reopen();
    const bad = new Set(corrupt(ids));
    const readTask = storage.readTask.bind(storage);
    storage.readTask = async (sessionId, taskId) => {
      const row = await readTask(sessionId, taskId);
      return bad.has(taskId) && row ? { ...row, value: { nonsense: true } } : row;
    };
    const parkedReads: number[] = [];
    const readParked = storage.readParked.bind(storage);
    storage.readParked = (sessionId, before, limit) => {
      parkedReads.push(limit);
      return readParked(sessionId, before, limit);
    };
    // Opened over this very handle (the `open` above reopens a memory store, which would drop the wrappers).
    const session = await openSession({
      id: "parked",
      storage,
      registry: createRegistry({ tasks: [asker], signals: [answer, strict] }),
      clock,
      timers: new ManualTimers(clock),
      ids: sequentialIds(1_000 * ++processes),
      liveWaits: 1,
    });
    await session.resume();
    return { session, parkedReads };
  }
  async function allKeys(session: Awaited<ReturnType<typeof reopenedWith>>["session"], limit: number) {
    const keys: string[] = [];
    let before: string | undefined;
    for (let n = 0; n < 50; n++) {
      const page = await session.readPending({ limit, ...(before !== undefined && { before }) });
      keys.push(...page.waits.map((w) => w.key));
      if (page.next === undefined) break;
      before = page.next;
    }
    return keys.sort();
  }

  it("never skips a parked wait behind an older one in memory when rows of a page fail to load", async () => {
    // The newest parked row is corrupt: storage's full page holds one good row, memory an older wait.
    const one = await reopenedWith(4, (ids) => [ids[3] as string]);
    expect(one.session.pending().map((w) => w.key)).toEqual(["answer:0"]);
    for (const limit of [1, 2, 100]) {
      expect(await allKeys(one.session, limit), `pages of ${limit}`).toEqual([
        "answer:0",
        "answer:1",
        "answer:2",
      ]);
    }
    // Every storage row of the first page fails: the page still goes on to the rows below them.
    const two = await reopenedWith(5, (ids) => [ids[3] as string, ids[4] as string]);
    expect((await two.session.readPending({ limit: 2 })).waits).toEqual([]);
    expect(await allKeys(two.session, 2)).toEqual(["answer:0", "answer:1", "answer:2"]);
  });

  it("lists only keys that start with a prefix, and reads no storage for a kernel prefix", async () => {
    const { session, parkedReads } = await reopenedWith(12, () => []);
    const ones = await session.readPending({ prefix: "answer:1" });
    expect(ones.waits.map((w) => w.key).sort()).toEqual(["answer:1", "answer:10", "answer:11"]);
    expect(parkedReads.length).toBeGreaterThan(0); // an app prefix reads parked waits
    parkedReads.length = 0;
    expect((await session.readPending({ prefix: "run-on:" })).waits).toEqual([]);
    expect(parkedReads).toEqual([]);
  });
});
