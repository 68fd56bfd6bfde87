/**
 * What a follower tab's callers wait for (worker/session-watch.ts), over a real session: a drop of an early
 * signal resolves from the change that ended the signal — and, when this tab cannot see that change (its
 * copy rebuilt past those versions, its subscription cut off), from what the session it has open holds.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type ChangeListener,
  createRegistry,
  defineSignal,
  defineTask,
  type Json,
  memoryStorage,
  openSession,
  type Session,
} from "../../src/index.ts";
import { InboxRelay } from "../../worker/inbox-relay.ts";
import { SessionWatch } from "../../worker/session-watch.ts";

const taker = defineTask({
  kind: "taker",
  version: 1,
  input: z.object({ key: z.string() }),
  phases: {
    ask: (ctx) => ctx.waitFor(ctx.input.key, { next: "done" }),
    done: (ctx) => ctx.complete(ctx.data as Json),
  },
});
const registry = createRegistry({
  tasks: [taker],
  signals: [defineSignal({ key: "go:*", schema: z.object({ step: z.number() }) })],
});

/** A tab over `session` that hears its changes, or none (`deaf`: they were in versions it skipped). */
function tab(session: Session, deaf: boolean) {
  return {
    session,
    subscribe: (from: number, listener: ChangeListener, onError?: (error: Error) => void) =>
      deaf ? () => undefined : session.subscribe(from, listener, onError ? { onError } : {}),
  };
}

describe("a follower's drop of an early signal", () => {
  it("says whether it was dropped or taken, from the change that ended it or, unseen, from the session", async () => {
    const session = await openSession({ id: "watch", storage: memoryStorage(), registry });
    await session.resume();
    const kept = async (n: number) =>
      (await session.signal(`go:${n}`, { step: n }, { requestId: `s${n}` })).signal;
    const queued = (n: number) => ({ row: `drop-${n}`, queued: Promise.resolve() });
    const relay = new InboxRelay("watch", `watch-${Math.random()}`, () => undefined);

    // Seen: the change that dropped it, or the one in which a wait took it.
    const heard = new SessionWatch(tab(session, false), relay);
    const one = await kept(1);
    const dropping = heard.dropped(one, queued(1));
    await session.dropEarlySignal("go:1");
    expect(await dropping).toEqual(one);
    const two = await kept(2);
    const losing = heard.dropped(two, queued(2));
    await session.spawn("taker", { key: "go:2" });
    await session.whenIdle();
    expect(await losing).toBeUndefined();

    // Unseen (the tab's listener skipped those versions): read from the session when the tab reopens it.
    const deaf = new SessionWatch(tab(session, true), relay);
    const three = await kept(3);
    const four = await kept(4);
    const dropped = deaf.dropped(three, queued(3));
    const taken = deaf.dropped(four, queued(4));
    let told = false;
    void dropped.then(() => {
      told = true;
    });
    await session.dropEarlySignal("go:3");
    await session.spawn("taker", { key: "go:4" });
    await session.whenIdle();
    expect(told).toBe(false); // nothing told this tab yet
    deaf.notify();
    expect(await dropped).toEqual(three);
    expect(await taken).toBeUndefined();
    await session.close();
  });

  it("reads an unseen outcome the same under a newer app version, and when its subscription is cut off", async () => {
    const storage = memoryStorage();
    const leader = await openSession({ id: "mixed", storage, registry });
    await leader.resume();
    const kept = (await leader.signal("go:5", { step: 5 }, { requestId: "s5" })).signal;
    // The follower runs a newer app: its schema reads a payload with a field the leader's lacks.
    const newer = createRegistry({
      tasks: [taker],
      signals: [
        defineSignal({ key: "go:*", schema: z.object({ step: z.number(), note: z.string().default("") }) }),
      ],
    });
    const follow = () => openSession({ id: "mixed", storage, registry: newer, mode: "read" });
    let cut: ((error: Error) => void) | undefined;
    const view = {
      session: await follow(),
      subscribe: (_from: number, _listener: ChangeListener, onError?: (error: Error) => void) => {
        cut = onError;
        return () => undefined;
      },
    };
    const relay = new InboxRelay("mixed", `mixed-${Math.random()}`, () => undefined);
    const watch = new SessionWatch(view, relay);
    const dropping = watch.dropped(kept, { row: "drop-5", queued: Promise.resolve() });
    await leader.spawn("taker", { key: "go:5" });
    await leader.whenIdle();
    // Its subscription is cut off (history pruned, say) and it opens the session again: a wait took it.
    view.session = await follow();
    cut?.(new Error("cut off"));
    expect(await dropping).toBeUndefined();
    await leader.close();
  });
});

