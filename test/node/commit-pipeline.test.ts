import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitRecord,
  createRegistry,
  defineDocument,
  InvalidArgumentError,
  indexedDbStorage,
  type Json,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  ReadOnlyError,
  RecordTooLargeError,
  SessionStoppedError,
  sequentialIds,
  ValidationError,
} from "../../src/index.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";
import { logRowValue } from "../../src/storage/log-head.ts";
import type { RowWrite } from "../../src/storage/rows.ts";
import { created, demoTask } from "../support/storage-contract.ts";
import { deferred, SpyStorage } from "../support/storage-wrappers.ts";
import { rng } from "../support/task-simulation.ts";

// Progress: deferred commits may write it (they may write nothing else).
const counter = defineDocument({
  type: "counter",
  schema: z.object({ n: z.number().int().nonnegative() }),
  progress: true,
});
const draftText = defineDocument({
  type: "draft-text",
  schema: z.object({ text: z.string() }),
  progress: true,
});
const registry = createRegistry({ documents: [counter, draftText] });

async function setup() {
  const disk = memoryStorage();
  const storage = new SpyStorage(disk);
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const session = await openSession({
    id: "s",
    storage,
    registry,
    clock,
    timers,
    ids: sequentialIds(),
    deferredFlushMs: 100,
  });
  return { disk, storage, clock, timers, session };
}

const note = (text: string) => ({ kind: "note" as const, text });

