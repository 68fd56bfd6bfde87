/**
 * The devtools' local source over the session's own channel: a linked session whose copy was rebuilt from
 * the edge (`replaced`) makes the page attach again, rather than stack the rebuilt history on the one it
 * holds; an ordinary commit is adopted in place.
 */
import "fake-indexeddb/auto";
import { expect, it } from "vitest";
import { createRegistry, indexedDbStorage, openSession } from "../../src/index.ts";
import { localSource } from "../../web/devtools/sources.ts";

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
