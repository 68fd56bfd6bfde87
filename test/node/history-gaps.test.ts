/**
 * Gaps in the change log (DESIGN §9: the log is bounded, pruned as a session lives on): whoever follows a
 * session's changes and falls behind its pruning is told so with `HistoryTruncatedError`, never left with a
 * copy that silently stops where the log was cut.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createRegistry,
  defineTask,
  HistoryTruncatedError,
  memoryStorage,
  openSession,
} from "../../src/index.ts";

const noop = defineTask({
  kind: "noop",
  version: 1,
  input: z.object({}),
  phases: { go: (ctx) => ctx.complete(null) },
});
const registry = createRegistry({ tasks: [noop] });

describe("a read-only copy that lags behind the change log's pruning", () => {
  it("is told with HistoryTruncatedError (refresh and its subscribers), and a reopened copy shows the writer's version", async () => {
    const storage = memoryStorage({ retainChanges: 100 });
    const writer = await openSession({ id: "s", storage, registry });
    await writer.resume();
    await writer.spawn("noop", {});
    await writer.whenIdle();
    const reader = await openSession({ id: "s", storage, registry, mode: "read" });
    const lagged = reader.version;
    const heard: Error[] = [];
    reader.subscribe(lagged, () => undefined, { onError: (error) => heard.push(error) });
    // A tab frozen in the background meanwhile: the writer commits past the log's count bound.
    for (let i = 0; i < 300; i++) await writer.spawn("noop", {});
    await writer.whenIdle();
    expect((await writer.readChanges(0, 1)).oldestRetained).toBeGreaterThan(lagged + 1);

    const refreshed = reader.refresh();
    await expect(refreshed).rejects.toBeInstanceOf(HistoryTruncatedError);
    await expect(refreshed).rejects.toMatchObject({ requestedAfter: lagged });
    expect(heard).toHaveLength(1);
    expect(heard[0]).toBeInstanceOf(HistoryTruncatedError);

    const reopened = await openSession({ id: "s", storage, registry, mode: "read" });
    expect(reopened.version).toBe(writer.version);
    expect(reopened.view()).toEqual(writer.view());
    await reopened.close();
    await reader.close();
    await writer.close();
  });

  it("still adopts every change when the log holds them", async () => {
    const storage = memoryStorage({ retainChanges: 100 });
    const writer = await openSession({ id: "s", storage, registry });
    await writer.resume();
    const reader = await openSession({ id: "s", storage, registry, mode: "read" });
    const seen: number[] = [];
    reader.subscribe(reader.version, (change) => seen.push(change.version));
    for (let i = 0; i < 40; i++) await writer.spawn("noop", {});
    await writer.whenIdle();
    expect(await reader.refresh()).toBe(writer.version);
    expect(seen).toEqual(Array.from({ length: writer.version }, (_, i) => i + 1));
    expect(reader.view()).toEqual(writer.view());
    await reader.close();
    await writer.close();
  });
});
