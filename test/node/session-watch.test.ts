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
