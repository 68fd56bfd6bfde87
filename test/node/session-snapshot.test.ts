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
  followRemote,
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
    // Rows a store would file where no read finds them, or that one store takes last and another refuses.
    type Row = { table: string; key: unknown[]; value?: unknown };
    const rows = snapshot.rows as Row[];
    const at = (table: string) => rows.findIndex((row) => row.table === table);
    const withRow = (i: number, row: Row) => ({ ...snapshot, rows: rows.map((r, n) => (n === i ? row : r)) });
    const entry = at("entries");
    const submission = at("submissions");
    const keyed = (i: number, key: unknown[]) => withRow(i, { ...(rows[i] as Row), key });
    expect(await refused(keyed(entry, ["main", "0"]))).toEqual([`rows.${entry}.key`]);
    expect(await refused(keyed(entry, ["main"]))).toEqual([`rows.${entry}.key`]);
    expect(await refused(keyed(submission, [1]))).toEqual([`rows.${submission}.key`]);
    const { value: _, ...valueless } = rows[submission] as Row;
    expect(await refused(withRow(submission, valueless))).toEqual([`rows.${submission}.value`]);
    const twice = {
      ...snapshot,
      rows: [...rows, { ...(rows[submission] as Row), value: { changed: true } }],
    };
    expect(await refused(twice)).toEqual([`rows.${rows.length}.key`]);
    // A session id no session row can hold (half of an emoji), or none: refused by name, nothing written.
    for (const id of ["copy\ud800", ""]) {
      const error = await importSession(target, id, snapshot).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).issues.map((issue) => issue.path)).toEqual(["sessionId"]);
      expect(await target.exportRaw(id)).toBeUndefined();
    }
    // A store that holds the session refuses to take it again, and keeps what it has.
    await importSession(target, "copy", snapshot);
    await expect(importSession(target, "copy", snapshot)).rejects.toBeInstanceOf(DuplicateKeyError);
    expect((await target.readRequest("copy", "r1"))?.value).toBeDefined();
    await session.close();
  });
});

describe("a snapshot holding one key twice", () => {
  it("is refused alike by every store, and stops a follower at once instead of being fetched every tick", async () => {
    const storage = memoryStorage();
    const session = await openSession({ id: "s", storage, registry });
    await session.submit({ requestId: "r1", conversationId: "main", input: "hello" });
    await session.close();
    const snapshot = JSON.parse(JSON.stringify(await exportSession(storage, "s")));
    const twice = { ...snapshot, rows: [...snapshot.rows, snapshot.rows[0]] };
    for (const target of [memoryStorage(), indexedDbStorage(`twice-${Math.random()}`)]) {
      await expect(importSession(target, "s", twice)).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(await target.exportRaw?.("s")).toBeUndefined();
    }
    let downloads = 0;
    const remote = {
      changes: async () => ({ changes: [snapshot.head], oldestRetained: snapshot.head.version + 1 }),
      snapshot: async () => {
        downloads++;
        return twice;
      },
    };
    const follower = await followRemote({ storage: memoryStorage(), remote, id: "s", everyMs: 0 });
    const error = await follower.pull().catch((e: unknown) => e);
    await follower.stop();
    // A refusal (typed), which stops following; a StorageError would be fetched again every tick.
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(downloads).toBe(1);
  });
});