describe("commit pipeline", () => {
  it("groups commits requested in the same tick into one transaction, keeping each its own version", async () => {
    const { storage, session } = await setup();
    const results = await Promise.all(
      ["a", "b", "c"].map((t) => session.commit((d) => d.appendEntry("main", note(t)))),
    );
    expect(results.map((r) => r.version)).toEqual([1, 2, 3]);
    expect(storage.groups.map((g) => g.map((c) => c.version))).toEqual([[1, 2, 3]]);
    expect(session.view().conversations[0]?.entries.map((e) => e.seq)).toEqual([0, 1, 2]);
  });

  it("lets a later draft in a group see the earlier drafts' changes", async () => {
    const { session } = await setup();
    await Promise.all([
      session.commit((d) => d.setDocument("c", "counter", { n: 1 })),
      session.commit((d) => d.patchDocument("c", [{ op: "replace", path: "/n", value: 2 }])),
    ]);
    expect(session.view().documents[0]).toMatchObject({ version: 2, value: { n: 2 } });
  });

  it("makes committed records immutable: in views, in stored commits and as later drafts of a group read them", async () => {
    const { storage, session } = await setup();
    const value = { n: 1 };
    let editInLaterDraft: unknown;
    await Promise.all([
      session.commit((d) => {
        d.setDocument("c", "counter", value);
        d.appendEntry("main", note("first"));
      }),
      session.commit((d) => {
        try {
          Object.assign(d.conversation("main") as object, { entryCount: 99 });
        } catch (error) {
          editInLaterDraft = error;
        }
        d.appendEntry("main", note("second"));
      }),
    ]);
    expect(storage.groups).toHaveLength(1); // the second draft read the first one inside the same group
    expect(editInLaterDraft).toBeInstanceOf(TypeError);
    const view = session.view();
    const entries = view.conversations[0]?.entries ?? [];
    expect(() => Object.assign(entries[0] as object, { seq: 7 })).toThrow(TypeError);
    const stored = storage.groups[0]?.[0];
    expect(() => stored?.entries.push(stored.entries[0] as never)).toThrow(TypeError);
    expect(() => Object.assign(stored?.documents[0]?.patch ?? {}, { 0: null })).toThrow(TypeError);
    expect(() => {
      (view.documents[0]?.value as { n: number }).n = 5;
    }).toThrow(TypeError);
    expect(session.view().documents[0]?.value).toEqual({ n: 1 });
  });

  it("never shows a change to views or subscribers before storage confirms it", async () => {
    const { storage, session } = await setup();
    const seen: number[] = [];
    session.subscribe(0, (c) => seen.push(c.version));
    const gate = deferred();
    storage.gate = gate.promise;
    const pending = session.commit((d) => d.appendEntry("main", note("slow disk")));
    await new Promise((resolve) => setImmediate(resolve));
    expect(session.view().version).toBe(0);
    expect(session.view().conversations).toEqual([]);
    expect(seen).toEqual([]);
    gate.resolve();
    await pending;
    expect(session.view().version).toBe(1);
    expect(seen).toEqual([1]);
  });

  it("discards only the draft whose build throws; the rest of the group commits", async () => {
    const { storage, session } = await setup();
    const [ok1, bad, ok2] = await Promise.allSettled([
      session.commit((d) => d.appendEntry("main", note("one"))),
      session.commit((d) => {
        d.appendEntry("main", note("half-built"));
        throw new Error("tool pre-check failed");
      }),
      session.commit((d) => d.appendEntry("main", note("two"))),
    ]);
    expect(ok1.status).toBe("fulfilled");
    expect(bad).toMatchObject({ status: "rejected", reason: { message: "tool pre-check failed" } });
    expect(ok2.status).toBe("fulfilled");
    expect(storage.groups).toHaveLength(1);
    expect(session.view().conversations[0]?.entries.map((e) => e.content)).toEqual([
      note("one"),
      note("two"),
    ]);
    expect(session.status).toBe("open");
  });

  it("rejects a document that breaks its schema with a ValidationError naming the field, writing nothing", async () => {
    const { storage, session } = await setup();
    const error = await session
      .commit((d) => d.setDocument("c", "counter", { n: -1 }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).record).toBe("documents/c");
    expect((error as ValidationError).issues[0]?.path).toBe("n");
    expect(storage.groups).toHaveLength(0);
    expect(session.status).toBe("open");
  });

  it("names the entry whose content is invalid, and commits the rest of its group", async () => {
    const { storage, session } = await setup();
    const [bad, good] = await Promise.allSettled([
      session.commit((d) => d.appendEntry("main", { kind: "note", text: 5 } as never)),
      session.commit((d) => d.appendEntry("other", note("fine"))),
    ]);
    const error = bad.status === "rejected" ? bad.reason : undefined;
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).record).toBe("entries/main/0");
    expect((error as ValidationError).message).toContain("content.text");
    expect(good.status).toBe("fulfilled");
    expect(storage.groups.flat().map((c) => c.entries.map((e) => e.conversationId))).toEqual([["other"]]);
  });

  it("refuses only the commit with a row too large for the store; the rest of its group commits and the session goes on", async () => {
    // The limit a Durable Object's SQLite has (about 2 MB a row), scaled down; counted in UTF-8 bytes as
    // stored: 4,000 "漢" are 4,000 UTF-16 units but 12,000 bytes.
    const disk = memoryStorage({ maxRowBytes: 10_000 });
    const storage = new SpyStorage(disk);
    const session = await openSession({ id: "s", storage, registry, ids: sequentialIds() });
    const [first, huge, last] = await Promise.allSettled([
      session.commit((d) => d.appendEntry("main", note("before"))),
      session.commit((d) => d.appendEntry("main", note("漢".repeat(4_000)))),
      session.commit((d) => d.appendEntry("main", note("after"))),
    ]);
    const error = huge.status === "rejected" ? huge.reason : undefined;
    expect(error).toBeInstanceOf(RecordTooLargeError);
    expect(error).toMatchObject({
      code: "record-too-large",
      record: "entries/main/1",
      limit: 10_000,
      version: 2,
    });
    expect((error as RecordTooLargeError).bytes).toBeGreaterThan(12_000);
    expect(first.status).toBe("fulfilled");
    expect(last.status).toBe("fulfilled");
    // The group was refused as a whole (nothing of it written), then the other two were rebuilt and saved.
    expect(storage.groups.flat().map((c) => c.entries.map((e) => e.content))).toEqual([
      [note("before")],
      [note("after")],
    ]);
    expect(session.status).toBe("open");
    await session.commit((d) => d.appendEntry("main", note("later")));
    const reopened = await openSession({ id: "s", storage: disk, registry, ids: sequentialIds() });
    expect(reopened.view().conversations[0]?.entries.map((e) => e.content)).toEqual([
      note("before"),
      note("after"),
      note("later"),
    ]);
  });

  it("packs a group's entries into rows each within the store's row limit, and reads them back whole", async () => {
    const rows: RowWrite[] = [];
    const disk = memoryStorage({ maxRowBytes: 2_000, onWrite: (row) => void rows.push(row) });
    const session = await openSession({ id: "s", storage: disk, registry, ids: sequentialIds() });
    const texts = Array.from({ length: 10 }, (_, i) => `${i}`.repeat(560));
    await session.commit((d) => {
      for (const text of texts) d.appendEntry("main", note(text));
    });
    const entryRows = rows.filter((row) => row.table === "entries");
    const sizes = entryRows.map((row) => new TextEncoder().encode(JSON.stringify(row.value)).length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(2_000);
    expect(entryRows.length).toBeLessThan(texts.length); // some rows hold several entries
    const reopened = await openSession({ id: "s", storage: disk, registry, ids: sequentialIds() });
    expect(reopened.view().conversations[0]?.entries.map((e) => e.content)).toEqual(texts.map(note));
  });

  it("refuses a commit that grows a record past the row limit even though the log holds only its changes", async () => {
    // The log writes the task's second version as what changed (about 6 KB), but its own row, written when
    // the log's tail is, would hold all of it (about 12 KB): refused now, not at a later, unrelated commit.
    const disk = memoryStorage({ maxRowBytes: 10_000 });
    const session = await openSession({
      id: "s",
      storage: disk,
      registry,
      ids: sequentialIds(),
    });
    const big = "x".repeat(6_000);
    const task = (data: Json) => ({
      ...demoTask("t1"),
      input: { big },
      checkpoint: { phase: "start", data },
    });
    await commitAsKernel(session, (d) => d.writeTask(created(d, task(null))));
    await expect(
      commitAsKernel(session, (d) => d.writeTask(created(d, task({ more: big })))),
    ).rejects.toMatchObject({
      code: "record-too-large",
      record: "tasks/t1",
      version: 2,
    });
    expect(session.status).toBe("open");
    // Past the tail's length (64 commits): every later commit is written, and the session reopens.
    for (let i = 0; i < 70; i++) await session.commit((d) => d.appendEntry("main", note(`n${i}`)));
    await session.close();
    const reopened = await openSession({
      id: "s",
      storage: disk,
      registry,
      ids: sequentialIds(),
    });
    expect(reopened.version).toBe(71);
    expect(reopened.view().tasks[0]?.checkpoint.data).toBeNull();
  });

  it("in seeded random groups, refuses exactly the too-large commits and saves everything else in order", async () => {
    for (let seed = 1; seed <= 200; seed++) {
      const random = rng(seed);
      const disk = memoryStorage({ maxRowBytes: 2_000 });
      const session = await openSession({ id: "s", storage: disk, registry, ids: sequentialIds() });
      const expected: string[] = [];
      const expectedProgress: string[] = [];
      for (let round = 0; round < 4; round++) {
        // One tick's requests: deferred ones merge into one commit (flushed first), critical ones each get theirs.
        const requests = Array.from({ length: 1 + random.int(5) }, (_, i) => ({
          text: `${seed}/${round}/${i}`.padEnd(random.chance(0.3) ? 3_000 : 10, "."),
          deferred: i > 0 && random.chance(0.3),
        }));
        const results = await Promise.allSettled(
          requests.map(({ text, deferred }, i) =>
            deferred
              ? session.commit((d) => d.setDocument(`p${round}/${i}`, "draft-text", { text }), { deferred })
              : session.commit((d) => d.appendEntry("main", note(text))),
          ),
        );
        const deferredTexts = requests.filter((r) => r.deferred).map((r) => r.text);
        const deferredFits = deferredTexts.every((text) => text.length < 1_000);
        requests.forEach((request, i) => {
          const fits = request.deferred ? deferredFits : request.text.length < 1_000;
          const label = `seed ${seed} round ${round} request ${i}`;
          expect(results[i]?.status, label).toBe(fits ? "fulfilled" : "rejected");
          if (!fits)
            expect((results[i] as PromiseRejectedResult).reason, label).toBeInstanceOf(RecordTooLargeError);
        });
        if (deferredFits) expectedProgress.push(...deferredTexts);
        expected.push(...requests.filter((r) => !r.deferred && r.text.length < 1_000).map((r) => r.text));
      }
      expect(session.status).toBe("open");
      const reopened = await openSession({ id: "s", storage: disk, registry, ids: sequentialIds() });
      const stored = reopened
        .view()
        .conversations[0]?.entries.map((e) => (e.content as { text: string }).text);
      expect(stored ?? [], `seed ${seed}`).toEqual(expected);
      const progress = reopened.view().documents.map((d) => (d.value as { text: string }).text);
      expect(progress.sort(), `seed ${seed}`).toEqual(expectedProgress.sort());
    }
  });

  it("batches deferred progress into one commit, flushed by its timer", async () => {
    const { storage, timers, session } = await setup();
    await session.commit((d) => d.setDocument("c", "counter", { n: 0 }));
    const progress = [1, 2, 3, 4, 5].map((n) =>
      session.commit((d) => d.setDocument("c", "counter", { n }), { deferred: true }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(storage.groups).toHaveLength(1);
    timers.advance(100);
    const results = await Promise.all(progress);
    expect(results.map((r) => r.version)).toEqual([2, 2, 2, 2, 2]);
    expect(storage.groups).toHaveLength(2);
    expect(storage.groups[1]?.[0]).toMatchObject({ deferred: true, version: 2 });
    expect(session.view().documents[0]?.value).toEqual({ n: 5 });
  });

  it("flushes pending deferred progress before, and together with, a critical commit", async () => {
    const { storage, timers, session } = await setup();
    const streamed = session.commit((d) => d.setDocument("c", "counter", { n: 7 }), { deferred: true });
    const critical = await session.commit((d) => d.appendEntry("main", note("model response")));
    expect((await streamed).version).toBe(1);
    expect(critical.version).toBe(2);
    expect(storage.groups.map((g) => g.map((c) => [c.version, c.deferred]))).toEqual([
      [
        [1, true],
        [2, false],
      ],
    ]);
    expect(timers.size).toBe(0);
  });

  it("stops the session on a storage failure; queued work fails and reopening shows what was saved", async () => {
    const { disk, storage, session } = await setup();
    await session.commit((d) => d.appendEntry("main", note("saved")));
    const errors: Error[] = [];
    session.subscribe(session.version, () => undefined, { onError: (e) => errors.push(e) });
    storage.failNext = new Error("EIO");
    const failing = session.commit((d) => d.appendEntry("main", note("lost")));
    await expect(failing).rejects.toMatchObject({ name: "StorageError", code: "storage-failed" });
    await expect(session.commit((d) => d.appendEntry("main", note("after")))).rejects.toBeInstanceOf(
      SessionStoppedError,
    );
    expect(session.status).toBe("stopped");
    expect(errors[0]).toBeInstanceOf(SessionStoppedError);
    const reopened = await openSession({ id: "s", storage: disk, registry });
    expect(reopened.view().conversations[0]?.entries.map((e) => e.content)).toEqual([note("saved")]);
  });

  it("surfaces an IndexedDB quota error as a typed StorageError and keeps what was committed", async () => {
    let quotaHit = false;
    const storage = indexedDbStorage("quota", {
      onWrite: () => {
        if (quotaHit) throw new DOMException("The quota has been exceeded.", "QuotaExceededError");
      },
    });
    const session = await openSession({ id: "q", storage, registry });
    await session.submit({ requestId: "r1", conversationId: "main", input: "kept" });
    quotaHit = true;
    await expect(
      session.submit({ requestId: "r2", conversationId: "main", input: "too big" }),
    ).rejects.toMatchObject({
      name: "StorageError",
      code: "quota-exceeded",
    });
    expect(session.status).toBe("stopped");
    quotaHit = false;
    const reopened = await openSession({ id: "q", storage: indexedDbStorage("quota"), registry });
    expect(reopened.view().submissions.map((s) => s.requestId)).toEqual(["r1"]);
  });

  it("rejects malformed submissions with an InvalidArgumentError naming each field", async () => {
    const { session } = await setup();
    const error = await session
      .submit({ requestId: "", conversationId: "main", input: 42 } as never)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).issues.map((i) => i.path).sort()).toEqual(["input", "requestId"]);
    expect(session.version).toBe(0);
  });

  it("refuses writes through a read-only session", async () => {
    const { disk } = await setup();
    const reader = await openSession({ id: "s", storage: disk, mode: "read" });
    await expect(reader.commit((d) => d.appendEntry("main", note("x")))).rejects.toBeInstanceOf(
      ReadOnlyError,
    );
    await expect(
      reader.submit({ requestId: "r", conversationId: "main", input: "x" }),
    ).rejects.toBeInstanceOf(ReadOnlyError);
  });

  it("keeps delivering to other subscribers when one listener throws", async () => {
    const { session } = await setup();
    const good: CommitRecord[] = [];
    const errors: Error[] = [];
    session.subscribe(
      0,
      () => {
        throw new Error("render bug");
      },
      { onError: (e) => errors.push(e) },
    );
    session.subscribe(0, (c) => good.push(c));
    await session.commit((d) => d.appendEntry("main", note("x")));
    expect(good.map((c) => c.version)).toEqual([1]);
    expect(errors.map((e) => e.message)).toEqual(["render bug"]);
  });

  it("commits pending deferred changes on close and keeps them", async () => {
    const { disk, session } = await setup();
    void session
      .commit((d) => d.setDocument("c", "counter", { n: 3 }), { deferred: true })
      .catch(() => undefined);
    await session.close();
    expect(session.status).toBe("closed");
    const reopened = await openSession({ id: "s", storage: disk, registry });
    expect(reopened.view().documents[0]?.value).toEqual({ n: 3 });
  });
});

