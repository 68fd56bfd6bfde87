/**
 * The devtools' local source over the session's own channel: a linked session whose copy was rebuilt from
 * the edge (`replaced`) makes the page attach again, rather than stack the rebuilt history on the one it
 * holds; an ordinary commit is adopted in place.
 */
import "fake-indexeddb/auto";
import { expect, it } from "vitest";
import { z } from "zod";
import {
  createRegistry,
  defineSignal,
  defineTask,
  indexedDbStorage,
  type Json,
  openSession,
} from "../../src/index.ts";
import { localSource } from "../../web/devtools/sources.ts";
import { InboxRelay } from "../../worker/inbox-relay.ts";

it("asks the page to attach again when the stored session was replaced, and adopts commits otherwise", async () => {
  const database = `devtools-source-${Math.random().toString(36).slice(2)}`;
  const writer = await openSession({
    id: "s",
    storage: indexedDbStorage(database),
    registry: createRegistry({}),
  });
  await writer.commit((d) => d.appendEntry("main", { kind: "note", text: "one" }));
  const source = await localSource(database, "s");
  const adopted: number[] = [];
  let replaced = 0;
  const errors: Error[] = [];
  const stop = source.follow(
    (changes) => adopted.push(...changes.map((c) => c.version)),
    (error) => errors.push(error),
    undefined,
    () => replaced++,
  );
  const tabs = new BroadcastChannel(`durable-agent:${database}:s`);
  await writer.commit((d) => d.appendEntry("main", { kind: "note", text: "two" }));
  tabs.postMessage({ type: "committed", version: 2 });
  for (let i = 0; i < 200 && !adopted.includes(2); i++) await new Promise((r) => setImmediate(r));
  expect(adopted).toContain(2);
  expect(replaced).toBe(0);
  tabs.postMessage({ type: "replaced" });
  for (let i = 0; i < 200 && replaced === 0; i++) await new Promise((r) => setImmediate(r));
  expect(replaced).toBe(1);
  expect(errors).toEqual([]);
  stop();
  tabs.close();
  await source.close();
  await writer.close();
});

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

/** A leading tab over `database`: it drains the inbox when told, and announces its commits. */
async function leadingTab(database: string) {
  const writer = await openSession({ id: "s", storage: indexedDbStorage(database), registry });
  await writer.resume();
  const tabs = new BroadcastChannel(`durable-agent:${database}:s`);
  const relay = new InboxRelay("s", database, (message) => tabs.postMessage(message));
  tabs.onmessage = (event: MessageEvent<{ type: string }>) => {
    if (event.data.type === "inbox")
      void relay
        .drain(() => writer)
        .then(() => tabs.postMessage({ type: "committed", version: writer.version }));
  };
  return {
    writer,
    async close() {
      tabs.close();
      await relay.close();
      await writer.close();
    },
  };
}

it("says an answer or a drop was written only once the leading tab took it, and says why when it did not", async () => {
  const database = `devtools-writes-${Math.random().toString(36).slice(2)}`;
  const tab = await leadingTab(database);
  const { writer } = tab;
  await writer.spawn("taker", { key: "go:1" });
  await writer.signal("go:2", { step: 2 }, { requestId: "early" }); // kept: no wait on it yet
  await writer.spawn("taker", { key: "go:3" });
  await writer.whenIdle();
  const source = await localSource(database, "s", registry);
  // Meanwhile, before the devtools' copy saw it: another tab answers go:1, and a wait takes go:2.
  await writer.signal("go:1", { step: 1 }, { requestId: "other-tab" });
  await writer.spawn("taker", { key: "go:2" });
  await writer.whenIdle();
  const { answerWait, dropEarlySignal } = source as Required<typeof source>;
  const answered = answerWait("go:1", { step: 9 }, "devtools-1").then(
    () => "written",
    (error: unknown) => error,
  );
  const dropped = dropEarlySignal("go:2").then(
    () => "written",
    (error: unknown) => error,
  );
  const stop = source.follow(
    () => undefined,
    () => undefined,
  );
  // The leader refused the answer (another was taken), and had no early signal left to drop.
  expect(await answered).toMatchObject({ name: "SignalRefusedError", code: "signal-conflict", key: "go:1" });
  expect(await dropped).toBeInstanceOf(Error);
  expect(await writer.readSignal("go:1")).toMatchObject({ requestId: "other-tab" });
  // An answer the leader takes is said written once it is: the wait took it.
  await answerWait("go:3", { step: 3 }, "devtools-3");
  expect(await writer.readSignal("go:3")).toMatchObject({
    requestId: "devtools-3",
    consumedBy: expect.any(String),
  });
  stop();
  await source.close();
  await tab.close();
});
