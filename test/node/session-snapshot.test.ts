/**
 * A long-lived session moved whole (`exportSession` / `importSession`) at the sizes users reach: a
 * conversation of 20,000 entries and 2,000 finished Submissions, from the edge's kind of store (memory here)
 * into a browser's (IndexedDB), its change log long pruned. The copy reads the same, and the snapshot is
 * about the size of the rows it moves (nothing repeated, no history).
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import {
  createRegistry,
  DuplicateKeyError,
  exportSession,
  InvalidArgumentError,
  importSession,
  indexedDbStorage,
  memoryStorage,
  openSession,
  sequentialIds,
} from "../../src/index.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";

const registry = createRegistry({});

describe("a long-lived session moved whole", () => {
  it("moves 20,000 entries and 2,000 finished Submissions: the copy reads the same, the snapshot is its rows' size", async () => {
    const edge = memoryStorage({ retainChanges: 100 });
    const session = await openSession({ id: "long", storage: edge, registry, ids: sequentialIds(1) });
    for (let s = 0; s < 2_000; s++) {
      const submission = await session.submit({ requestId: `r${s}`, conversationId: "side", input: `q${s}` });
      await session.cancelSubmission(submission.id, "answered elsewhere");
    }
    for (let batch = 0; batch < 200; batch++)
      await commitAsKernel(session, (d) => {
        for (let i = 0; i < 100; i++)
          d.appendEntry("main", { kind: "note", text: `entry ${batch * 100 + i}` });
      });
    expect((await edge.readChanges("long", 0, 1)).oldestRetained).toBeGreaterThan(1_000);

    const snapshot = await exportSession(edge, "long");
    const text = JSON.stringify(snapshot);
    const raw = await edge.exportRaw("long");
    const rowsText = JSON.stringify(raw?.rows);
    // The rows, once, and the head commit: no change log, nothing repeated.
    expect(text.length).toBeLessThan(rowsText.length * 1.05 + JSON.stringify(snapshot?.head).length + 1_000);

    const browser = indexedDbStorage("snapshot-size");
    await importSession(browser, "long", JSON.parse(text));
    const [copy, original] = await Promise.all([
      openSession({ id: "long", storage: browser, registry, mode: "read" }),
      openSession({ id: "long", storage: edge, registry, mode: "read" }),
    ]);
    expect(copy.view()).toEqual(original.view());
    const all = async (storage: typeof edge | typeof browser) =>
      (await storage.readEntries("long", "main", 0, 20_000)).map((row) => row.value);
    const entries = await all(browser);
    expect(entries).toHaveLength(20_000);
    expect(entries).toEqual(await all(edge));
    expect((await browser.readRequest("long", "r1999"))?.value).toEqual(
      (await edge.readRequest("long", "r1999"))?.value,
    );
    const settled = await browser.readSettled("long", 5_000);
    expect(settled.count).toBe(2_000);
    await Promise.all([copy.close(), original.close(), session.close()]);
    await browser.close();
  }, 120_000);

  it("moves a session no writer opened since an older format: the copy gets the index rows it lacked", async () => {
    const storage = memoryStorage();
    const session = await openSession({ id: "old", storage, registry });
    for (let s = 0; s < 5; s++) {
      const sub = await session.submit({ requestId: `r${s}`, conversationId: "main", input: `q${s}` });
      await session.cancelSubmission(sub.id, "no");
    }
    await session.close();
    // As format 2 stored it: no `settled` index.
    const { items } = await storage.readItems("old", Number.MAX_SAFE_INTEGER, 1_000);
    for (const item of items) storage.unsafeDeleteRaw("old", "settled", [item.version, item.id]);
    const raw = await storage.exportRaw("old");
    storage.unsafeWriteRaw("old", "sessions", [], { ...(raw?.meta as object), format: 2 });
    const original = await openSession({ id: "old", storage, registry, mode: "read", retainSettled: 3 });
    expect(original.view().submissions).toHaveLength(3);

    const copyDisk = memoryStorage();
    await importSession(copyDisk, "old", JSON.parse(JSON.stringify(await exportSession(storage, "old"))));
    const copy = await openSession({
      id: "old",
      storage: copyDisk,
      registry,
      mode: "read",
      retainSettled: 3,
    });
    expect(copy.view().submissions.map((s) => s.id)).toEqual(original.view().submissions.map((s) => s.id));
    expect((await copyDisk.readSettled("old", 10)).count).toBe(5);
    await Promise.all([copy.close(), original.close()]);
  });

  it("refuses a malformed snapshot by field, before anything is written or deleted", async () => {
    const storage = memoryStorage();
    const session = await openSession({ id: "good", storage, registry });
    await session.submit({ requestId: "r1", conversationId: "main", input: "hello" });
    const snapshot = JSON.parse(JSON.stringify(await exportSession(storage, "good")));
    const target = memoryStorage();
    const refused = async (bad: unknown) => {
      const error = await importSession(target, "copy", bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect(await target.exportRaw("copy")).toBeUndefined();
      return (error as InvalidArgumentError).issues.map((issue) => issue.path);
    };
    expect(await refused({ ...snapshot, format: 2 })).toEqual(["format"]);
    expect(await refused({ ...snapshot, rows: [{ table: "nonsense", key: ["x"], value: 1 }] })).toEqual([
      "rows.0.table",
    ]);
    expect(await refused({ ...snapshot, meta: { ...snapshot.meta, createdAt: "yesterday" } })).toEqual([
      "meta.createdAt",
    ]);
    expect(await refused({ ...snapshot, head: { ...snapshot.head, version: 7 } })).toEqual(["head.version"]);
    expect((await refused({ ...snapshot, head: { ...snapshot.head, tasks: "none" } }))[0]).toBe("head.tasks");
    // A store that holds the session refuses to take it again, and keeps what it has.
    await importSession(target, "copy", snapshot);
    await expect(importSession(target, "copy", snapshot)).rejects.toBeInstanceOf(DuplicateKeyError);
    expect((await target.readRequest("copy", "r1"))?.value).toBeDefined();
    await session.close();
  });
});
