/**
 * The durable inbox's drain (worker/inbox-relay.ts) against a requestId whose Submission retention removed:
 * refused for good, as a leader's own submit is, never retried ahead of the rows queued after it.
 */
import "fake-indexeddb/auto";
import { expect, it } from "vitest";
import {
  createAgent,
  createRegistry,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { InboxRelay } from "../../worker/inbox-relay.ts";

const model = scriptedModel([() => ({ text: "ok" })]);
const registry = () => createRegistry({ ...createAgent({ model, tools: [] }) });

it("refuses a queued row whose Submission retention removed, and takes the rows after it", async () => {
  const clock = new ManualClock(0);
  const s = await openSession({
    id: "long",
    storage: memoryStorage(),
    registry: registry(),
    clock,
    timers: new ManualTimers(clock),
    ids: sequentialIds(),
    retainSettled: 0,
    retention: { auto: false, keepSettled: 0 },
  });
  await s.resume();
  const sub = await s.submit({ requestId: "r0", conversationId: "c", input: "hi" });
  await s.wait(sub.id);
  clock.advance(10);
  const { removed } = await s.collect();
  expect(removed.map((r) => r.id)).toEqual([sub.id]);
  const posted: unknown[] = [];
  const relay = new InboxRelay("long", `db-${Math.random()}`, (m) => posted.push(m));
  // as onRebased would queue them: the removed Submission's input, then one typed offline
  await relay.queue({ requestId: "r0", conversationId: "c", input: "hi" });
  await relay.queue({ requestId: "r1", conversationId: "c", input: "typed offline" });
  // One drain: the removed requestId is refused for good (its callers told), the input after it is taken.
  await relay.drain(() => s);
  expect((await s.readSubmissionForRequest("r1"))?.requestId).toBe("r1"); // (retainSettled: 0 — read it back)
  expect(posted).toContainEqual(expect.objectContaining({ type: "refused", row: "r0" }));
  await s.close();
});
