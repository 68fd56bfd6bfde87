/**
 * The browser host in real Chromium: one writer across "tabs" (two hosts in one page contend for the same
 * Web Lock and talk over BroadcastChannel exactly as two tabs would), follower inputs through the durable
 * inbox, takeover when the leader closes, and fencing of a stale leader by the owner epoch.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createRegistry,
  defineSignal,
  defineTask,
  InvalidArgumentError,
  indexedDbStorage,
  type Json,
  openSession,
  SessionClosedError,
  SignalRefusedError,
  StaleOwnerError,
} from "../../src/index.ts";
import { ForwardingStorage } from "../../src/testing/forwarding-storage.ts";
import { ROW_ATTEMPTS } from "../../worker/inbox-relay.ts";
import { BrowserSessionHost, DurableInbox } from "../../worker/index.ts";

/** Phases of "echo" wait here until the test lets them finish. */
let gate: Promise<void> = Promise.resolve();
let entries = 0;

const echo = defineTask({
  kind: "echo",
  version: 1,
  input: z.object({ text: z.string() }),
  phases: {
    run: async (ctx) => {
      entries++;
      await gate;
      return ctx.complete({ echoed: ctx.input.text, attempt: ctx.attempt });
    },
  },
});
const registry = () =>
  createRegistry({
    tasks: [echo],
    submissionTask: (s) => ({ kind: "echo", input: { text: String(s.input) } }),
  });

// Two versions of one app. The newer checks more: its echo task takes at most 20 characters, its `go:*`
// signals a step of at most 5 (and a note, "" by default).
const strict = () =>
  createRegistry({
    tasks: [defineTask({ ...echo, input: z.object({ text: z.string().max(20) }) })],
    signals: [
      defineSignal({
        key: "go:*",
        schema: z.object({ step: z.number().max(5), note: z.string().default("") }),
      }),
    ],
    submissionTask: (s) => ({ kind: "echo", input: { text: String(s.input) } }),
  });
/** Phases of "go-waiter" start waiting once this opens; `asking` says one is held here. */
let askGate: Promise<void> = Promise.resolve();
let asking = false;
/** Waits for one `go:*` key and ends with what it received. */
const goWaiter = defineTask({
  kind: "go-waiter",
  version: 1,
  input: z.object({ key: z.string() }),
  phases: {
    ask: async (ctx) => {
      asking = true;
      await askGate;
      return ctx.waitFor(ctx.input.key, { next: "done" });
    },
    done: (ctx) => ctx.complete(ctx.data as Json),
  },
});
const lenient = () =>
  createRegistry({
    tasks: [echo, goWaiter],
    signals: [defineSignal({ key: "go:*", schema: z.object({ step: z.number() }) })],
    submissionTask: (s) => ({ kind: "echo", input: { text: String(s.input) } }),
  });

/** The app's registry whose `submissionTask` throws a plain error (not a refusal) when `fails(input)`. */
const failingApp = (fails: (input: unknown) => boolean, message: string) => () =>
  createRegistry({
    tasks: [echo],
    submissionTask: (s) => {
      if (fails(s.input)) throw new Error(message);
      return { kind: "echo", input: { text: String(s.input) } };
    },
  });

const names = () => {
  const id = Math.random().toString(36).slice(2);
  return { database: `host-${id}`, sessionId: `s-${id}` };
};

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
}

/** Two tabs of one session: `a` leads (with its app's registry), `b` follows with the session open. */
async function twoTabs(leaderRegistry = registry, followerRegistry = registry) {
  const { database, sessionId } = names();
  const tab = (registry: typeof leaderRegistry) =>
    BrowserSessionHost.start({ database, sessionId, registry, durability: "relaxed" });
  const a = await tab(leaderRegistry);
  await a.whenLeader();
  const b = await tab(followerRegistry);
  await until(() => b.session !== undefined, "the follower to open the session");
  return { database, sessionId, a, b };
}