describe("IndexedDB connection lifecycle", () => {
  it("steps aside when another connection upgrades the database, stopping the session cleanly", async () => {
    const session = await openSession({ id: "vc", storage: indexedDbStorage("versionchange"), registry });
    await session.submit({ requestId: "r1", conversationId: "main", input: "kept" });
    // Another tab ships a newer schema: it must not be blocked by our open connection.
    const upgraded = await new Promise<IDBDatabase>((resolve, reject) => {
      const request = indexedDB.open("versionchange", 6); // one above the kernel's own schema version
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
      request.onblocked = () => reject(new Error("upgrade blocked by the kernel's connection"));
    });
    await expect(
      session.submit({ requestId: "r2", conversationId: "main", input: "late" }),
    ).rejects.toMatchObject({
      name: "StorageError",
      code: "storage-closed",
    });
    expect(session.status).toBe("stopped");
    // What was committed before is kept: a commit's records are first stored in its change-log row.
    const tx = upgraded.transaction("changes", "readonly");
    const logged = await new Promise<unknown[]>((resolve) => {
      const request = tx.objectStore("changes").getAll();
      request.onsuccess = () => resolve(request.result);
    });
    const requests = logged
      .map((row) => logRowValue(row) as { submissions?: { requestId: string }[] })
      .flatMap((commit) => commit.submissions?.map((s) => s.requestId) ?? []);
    expect(requests).toEqual(["r1"]);
    upgraded.close();
  });
});