describe("a follower's signal", () => {
  const relay = () => new InboxRelay("signals", `signals-${Math.random()}`, () => undefined);
  const queued = (row: string) => ({ row, queued: Promise.resolve() });

  it("is answered from the session when the tab did not see the change that stored it", async () => {
    const session = await openSession({ id: "unseen", storage: memoryStorage(), registry });
    await session.resume();
    const task = await session.spawn("taker", { key: "go:1" });
    await session.whenIdle();
    const watch = new SessionWatch(tab(session, true), relay());
    const answered = watch.signal("go:1", { step: 1 }, { requestId: "r1" }, queued("row-1"));
    let told = false;
    void answered.then(() => {
      told = true;
    });
    // The leader takes the row and commits it; this tab hears nothing of it.
    await session.signal("go:1", { step: 1 }, { requestId: "r1" });
    await session.waitForTask(task.id);
    expect(told).toBe(false);
    watch.notify(); // the tab reopened its session
    expect(await answered).toMatchObject({ duplicate: false, takenBy: task.id });
    await session.close();
  });

  it("is refused as the leader refuses it when another call with its requestId stored another payload", async () => {
    const session = await openSession({ id: "same-request", storage: memoryStorage(), registry });
    await session.resume();
    await session.spawn("taker", { key: "go:2" });
    await session.whenIdle();
    const watch = new SessionWatch(tab(session, false), relay());
    // This tab's call is queued; another tab's call under the same requestId is stored first.
    const mine = watch.signal("go:2", { step: 1 }, { requestId: "decision" }, queued("row-2"));
    await session.signal("go:2", { step: 2 }, { requestId: "decision" });
    await expect(mine).rejects.toMatchObject({ code: "signal-conflict" });
    // What the leader answers the very same call:
    await expect(session.signal("go:2", { step: 1 }, { requestId: "decision" })).rejects.toMatchObject({
      code: "signal-conflict",
    });
    await session.close();
  });

  it("is refused when its requestId stored the same decision without the arguments this call edited", async () => {
    const approvals = createRegistry({
      tasks: [taker],
      signals: [
        defineSignal({
          key: "go:*",
          schema: z.object({ approved: z.boolean(), arguments: z.object({ to: z.string() }).optional() }),
        }),
      ],
    });
    const session = await openSession({ id: "edited", storage: memoryStorage(), registry: approvals });
    await session.resume();
    await session.spawn("taker", { key: "go:4" });
    await session.whenIdle();
    const watch = new SessionWatch(tab(session, false), relay());
    const edited = { approved: true, arguments: { to: "edited@example.com" } };
    const mine = watch.signal("go:4", edited, { requestId: "decision" }, queued("row-4"));
    await session.signal("go:4", { approved: true }, { requestId: "decision" });
    await expect(mine).rejects.toMatchObject({ code: "signal-conflict" });
    await expect(session.signal("go:4", edited, { requestId: "decision" })).rejects.toMatchObject({
      code: "signal-conflict",
    });
    await session.close();
  });

  it("is its own when the key's schema reads the payload into another value", async () => {
    const trimmed = createRegistry({
      tasks: [taker],
      signals: [defineSignal({ key: "go:*", schema: z.object({ name: z.string().trim().toLowerCase() }) })],
    });
    const session = await openSession({ id: "trimmed", storage: memoryStorage(), registry: trimmed });
    await session.resume();
    await session.spawn("taker", { key: "go:5" });
    await session.whenIdle();
    const watch = new SessionWatch(tab(session, false), relay());
    const mine = watch.signal("go:5", { name: "  Ana " }, { requestId: "r5" }, queued("row-5"));
    await session.signal("go:5", { name: "  Ana " }, { requestId: "r5" });
    expect(await mine).toMatchObject({ duplicate: false, signal: { payload: { name: "ana" } } });
    await session.close();
  });

  it("is its own under a newer app version that reads the payload differently", async () => {
    const storage = memoryStorage();
    const leader = await openSession({ id: "newer", storage, registry });
    await leader.resume();
    const task = await leader.spawn("taker", { key: "go:3" });
    await leader.whenIdle();
    const newer = createRegistry({
      tasks: [taker],
      signals: [
        defineSignal({ key: "go:*", schema: z.object({ step: z.number(), note: z.string().default("") }) }),
      ],
    });
    const follower = await openSession({ id: "newer", storage, registry: newer, mode: "read" });
    const watch = new SessionWatch(tab(follower, true), relay());
    const answered = watch.signal("go:3", { step: 3 }, { requestId: "r3" }, queued("row-3"));
    // The leader (the older version) stores the payload as it reads it: without the newer field.
    await leader.signal("go:3", { step: 3 }, { requestId: "r3" });
    await leader.waitForTask(task.id);
    await follower.refresh();
    watch.notify();
    expect(await answered).toMatchObject({ duplicate: false, signal: { payload: { step: 3 } } });
    await follower.close();
    await leader.close();
  });
});