describe("browser host: one writer across tabs", () => {
  it("has exactly one leader, and a follower's input is accepted once through the durable inbox", async () => {
    const { a, b } = await twoTabs();
    expect([a.isLeader, b.isLeader]).toEqual([true, false]);

    const fromFollower = await b.submit({
      requestId: "follower-1",
      conversationId: "main",
      input: "hello from tab B",
    });
    const again = await b.submit({
      requestId: "follower-1",
      conversationId: "main",
      input: "hello from tab B",
    });
    expect(again.id).toBe(fromFollower.id);
    const done = await b.wait(fromFollower.id);
    expect(done).toMatchObject({ status: "succeeded", result: { echoed: "hello from tab B" } });
    const leaderView = a.session?.view();
    expect(leaderView?.submissions.filter((s) => s.requestId === "follower-1")).toHaveLength(1);
    await b.close();
    await a.close();
  });

  it("a follower that closes before it leads is told: whenLeader() rejects instead of waiting forever", async () => {
    const { a, b } = await twoTabs();
    const waiting = b.whenLeader();
    await b.close();
    await expect(waiting).rejects.toMatchObject({ code: "session-closed" });
    await expect(b.whenLeader()).rejects.toMatchObject({ code: "session-closed" });
    expect(a.isLeader).toBe(true);
    await a.close();
  });

  it("hands over when the leader tab closes: the follower takes the lead and finishes the unfinished run", async () => {
    const { database, sessionId } = names();
    let release!: () => void;
    gate = new Promise((resolve) => {
      release = resolve;
    });
    entries = 0;
    const a = await BrowserSessionHost.start({ database, sessionId, registry, durability: "relaxed" });
    await a.whenLeader();
    const sub = await a.submit({ requestId: "r1", conversationId: "main", input: "long job" });
    await until(() => entries === 1, "the leader to start the phase");
    const b = await BrowserSessionHost.start({ database, sessionId, registry, durability: "relaxed" });
    expect(b.isLeader).toBe(false);

    const started = performance.now();
    await a.close(); // the leader tab goes away mid-phase
    await b.whenLeader();
    expect(b.isLeader).toBe(true);
    release();
    const done = await b.wait(sub.id);
    expect(done).toMatchObject({ status: "succeeded", result: { echoed: "long job", attempt: 2 } });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(b.session?.view().tasks[0]?.restarts).toBe(1);
    await b.close();
  });

  it("drops a follower's input the leader can never take, tells that follower, and takes the inputs after it", async () => {
    gate = Promise.resolve();
    const { database, sessionId, a, b } = await twoTabs(strict, lenient);
    const tooLong = "an input the leader's version refuses";
    const refused = b.submit({ requestId: "a-too-long", conversationId: "main", input: tooLong });
    // The leader's typed error, as the kernel's error wire format carries it between tabs.
    await expect(refused).rejects.toMatchObject({ name: "InvalidArgumentError", code: "invalid-argument" });
    await expect(refused).rejects.toBeInstanceOf(InvalidArgumentError);
    const taken = await b.submit({ requestId: "b-short", conversationId: "main", input: "short" });
    expect((await b.wait(taken.id)).status).toBe("succeeded");
    // The same for a signal (kept early: nothing waits for its key yet).
    const signalled = b.signal("go:1", { step: 9 }, { requestId: "s1" });
    await expect(signalled).rejects.toBeInstanceOf(InvalidArgumentError);
    expect((await b.signal("go:2", { step: 2 }, { requestId: "s2" })).signal.key).toBe("go:2");
    // A payload the key's schema reads differently (a field it drops): answered as the leader stored it.
    const reread = await b.signal("go:3", { extra: "dropped", step: 3 }, { requestId: "s4" });
    expect(reread).toMatchObject({ duplicate: false, signal: { payload: { step: 3 }, requestId: "s4" } });
    // The leader's version reads it with a field this one lacks: still this call's own signal.
    const widened = await b.signal("go:4", { step: 4 }, { requestId: "s5" });
    expect(widened).toMatchObject({ duplicate: false, signal: { payload: { step: 4, note: "" } } });
    // Nothing of the refused signal was stored: the leader would take a first one for its key.
    expect(await a.session?.checkSignal("go:1", { step: 1 }, { requestId: "s3" })).toBeUndefined();
    expect((await a.session?.checkSignal("go:2", { step: 2 }, { requestId: "s2" }))?.duplicate).toBe(true);
    // Nothing of the refused one was stored, and nothing is left queued.
    expect(a.session?.submissionForRequest("a-too-long")).toBeUndefined();
    expect(await new DurableInbox(`${database}:inbox`).pending(sessionId)).toEqual([]);
    await b.close();
    await a.close();
  });

  it("tells a follower its signal was refused when the leader keeps no more early signals, and drops one from the follower", async () => {
    const { database, sessionId } = names();
    const tab = () =>
      BrowserSessionHost.start({
        database,
        sessionId,
        registry: lenient,
        durability: "relaxed",
        maxEarlySignals: 1,
      });
    const a = await tab();
    await a.whenLeader();
    const b = await tab();
    await until(() => b.session !== undefined, "the follower to open the session");
    expect((await b.signal("go:1", { step: 1 }, { requestId: "s1" })).signal.key).toBe("go:1");
    const refused = b.signal("go:2", { step: 2 }, { requestId: "s2" });
    await expect(refused).rejects.toBeInstanceOf(SignalRefusedError);
    await expect(refused).rejects.toMatchObject({ code: "early-signals-full", key: "go:2" });
    // Nothing of it was stored, and nothing is left queued; the leader's own check says what signal() would.
    expect(await a.session?.readSignal("go:2")).toBeUndefined();
    await expect(a.session?.checkSignal("go:2", { step: 9 }, { requestId: "s3" })).rejects.toMatchObject({
      code: "early-signals-full",
    });
    expect(await new DurableInbox(`${database}:inbox`).pending(sessionId)).toEqual([]);
    // The follower drops the kept one through the inbox, resolved once the leader dropped it: its place is free.
    expect(await b.dropEarlySignal("go:1")).toMatchObject({ key: "go:1", requestId: "s1" });
    expect(a.session?.earlySignals()).toEqual([]);
    expect(await b.dropEarlySignal("go:1")).toBeUndefined();
    expect((await b.signal("go:2", { step: 2 }, { requestId: "s2" })).duplicate).toBe(false);
    // A wait takes go:2 before the follower's drop reaches the leader: the follower hears there was none
    // to drop (as the leader answered), not that it dropped the signal the waiting task now holds.
    let open: () => void = () => undefined;
    askGate = new Promise((resolve) => {
      open = resolve;
    });
    const waiter = await a.session?.spawn("go-waiter", { key: "go:2" });
    await until(() => asking, "the waiter's phase to start");
    open(); // its wait is committed before the drop below can reach the leader (through the inbox)
    expect(await b.dropEarlySignal("go:2")).toBeUndefined();
    await a.session?.whenIdle();
    expect(a.session?.task(waiter?.id ?? "")?.state).toMatchObject({
      status: "succeeded",
      result: { signals: { "go:2": { step: 2 } } },
    });
    expect(a.session?.earlySignals()).toEqual([]);
    // A repeat this tab sends after queueing a drop of that same signal comes after the drop: a new signal.
    const three = await b.signal("go:3", { step: 3 }, { requestId: "s3" });
    const dropping = b.dropEarlySignal("go:3");
    const again = b.signal("go:3", { step: 3 }, { requestId: "s3" });
    expect(await dropping).toMatchObject({ version: three.signal.version });
    const anew = await again;
    expect(anew.duplicate).toBe(false);
    expect(anew.signal.version).toBeGreaterThan(three.signal.version);
    expect(a.session?.earlySignals().map((signal) => signal.version)).toEqual([anew.signal.version]);
    await b.close();
    await a.close();
  });

  it("answers a follower's repeat of a dropped early signal as a new signal, though its copy has not seen the drop yet", async () => {
    const { a, b } = await twoTabs(lenient, lenient);
    const first = await b.signal("go:7", { step: 7 }, { requestId: "s7" });
    const other = await b.signal("go:8", { step: 8 }, { requestId: "s8" });
    await until(() => b.session?.earlySignals().length === 2, "the follower to see both signals");
    // The leader drops both; the follower is called at once, before its copy adopted those changes.
    expect(await a.dropEarlySignal("go:7")).toMatchObject({ version: first.signal.version });
    expect(await a.dropEarlySignal("go:8")).toMatchObject({ version: other.signal.version });
    expect(b.session?.earlySignals().map((signal) => signal.key)).toEqual(["go:7", "go:8"]);
    // The same signal again is new (not a repeat of one the session no longer keeps)…
    const again = b.signal("go:7", { step: 7 }, { requestId: "s7" });
    // …and another payload for the other key is taken, not refused as a conflict with a dropped signal.
    const changed = b.signal("go:8", { step: 9 }, { requestId: "s9" });
    const [anew, taken] = await Promise.all([again, changed]);
    expect(anew.duplicate).toBe(false);
    expect(anew.signal.version).toBeGreaterThan(first.signal.version);
    expect(taken).toMatchObject({ duplicate: false, signal: { payload: { step: 9 }, requestId: "s9" } });
    await a.session?.whenIdle();
    const kept = a.session?.earlySignals().map((signal) => [signal.key, signal.version]);
    expect(kept).toEqual([
      ["go:7", anew.signal.version],
      ["go:8", taken.signal.version],
    ]);
    await b.close();
    await a.close();
  });

  it("refuses every input on a closed tab with SessionClosedError, and queues nothing for the leader", async () => {
    const { database, sessionId } = names();
    const a = await BrowserSessionHost.start({
      database,
      sessionId,
      registry: lenient,
      durability: "relaxed",
    });
    await a.whenLeader();
    const b = await BrowserSessionHost.start({
      database,
      sessionId,
      registry: lenient,
      durability: "relaxed",
    });
    await until(() => b.session !== undefined, "the follower to open the session");
    expect((await b.signal("go:4", { step: 4 }, { requestId: "s4" })).duplicate).toBe(false);
    await until(() => b.session?.earlySignals().length === 1, "the follower to see the signal");
    await b.close();
    // Each call on the closed tab ends at once (before, a submit or a drop was queued and never settled).
    await expect(
      b.submit({ requestId: "late", conversationId: "main", input: "late" }),
    ).rejects.toBeInstanceOf(SessionClosedError);
    await expect(b.dropEarlySignal("go:4")).rejects.toBeInstanceOf(SessionClosedError);
    await expect(b.signal("go:5", { step: 5 }, { requestId: "s5" })).rejects.toBeInstanceOf(
      SessionClosedError,
    );
    expect(await new DurableInbox(`${database}:inbox`).pending(sessionId)).toEqual([]);
    expect(await a.session?.readSubmissionForRequest("late")).toBeUndefined();
    expect(a.session?.earlySignals().map((s) => s.key)).toEqual(["go:4"]);
    await a.close();
  });

  it("ends a follower's signal that waits for its own queued drop with SessionClosedError when the tab closes meanwhile", async () => {
    const { database, sessionId } = names();
    // The leader's commits wait while `held` is set: the follower's drop stays queued, not yet taken.
    let release: () => void = () => undefined;
    let held: Promise<void> | undefined;
    class Gated extends ForwardingStorage {
      override async commit(...args: Parameters<ForwardingStorage["commit"]>): Promise<void> {
        await held;
        await super.commit(...args);
      }
    }
    const storage = (name: string) => new Gated(indexedDbStorage(name, { durability: "relaxed" }));
    const a = await BrowserSessionHost.start({ database, sessionId, registry: lenient, storage });
    await a.whenLeader();
    const b = await BrowserSessionHost.start({
      database,
      sessionId,
      registry: lenient,
      durability: "relaxed",
    });
    await until(() => b.session !== undefined, "the follower to open the session");
    expect((await b.signal("go:4", { step: 4 }, { requestId: "s4" })).duplicate).toBe(false);
    await until(() => b.session?.earlySignals().length === 1, "the follower to see the signal");
    held = new Promise((resolve) => {
      release = resolve;
    });
    const dropping = b.dropEarlySignal("go:4");
    const again = b.signal("go:4", { step: 4 }, { requestId: "s4" });
    const inbox = new DurableInbox(`${database}:inbox`);
    for (let i = 0; i < 400 && (await inbox.pending(sessionId)).length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await inbox.pending(sessionId)).toEqual([expect.objectContaining({ drop: expect.anything() })]);
    await b.close();
    // Closed before its drop was taken: neither call says the session keeps (or dropped) anything.
    await expect(again).rejects.toBeInstanceOf(SessionClosedError);
    await expect(dropping).rejects.toBeInstanceOf(SessionClosedError);
    release();
    await until(() => a.session?.earlySignals().length === 0, "the leader to take the drop");
    expect(await a.session?.readSignal("go:4")).toBeUndefined();
    await a.close();
  });

  it("refuses an input this tab queued as a follower once it leads itself, and says so to its own caller", async () => {
    gate = Promise.resolve();
    const { database, sessionId, a, b } = await twoTabs(lenient, strict);
    // The leader goes away before it drains: B queues as a follower, then leads and drains the row itself
    // (BroadcastChannel never delivers a tab's own messages, so its caller hears it from its own drain).
    const closing = a.close();
    const refused = b.submit({ requestId: "too-long", conversationId: "main", input: "x".repeat(30) });
    await closing;
    await expect(refused).rejects.toBeInstanceOf(InvalidArgumentError);
    await b.whenLeader();
    expect(b.isLeader).toBe(true);
    expect(b.session?.submissionForRequest("too-long")).toBeUndefined();
    expect(await new DurableInbox(`${database}:inbox`).pending(sessionId)).toEqual([]);
    await b.close();
  });

  it("takes a follower's input on a later drain when a drain stopped for a passing reason", async () => {
    gate = Promise.resolve();
    let failures = 1; // the leader's app fails its first Submission with a plain error (not a refusal)
    const flaky = failingApp(() => failures-- > 0, "the app is not ready yet");
    const { database, sessionId, a, b } = await twoTabs(flaky);
    const taken = await b.submit({ requestId: "later", conversationId: "main", input: "kept queued" });
    expect(failures).toBeLessThan(0); // the first drain failed; a second took it
    expect((await b.wait(taken.id)).result).toEqual({ echoed: "kept queued", attempt: 1 });
    expect(await new DurableInbox(`${database}:inbox`).pending(sessionId)).toEqual([]);
    await b.close();
    await a.close();
  });

  it("drops a follower's input the leader's app fails on every time, tells its caller, and takes the inputs after it", async () => {
    gate = Promise.resolve();
    let poisoned = 0;
    const isPoison = (input: unknown) => input === "poison" && ++poisoned > 0;
    const { database, sessionId, a, b } = await twoTabs(
      failingApp(isPoison, "the app cannot take this input"),
    );
    // The inbox is drained in the order it was filled: the poisoned row holds the other back until dropped.
    const failed = b.submit({ requestId: "a-poison", conversationId: "main", input: "poison" });
    const after = b.submit({ requestId: "b-after", conversationId: "main", input: "queued behind it" });
    // The app's own error, as the leader's submit() would have thrown it, once drains 1 s and 2 s apart
    // failed on it too.
    await expect(failed).rejects.toMatchObject({ name: "Error", message: "the app cannot take this input" });
    expect(poisoned).toBeGreaterThanOrEqual(ROW_ATTEMPTS);
    const taken = await after;
    expect((await b.wait(taken.id)).result).toEqual({ echoed: "queued behind it", attempt: 1 });
    expect(a.session?.submissionForRequest("a-poison")).toBeUndefined();
    expect(await new DurableInbox(`${database}:inbox`).pending(sessionId)).toEqual([]);
    await b.close();
    await a.close();
  });

  it("takes a follower's queued inputs in the order they came, not by their requestIds", async () => {
    gate = Promise.resolve();
    const { database, sessionId } = names();
    // A follower queued three inputs and closed before any tab led (the inbox is all that is left of them).
    const inbox = new DurableInbox(`${database}:inbox`);
    for (const requestId of ["z-first", "m-second", "a-third"])
      await inbox.put(sessionId, { requestId, conversationId: "main", input: requestId });
    await inbox.close();
    const a = await BrowserSessionHost.start({ database, sessionId, registry, durability: "relaxed" });
    await a.whenLeader();
    await until(() => (a.session?.view().submissions.length ?? 0) === 3, "the queued inputs to be taken");
    const users = a.session?.view().conversations[0]?.entries.filter((e) => e.content.kind === "user");
    expect(users?.map((e) => (e.content as { text: string }).text)).toEqual([
      "z-first",
      "m-second",
      "a-third",
    ]);
    await a.close();
  });

  it("never leads once closed, even when the lock arrives while it closes", async () => {
    const { database, sessionId, a, b } = await twoTabs();
    const waiting = b.wait("a-submission-that-never-comes");
    await a.close(); // B gets the lock and starts opening its writer…
    await b.close(); // …and is closed meanwhile
    // What its callers waited for ends with the close, not never.
    await expect(waiting).rejects.toBeInstanceOf(SessionClosedError);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(b.isLeader).toBe(false);
    // The session is free: a new tab leads it and commits.
    const c = await BrowserSessionHost.start({ database, sessionId, registry, durability: "relaxed" });
    await c.whenLeader();
    expect(c.isLeader).toBe(true);
    await c.session?.commit((d) => d.appendEntry("main", { kind: "note", text: "after both closed" }));
    await c.close();
  });

  it("fences a stale leader: once another tab takes the epoch, the old writer cannot commit", async () => {
    const { database, sessionId } = names();
    const storage = () => indexedDbStorage(database, { durability: "relaxed" });
    const frozen = await openSession({ id: sessionId, storage: storage(), registry: registry() });
    await frozen.commit((d) => d.appendEntry("main", { kind: "note", text: "before the freeze" }));
    // Another tab steals leadership and opens the session with a new epoch while this one is frozen.
    const next = await openSession({ id: sessionId, storage: storage(), registry: registry() });
    expect(next.epoch).toBe(frozen.epoch + 1);
    await expect(
      frozen.commit((d) => d.appendEntry("main", { kind: "note", text: "from the frozen tab" })),
    ).rejects.toBeInstanceOf(StaleOwnerError);
    await next.commit((d) => d.appendEntry("main", { kind: "note", text: "from the new leader" }));
    const texts = (await openSession({ id: sessionId, storage: storage(), mode: "read" }))
      .view()
      .conversations[0]?.entries.map((e) => (e.content.kind === "note" ? e.content.text : ""));
    expect(texts).toEqual(["before the freeze", "from the new leader"]);
  });
});
