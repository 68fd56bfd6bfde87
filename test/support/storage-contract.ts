/**
 * The storage contract suite: one set of behaviours every store must show, run against each store
 * (in-memory, IndexedDB on fake-indexeddb, IndexedDB in real Chromium, Durable Object SQLite).
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  BlockedRecordError,
  type CommitRecord,
  CorruptRecordError,
  createRegistry,
  DuplicateKeyError,
  DuplicateRequestError,
  defineDocument,
  defineSignal,
  HistoryTruncatedError,
  type KeyPart,
  ManualClock,
  openSession,
  type Session,
  SessionNotFoundError,
  SessionStoppedError,
  type SessionView,
  StaleOwnerError,
  type Storage,
  type StorageOptions,
  type StoredItem,
  type Submission,
  sequentialIds,
  type Table,
  type WriteHook,
} from "../../src/index.ts";
import { isWellFormedText, STORAGE_FORMAT } from "../../src/records/schemas.ts";
import type { KernelDraft } from "../../src/session/draft.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";
import { PRUNE_EVERY } from "../../src/storage/change-log.ts";
import type { RowWrite } from "../../src/storage/rows.ts";
import { exportSession, importSession } from "../../src/storage/session-export.ts";
import { rng } from "./task-simulation.ts";

let opens = 0;

/** Pieces random strings are made of: the cases stores get wrong (NUL, astral, separators, combining). */
const PIECES = [
  "a",
  "Zürich",
  "\u0000",
  "😀",
  "𝌆",
  "\u2028",
  "\uffff",
  "e\u0301",
  "/",
  "%2e",
  " ",
  "\ufeff",
];
const LONE = ["\ud800", "\udc00", "\udbff"];

/**
 * A seeded random string of at most `max` UTF-16 units, cut between code points; one in twenty holds a lone
 * surrogate (half of them made by cutting a pair in two).
 */
function randomText(random: ReturnType<typeof rng>, max: number): string {
  let text = "";
  for (let n = 1 + random.int(8); n > 0; n--) text += PIECES[random.int(PIECES.length)];
  if (random.chance(0.1)) text = text.repeat(Math.ceil(max / Math.max(1, text.length)));
  let cut = Math.min(max, text.length);
  if (cut < text.length && /[\ud800-\udbff]/.test(text[cut - 1] ?? "")) cut--;
  text = text.slice(0, cut);
  if (!random.chance(1 / 20)) return text;
  return random.chance(0.5) ? `${text.slice(0, max - 1)}${LONE[random.int(LONE.length)]}` : "😀".slice(0, 1);
}

/** What the suite needs from a store under test. */
export interface StoreHarness {
  /** A store handle over the harness's data. Options apply to that handle. */
  storage(options?: StorageOptions & { onWrite?: WriteHook }): Storage;
  /** Writes a raw row, bypassing validation, to plant a corrupt record. */
  corrupt(
    sessionId: string,
    table: Table | "sessions",
    key: readonly KeyPart[],
    value: unknown,
  ): Promise<void>;
}

const plan = defineDocument({
  type: "plan",
  schema: z.object({ steps: z.array(z.string()), approved: z.boolean() }),
  baselineEvery: 4,
});
const noteBag = defineDocument({ type: "note-bag", schema: z.record(z.string(), z.unknown()) as never });
export const contractRegistry = createRegistry({
  documents: [plan, noteBag],
  signals: [defineSignal({ key: "k:*", schema: z.object({ n: z.number() }) })],
});

let sessionCounter = 0;
/** A fresh session id per test, so stores that persist across tests do not mix them. */
export const freshId = (label: string) => `${label}-${Date.now().toString(36)}-${sessionCounter++}`;

/** Opens a session with deterministic clock and ids. */
export function open(storage: Storage, id: string, mode: "write" | "read" = "write"): Promise<Session> {
  return openSession({
    id,
    storage,
    mode,
    registry: contractRegistry,
    clock: new ManualClock(1_000),
    // Every open numbers its records apart: a new writer must never reuse an id an earlier one stored.
    ids: sequentialIds(1_000 * ++opens),
    entryTail: 50,
  });
}

/** Opens a writer that parks every wait it can (`liveWaits` 0). */
function openParking(storage: Storage, id: string): Promise<Session> {
  return openSession({
    id,
    storage,
    registry: contractRegistry,
    clock: new ManualClock(1_000),
    ids: sequentialIds(1_000 * ++opens),
    liveWaits: 0,
  });
}

/** A task's state awaiting `key` (with a deadline at `at`, when given), as the kernel writes one. */
const awaiting = (key: string, at?: number) => ({
  status: "awaiting" as const,
  keys: [key],
  mode: "any" as const,
  thenPhase: "start",
  since: 1_000,
  ...(at !== undefined && { deadline: { at, phase: "start" } }),
});

/** A task the draft holds, by id. */
const taskIn = (d: KernelDraft, id: string) => d.task(id) as NonNullable<ReturnType<KernelDraft["task"]>>;

/** The ids of task rows. */
const idsOf = (rows: { value: unknown }[]) => rows.map((row) => (row.value as { id: string }).id);

/** The parts of a view that must survive a reopen (the epoch changes by design). */
export function durable(view: SessionView) {
  const { epoch: _epoch, ...rest } = view;
  return rest;
}

/** A task record as the kernel creates it: its `createdVersion` is the commit that first wrote it. */
export function created<T extends { id: string }>(d: KernelDraft, record: T): T & { createdVersion: number } {
  return { ...record, createdVersion: d.task(record.id)?.createdVersion ?? d.version };
}

/** A task record of kind `demo`, as the kernel-level tests write one. */
export function demoTask(id: string, phase = "start") {
  return {
    id,
    kind: "demo",
    kindVersion: 1,
    input: { n: 1 },
    state: { status: "pending" as const },
    checkpoint: { phase, data: null },
    attempts: 0,
    restarts: 0,
    createdAt: 1_000,
    updatedAt: 1_000,
  };
}

export function describeStorageContract(name: string, harness: StoreHarness): void {
  describe(`storage contract: ${name}`, () => {
    it("creates a session on first write-open and takes a new epoch on every write-open", async () => {
      const id = freshId("epoch");
      const first = await open(harness.storage(), id);
      expect([first.version, first.epoch]).toEqual([0, 1]);
      const second = await open(harness.storage(), id);
      expect(second.epoch).toBe(2);
      const reader = await open(harness.storage(), id, "read");
      expect(reader.epoch).toBe(2);
    });

    it("refuses a read-only open of a session that does not exist", async () => {
      await expect(open(harness.storage(), freshId("missing"), "read")).rejects.toBeInstanceOf(
        SessionNotFoundError,
      );
    });

    it("stores every kind of record and reopens to the same view", async () => {
      const id = freshId("roundtrip");
      const session = await open(harness.storage(), id);
      const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "send the notice" });
      await commitAsKernel(session, (d) => {
        d.setDocument("plan", "plan", { steps: ["a", "b"], approved: false });
        d.writeTask(created(d, { ...demoTask("t1"), submissionId: sub.id }));
        d.appendEntry("main", { kind: "note", text: "planned" }, { taskId: "t1" });
      });
      await session.commit((d) =>
        d.patchDocument("plan", [{ op: "replace", path: "/approved", value: true }]),
      );
      const reopened = await open(harness.storage(), id);
      expect(durable(reopened.view())).toEqual(durable(session.view()));
      expect(reopened.view().documents[0]?.value).toEqual({ steps: ["a", "b"], approved: true });
      expect(reopened.view().conversations[0]?.entries.map((e) => e.content.kind)).toEqual(["user", "note"]);
    });

    it("rebuilds documents from a baseline plus deltas; a baseline deletes the rows before it", async () => {
      const id = freshId("docs");
      const session = await open(harness.storage(), id);
      const steps = Array.from({ length: 40 }, (_, k) => `step number ${k} of the approved plan`);
      const stored = async () =>
        (await harness.storage().readDocumentRows(id, "plan", 1, 11)).map(
          (r) => `${r.key.split("/").at(-1)}${"baseline" in (r.value as object) ? "B" : "d"}`,
        );
      for (let i = 0; i < 11; i++) {
        await session.commit((d) =>
          d.setDocument("plan", "plan", { steps: steps.slice(0, 30 + i), approved: i % 2 === 0 }),
        );
        // "plan" stores a baseline every 4 versions while its deltas stay small next to the value.
        if (i === 7) expect(await stored()).toEqual(["5B", "6d", "7d", "8d"]);
      }
      const reopened = await open(harness.storage(), id);
      const doc = reopened.view().documents[0];
      expect(doc?.version).toBe(11);
      expect(doc?.value).toEqual({ steps: steps.slice(0, 40), approved: true });
      expect(await stored()).toEqual(["9B", "10d", "11d"]);
      // Its history is still in the change log.
      const { changes } = await harness.storage().readChanges(id, 0, 100);
      expect(changes.flatMap((c) => (c.value as CommitRecord).documents.map((d) => d.version))).toEqual(
        Array.from({ length: 11 }, (_, k) => k + 1),
      );
    });

    it("keeps a document deleted and created again in one commit group, and writes what the group leaves", async () => {
      const id = freshId("recreate");
      const session = await open(harness.storage(), id);
      await session.commit((d) => d.setDocument("plan", "plan", { steps: ["old"], approved: false }));
      // Requested in the same tick: one transaction. The second commit starts the document anew.
      const deleted = session.commit((d) => d.deleteDocument("plan"));
      const recreated = session.commit((d) =>
        d.setDocument("plan", "plan", { steps: ["new"], approved: true }),
      );
      const touched = [1, 2, 3].map((n) =>
        session.commit((d) => d.appendEntry("main", { kind: "note", text: `note ${n}` })),
      );
      await Promise.all([deleted, recreated, ...touched]);
      const reopened = await open(harness.storage(), id);
      expect(reopened.view().documents.map((doc) => [doc.id, doc.value])).toEqual([
        ["plan", { steps: ["new"], approved: true }],
      ]);
      expect(durable(reopened.view())).toEqual(durable(session.view()));
      // The conversation record was written once for the group, and holds the last commit's count.
      expect(reopened.view().conversations[0]?.entryCount).toBe(3);
    });

    it("stores a baseline early once the deltas since the last one outweigh the value", async () => {
      const id = freshId("docs-small");
      const session = await open(harness.storage(), id);
      const steps = ["alpha-step-one", "beta-step-two", "gamma-step-three", "delta-step-four"];
      // Each version flips one flag: a 51-character delta against a 97-character value, so every second
      // delta would outweigh the value and a baseline is stored instead (the count rule alone says every 4).
      for (let i = 0; i < 6; i++) {
        await session.commit((d) => d.setDocument("plan", "plan", { steps, approved: i % 2 === 0 }));
      }
      const { changes } = await harness.storage().readChanges(id, 0, 100);
      const kinds = changes.map((c) => ((c.value as CommitRecord).documents[0]?.baseline ? "B" : "d"));
      expect(kinds.join("")).toBe("BdBdBd");
      const rows = await harness.storage().readDocumentRows(id, "plan", 1, 6);
      expect(rows.map((r) => r.key)).toEqual(["documentRows/plan/5", "documentRows/plan/6"]);
      expect((await open(harness.storage(), id)).view().documents[0]?.value).toEqual({
        steps,
        approved: false,
      });
    });

    it("keeps the latest entries in memory and reads older ones by range", async () => {
      const id = freshId("entries");
      const session = await open(harness.storage(), id);
      for (let i = 0; i < 120; i++)
        await session.commit((d) => d.appendEntry("main", { kind: "note", text: `n${i}` }));
      const reopened = await open(harness.storage(), id);
      const conversation = reopened.view().conversations[0];
      expect(conversation?.entryCount).toBe(120);
      expect(conversation?.entries.map((e) => e.seq)).toEqual(Array.from({ length: 50 }, (_, i) => 70 + i));
      const older = await reopened.readEntries("main", 10, 13);
      expect(older.map((e) => e.content)).toEqual([10, 11, 12].map((i) => ({ kind: "note", text: `n${i}` })));
    });

    it("writes a group's consecutive entries of a conversation as one row, and reads any range as entries", async () => {
      const id = freshId("runs");
      const writes: RowWrite[] = [];
      const session = await open(harness.storage({ onWrite: (row) => void writes.push(row) }), id);
      const note = (i: number) => ({ kind: "note" as const, text: `n${i}` });
      let n = 0;
      await session.commit((d) => d.appendEntry("main", note(n++)));
      await session.commit((d) => {
        for (let i = 0; i < 20; i++) d.appendEntry("main", note(n++));
        for (let i = 0; i < 2; i++) d.appendEntry("side", note(n++));
        for (let i = 0; i < 20; i++) d.appendEntry("main", note(n++));
      });
      // Three commits of one group (queued in one tick): their entries are consecutive, so one row.
      await Promise.all([0, 1, 2].map(() => session.commit((d) => d.appendEntry("main", note(n++)))));
      const runs = writes
        .filter((row) => row.table === "entries")
        .map((row) => `${row.key.join("/")}×${Array.isArray(row.value) ? row.value.length : 1}`);
      expect(runs).toEqual([
        "main/0×1",
        "main/1×16",
        "main/17×4",
        "side/0×2",
        "main/21×16",
        "main/37×4",
        "main/41×3",
      ]);
      const texts = (entries: readonly { content: unknown }[]) =>
        entries.map((e) => (e.content as { text: string }).text);
      const main = session.view().conversations.find((c) => c.id === "main")?.entries ?? [];
      expect(main.map((e) => e.seq)).toEqual(Array.from({ length: 44 }, (_, i) => i));
      const other = await open(harness.storage(), id, "read");
      for (const from of [0, 1, 2, 15, 16, 17, 20, 21, 30, 36, 37, 40, 41, 43])
        for (const to of [from + 1, from + 3, from + 17, 44]) {
          const expected = main.filter((e) => e.seq >= from && e.seq < to);
          expect(texts(await other.readEntries("main", from, to))).toEqual(texts(expected));
        }
      expect(texts(await other.readEntries("side", 0, 2))).toEqual(["n21", "n22"]);
      // A reopen loads the latest entries the same, runs and single rows alike.
      const reopened = await open(harness.storage(), id);
      expect(durable(reopened.view())).toEqual(durable(session.view()));
      // The change log names its entries, and is served with them whole.
      const { changes } = await harness.storage().readChanges(id, 0, 10);
      expect(changes.map((c) => (c.value as { entries: unknown[] }).entries.length)).toEqual([
        1, 42, 1, 1, 1,
      ]);
    });

    it("rejects a stale writer with StaleOwnerError and shows nothing it sent", async () => {
      const id = freshId("stale");
      const old = await open(harness.storage(), id);
      await old.commit((d) => d.appendEntry("main", { kind: "note", text: "before takeover" }));
      const current = await open(harness.storage(), id);
      await expect(
        old.commit((d) => d.appendEntry("main", { kind: "note", text: "from the stale tab" })),
      ).rejects.toBeInstanceOf(StaleOwnerError);
      expect(old.status).toBe("stopped");
      await expect(
        old.submit({ requestId: "x", conversationId: "main", input: "late" }),
      ).rejects.toBeInstanceOf(SessionStoppedError);
      await current.commit((d) => d.appendEntry("main", { kind: "note", text: "from the leader" }));
      const texts = (await open(harness.storage(), id, "read"))
        .view()
        .conversations[0]?.entries.map((e) => (e.content.kind === "note" ? e.content.text : ""));
      expect(texts).toEqual(["before takeover", "from the leader"]);
    });

    it("checks the expected version inside the transaction", async () => {
      const id = freshId("version");
      const session = await open(harness.storage(), id);
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "one" }));
      const commit: CommitRecord = {
        version: 1,
        epoch: session.epoch,
        at: 1,
        deferred: false,
        conversations: [],
        entries: [],
        documents: [],
        tasks: [demoTask("ghost")],
        submissions: [],
      };
      await expect(
        harness.storage().commit({ sessionId: id, epoch: session.epoch, expectedVersion: 0 }, [commit]),
      ).rejects.toBeInstanceOf(StaleOwnerError);
      expect((await open(harness.storage(), id, "read")).view().tasks).toEqual([]);
    });

    it("refuses a commit that creates an entry whose key exists (one statement at the edge), and stores nothing of it", async () => {
      const id = freshId("create-only");
      const store = harness.storage();
      const session = await open(store, id);
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "one" }));
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "two" }));
      const [first] = (await store.readChanges(id, 0, 10)).changes.map((c) => c.value as CommitRecord);
      const entry = first?.entries[0] as CommitRecord["entries"][number];
      expect(entry.seq).toBe(0);
      // The next version accepts a Submission (its new requestId's row is created first) and writes entry 0
      // again (a create-only row), with a task: refused whole, the requestId's row included.
      const accepted: Submission = {
        id: "sub-new",
        requestId: "r-new",
        conversationId: "main",
        status: "accepted",
        input: "hello",
        entrySeq: 2,
        acceptedVersion: 3,
        acceptedAt: 3,
        updatedAt: 3,
      };
      const again: CommitRecord = {
        version: 3,
        epoch: session.epoch,
        at: 3,
        deferred: false,
        conversations: first?.conversations ?? [],
        entries: [{ ...entry, content: { kind: "note", text: "again" } }],
        documents: [],
        tasks: [demoTask("with-it")],
        submissions: [accepted],
      };
      await expect(
        store.commit({ sessionId: id, epoch: session.epoch, expectedVersion: 2 }, [again]),
      ).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store.readRequest(id, "r-new")).toBeUndefined();
      const reread = await open(harness.storage(), id, "read");
      expect(reread.version).toBe(2);
      expect(reread.view().tasks).toEqual([]);
      expect(reread.view().submissions).toEqual([]);
      const texts = reread
        .view()
        .conversations[0]?.entries.map((e) => (e.content.kind === "note" ? e.content.text : ""));
      expect(texts).toEqual(["one", "two"]);
    });

    it("writes nothing of a commit group whose transaction fails midway, and stops the session", async () => {
      const id = freshId("abort");
      const session = await open(harness.storage(), id);
      await session.submit({ requestId: "r1", conversationId: "main", input: "first" });
      const confirmed = durable(session.view());
      let armed = true;
      const faulty = harness.storage({
        // The group writes the requestId's index row, its entry, then its change-log row: it fails midway.
        onWrite: (_row, index) => {
          if (armed && index === 1) throw new Error("disk unplugged");
        },
      });
      const writer = await open(faulty, id);
      const expected = durable(writer.view());
      const a = writer.submit({ requestId: "r2", conversationId: "main", input: "second" });
      const b = commitAsKernel(writer, (d) => d.writeTask(created(d, demoTask("t9"))));
      await expect(a).rejects.toMatchObject({ name: "StorageError" });
      await expect(b).rejects.toMatchObject({ name: "StorageError" });
      armed = false;
      expect(writer.status).toBe("stopped");
      expect(writer.view().version).toBe(expected.version);
      const reopened = await open(harness.storage(), id);
      expect(durable(reopened.view())).toEqual({ ...confirmed });
    });

    it("returns the original submission for a repeated requestId, also after reopening", async () => {
      const id = freshId("idem");
      const session = await open(harness.storage(), id);
      const [a, b] = await Promise.all([
        session.submit({ requestId: "same", conversationId: "main", input: "hi" }),
        session.submit({ requestId: "same", conversationId: "main", input: "hi" }),
      ]);
      expect(b).toEqual(a);
      const reopened = await open(harness.storage(), id);
      const c = await reopened.submit({ requestId: "same", conversationId: "main", input: "hi again" });
      expect(c).toEqual(a);
      expect(reopened.view().submissions).toHaveLength(1);
      expect(reopened.view().conversations[0]?.entryCount).toBe(1);
    });

    it("serves the change log after a version, and prunes it to the retention bound", async () => {
      const id = freshId("log");
      const storage = harness.storage({ retainChanges: 100 });
      const session = await openSession({ id, storage, registry: contractRegistry, ids: sequentialIds() });
      for (let i = 0; i < 300; i++)
        await session.commit((d) => d.appendEntry("main", { kind: "note", text: `${i}` }));
      const { changes, oldestRetained } = await session.readChanges(280, 10);
      expect(changes.map((c) => c.version)).toEqual([281, 282, 283, 284, 285, 286, 287, 288, 289, 290]);
      expect(oldestRetained).toBe(157); // pruned at version 256 through 156
      const errors: Error[] = [];
      session.subscribe(10, () => undefined, { onError: (e) => errors.push(e) });
      await expect.poll(() => errors.length).toBe(1);
      expect(errors[0]).toBeInstanceOf(HistoryTruncatedError);
    });

    it("serves the same commits in pages of any size, across group rows and blocks of the log", async () => {
      const id = freshId("pages");
      const storage = harness.storage();
      const session = await open(storage, id);
      // Groups of 1 to 300 commits (one transaction each; a store may split a large group's log into several
      // rows), each commit changing the conversation again.
      let n = 0;
      for (const size of [1, 300, 3, 70, 1, 40]) {
        await Promise.all(
          Array.from({ length: size }, () =>
            session.commit((d) => d.appendEntry("main", { kind: "note", text: `n${n++}` })),
          ),
        );
      }
      expect(session.version).toBe(415);
      const all = (await storage.readChanges(id, 0, 1_000)).changes.map((c) => c.value as CommitRecord);
      expect(all.map((c) => c.version)).toEqual(Array.from({ length: 415 }, (_, i) => i + 1));
      expect(all.map((c) => (c.entries[0]?.content as { text: string } | undefined)?.text)).toEqual(
        Array.from({ length: 415 }, (_, i) => `n${i}`),
      );
      for (const [after, limit] of [
        [0, 1],
        [5, 7],
        [63, 64],
        [100, 100],
        [130, 3],
        [200, 1_000],
        [264, 5],
        [300, 64],
        [410, 10],
      ] as const) {
        const page = await storage.readChanges(id, after, limit);
        const expected = all.slice(after, after + limit);
        expect(
          page.changes.map((c) => c.value),
          `after ${after}, limit ${limit}`,
        ).toEqual(expected);
      }
    });

    it("serves the oldest retained commits when a pruned block's last commits share a row with the next block", async () => {
      const id = freshId("span");
      const storage = harness.storage({ retainChanges: 192 });
      const session = await openSession({ id, storage, registry: contractRegistry, ids: sequentialIds() });
      const note = (text: string) => session.commit((d) => d.appendEntry("main", { kind: "note", text }));
      while (session.version < 49) await note(`n${session.version}`);
      await commitAsKernel(session, (d) => d.writeTask(created(d, demoTask("t1", "a")))); // v50: logged whole
      while (session.version < 59) await note(`n${session.version}`);
      // v60…v70 in one group: one row across the end of block 1…64, v60 logging t1 as changes to v50.
      await Promise.all([
        commitAsKernel(session, (d) => d.writeTask(created(d, demoTask("t1", "b")))),
        ...Array.from({ length: 10 }, (_, i) => note(`g${i}`)),
      ]);
      while (session.version < 300) await note(`n${session.version}`);
      // Pruned at 256 through 64: v50's row is gone, the row of v60…v70 stays for v65…v70.
      const first = await storage.readChanges(id, 0, 5);
      expect(first.oldestRetained).toBe(65);
      const versions = (page: { changes: readonly { value: unknown }[] }) =>
        page.changes.map((c) => (c.value as CommitRecord).version);
      expect(versions(first)).toEqual([65, 66, 67, 68, 69]);
      const all = await session.readChanges(64, 1_000);
      expect(all.changes.map((c) => c.version)).toEqual(Array.from({ length: 236 }, (_, i) => 65 + i));
      expect(versions(await storage.readChanges(id, 69, 2))).toEqual([70, 71]);
    });

    it("bounds the change log by bytes as well: the oldest rows go once the log passes the limit", async () => {
      const id = freshId("log-bytes");
      // What each change-log row took, as the store wrote it (one commit a row here).
      const logged = new Map<number, number>();
      const storage = harness.storage({
        retainChangeBytes: 100_000,
        onWrite: (row) => {
          if (row.table === "changes") logged.set(row.key[0] as number, JSON.stringify(row.value).length);
        },
      });
      const session = await openSession({ id, storage, registry: contractRegistry, ids: sequentialIds() });
      // Each commit changes a document by about a kilobyte (its change is in the log; entries are in rows
      // of their own, which the log only names).
      const big = (i: number) => ({ text: `${i} ${"x".repeat(1_000)}` });
      for (let i = 0; i < 600; i++) await session.commit((d) => d.setDocument("bag", "note-bag", big(i)));
      const { changes, oldestRetained } = await storage.readChanges(id, 0, 1_000);
      const versions = changes.map((c) => (c.value as CommitRecord).version);
      expect(versions).toEqual(Array.from({ length: 601 - oldestRetained }, (_, i) => oldestRetained + i));
      // At the last pruning boundary (version 512) what stayed fit the limit, and about one row more would not.
      const kept = versions
        .filter((version) => version <= 512)
        .reduce((sum, version) => sum + (logged.get(version) ?? Number.NaN), 0);
      expect(kept).toBeLessThanOrEqual(100_000);
      expect(kept).toBeGreaterThan(100_000 - 1_300);
      // Every row is still whole: a reader folds the retained tail into the same document versions.
      const tail = await session.readChanges(oldestRetained - 1, 1_000);
      expect(tail.changes.flatMap((c) => c.documents.map((doc) => doc.version))).toEqual(
        Array.from({ length: 601 - oldestRetained }, (_, i) => oldestRetained + i),
      );
      const errors: Error[] = [];
      session.subscribe(1, () => undefined, { onError: (e) => errors.push(e) });
      await expect.poll(() => errors.length).toBe(1);
      expect(errors[0]).toBeInstanceOf(HistoryTruncatedError);
      // A floor (a linked session's unacknowledged commits) is never pruned, whatever the bounds say.
      const floored = freshId("log-floor");
      const linked = await openSession({
        id: floored,
        storage,
        registry: contractRegistry,
        ids: sequentialIds(),
        changeLogFloor: () => 40,
      });
      for (let i = 0; i < 300; i++) await linked.commit((d) => d.setDocument("bag", "note-bag", big(i)));
      expect((await storage.readChanges(floored, 0, 1)).oldestRetained).toBe(41); // the bound wanted more
    });

    it("delivers exactly the missing changes to a subscriber that reconnects from an old version", async () => {
      const id = freshId("reconnect");
      const session = await open(harness.storage(), id);
      for (let i = 1; i <= 5; i++)
        await session.commit((d) => d.appendEntry("main", { kind: "note", text: `${i}` }));
      const seen: number[] = [];
      session.subscribe(2, (change) => seen.push(change.version));
      // Commits made while the subscriber is still catching up must neither be lost nor repeated.
      const live = [6, 7].map((i) =>
        session.commit((d) => d.appendEntry("main", { kind: "note", text: `${i}` })),
      );
      await Promise.all(live);
      await expect.poll(() => seen.length).toBe(5);
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "8" }));
      expect(seen).toEqual([3, 4, 5, 6, 7, 8]);
    });

    it("loads around corrupt records, naming each and blocking what it belongs to", async () => {
      const id = freshId("corrupt");
      const session = await open(harness.storage(), id);
      await session.submit({ requestId: "r1", conversationId: "main", input: "keep me" });
      await session.submit({ requestId: "r2", conversationId: "side", input: "and me" });
      await commitAsKernel(session, (d) => {
        d.writeTask(created(d, demoTask("good")));
        d.writeTask(created(d, demoTask("bad")));
        d.setDocument("plan", "plan", { steps: [], approved: false });
      });
      // Closing writes every record into its own row (until then the change log holds them): those rows
      // are what gets corrupted.
      await session.close();
      await harness.corrupt(id, "tasks", ["bad"], { id: "bad", kind: 42 });
      await harness.corrupt(id, "entries", ["side", 0], { nonsense: true });
      await harness.corrupt(id, "documentRows", ["plan", 1], { version: 1, baseline: { steps: "nope" } });
      const reopened = await open(harness.storage(), id);
      const view = reopened.view();
      expect(view.blocked.map((b) => [b.kind, b.id, b.record])).toEqual([
        ["document", "plan", "documents/plan"],
        ["conversation", "side", "entries/side/0"],
        ["task", "bad", "tasks/bad"],
      ]);
      expect(view.blocked.every((b) => b.reason.length > 0)).toBe(true);
      expect(view.tasks.map((t) => t.id)).toEqual(["good"]);
      expect(view.submissions.map((s) => s.requestId)).toEqual(["r1", "r2"]);
      expect(view.conversations.find((c) => c.id === "main")?.entries).toHaveLength(1);
      await expect(
        commitAsKernel(reopened, (d) => d.writeTask(created(d, demoTask("bad")))),
      ).rejects.toBeInstanceOf(BlockedRecordError);
      expect(reopened.status).toBe("open");
      await commitAsKernel(reopened, (d) => d.writeTask(created(d, demoTask("new"))));
      expect(reopened.view().tasks.map((t) => t.id)).toEqual(["good", "new"]);
    });

    it("refuses to open a session whose own row is corrupt, naming it", async () => {
      const id = freshId("corrupt-meta");
      await open(harness.storage(), id);
      await harness.corrupt(id, "sessions", [id], { id, version: "seven" });
      await expect(open(harness.storage(), id, "read")).rejects.toSatisfy(
        (e: unknown) => e instanceof CorruptRecordError && e.record === `sessions/${id}`,
      );
    });

    it("refuses a session a newer version stored in a newer format: neither takes it over nor reads it", async () => {
      const id = freshId("newer-format");
      const writer = await open(harness.storage(), id);
      await writer.commit((d) => d.appendEntry("main", { kind: "note", text: "kept" }));
      await writer.close();
      const read = () => harness.storage().open(id, { mode: "read", at: 0, entryTail: 0, settled: 0 });
      const newer = { ...((await read())?.meta.value as object), format: STORAGE_FORMAT + 1 };
      await harness.corrupt(id, "sessions", [id], newer);
      const refused = { code: "environment-mismatch", name: "EnvironmentError" };
      await expect(open(harness.storage(), id)).rejects.toMatchObject(refused);
      await expect(open(harness.storage(), id, "read")).rejects.toMatchObject(refused);
      // A tab that already follows the session finds out at its next read of the change log.
      await expect(harness.storage().readChanges(id, 0, 10)).rejects.toMatchObject(refused);
      // Nothing was written: the row is as the newer version left it, its epoch not taken.
      expect((await read())?.meta.value).toEqual(newer);
    });

    it("reads back every well-formed string exactly as written, and refuses malformed ones by field", async () => {
      const id = freshId("unicode");
      const session = await open(harness.storage(), id);
      const random = rng(7);
      const written: { conversation: string; request: string; text: string; doc: string; key: string }[] = [];
      for (let i = 0; i < 40; i++) {
        const text = randomText(random, 3_000);
        const conversation = randomText(random, 200) || "c";
        const key = randomText(random, 50) || "k";
        const request = `r${i}-${randomText(random, 40)}`;
        const doc = `d${i}-${randomText(random, 40)}`;
        const outcome = async (wellFormed: boolean, write: () => Promise<unknown>, what: string) => {
          const before = session.version;
          const error = await write().then(
            () => undefined,
            (e: unknown) => e,
          );
          if (wellFormed) {
            expect(error, `case ${i} ${what}`).toBeUndefined();
            return true;
          }
          expect((error as { code?: string }).code, `case ${i} ${what}`).toMatch(
            /^invalid-(argument|record)$/,
          );
          expect(String((error as Error).message), `case ${i} ${what}`).toContain("well-formed");
          expect(session.version, `case ${i} ${what}: a refused write stores nothing`).toBe(before);
          return false;
        };
        const submitted = await outcome(
          [text, conversation, request].every(isWellFormedText),
          () => session.submit({ requestId: request, conversationId: conversation, input: text }),
          "submit",
        );
        const committed = await outcome(
          [text, conversation, key, doc].every(isWellFormedText),
          () =>
            session.commit((d) => {
              d.setDocument(doc, "note-bag", { [key]: text, list: [text, conversation] });
              d.appendEntry(conversation, { kind: "note", text });
            }),
          "commit",
        );
        if (submitted && committed) written.push({ conversation, request, text, doc, key });
      }
      expect(written.length).toBeGreaterThan(10);
      const reopened = await open(harness.storage(), id);
      const view = reopened.view();
      for (const w of written) {
        expect(view.conversations.some((c) => c.id === w.conversation)).toBe(true);
        expect(view.documents.find((d) => d.id === w.doc)?.value).toEqual({
          [w.key]: w.text,
          list: [w.text, w.conversation],
        });
        expect(reopened.submissionForRequest(w.request)?.input).toBe(w.text);
        const stored = await reopened.readEntries(w.conversation, 0);
        expect(stored.map((e) => (e.content as { text: string }).text)).toContain(w.text);
      }
    });

    it("refuses a session id that is not well-formed before anything is stored", async () => {
      for (const lone of ["\ud800", "\udc00"]) {
        const id = `${freshId("lone")}${lone}`;
        const store = harness.storage();
        const error = await open(store, id).catch((e: unknown) => e);
        expect(error).toMatchObject({ code: "invalid-argument", issues: [{ path: "id" }] });
        expect(String((error as Error).message)).toContain("well-formed");
        expect(await store.open(id, { mode: "read", at: 0, entryTail: 1, settled: 0 })).toBeUndefined();
      }
    });

    it("lets a read-only session follow another writer's commits", async () => {
      const id = freshId("follow");
      const writer = await open(harness.storage(), id);
      const reader = await open(harness.storage(), id, "read");
      const seen: number[] = [];
      reader.subscribe(reader.version, (c) => seen.push(c.version));
      await writer.submit({ requestId: "r", conversationId: "main", input: "hello" });
      await writer.commit((d) => d.setDocument("plan", "plan", { steps: ["x"], approved: true }));
      expect(await reader.refresh()).toBe(2);
      expect(seen).toEqual([1, 2]);
      expect(durable(reader.view())).toEqual(durable(writer.view()));
    });

    it("holds a replica of another session: same rows from its commits, fenced by the owner's epoch", async () => {
      const source = freshId("replica-source");
      const replica = freshId("replica");
      const store = harness.storage();
      const writer = await open(store, source);
      await writer.submit({ requestId: "r1", conversationId: "main", input: "send the notice" });
      await writer.commit((d) => d.setDocument("plan", "plan", { steps: ["a"], approved: false }));
      const logOf = async (after: number) =>
        (await store.readChanges(source, after, 100)).changes.map((c) => c.value as CommitRecord);
      // A host reads another's head without its entries (the claim and the link do).
      const head = await store.open(source, { mode: "read", at: 1_000, entryTail: 0, settled: 0 });
      expect(head?.meta.value).toMatchObject({ version: 2 });
      expect(head?.entries).toEqual([]);
      // The replica is created at the owner's epoch and takes its commits as they are.
      const request = { mode: "write" as const, at: 1_000, entryTail: 50, settled: 20 };
      await store.open(replica, { ...request, epoch: writer.epoch });
      await store.commit({ sessionId: replica, epoch: 1, expectedVersion: 0, replica: true }, await logOf(0));
      const copy = await open(store, replica, "read");
      const { id: _a, ...mine } = durable(copy.view());
      const { id: _b, ...theirs } = durable(writer.view());
      expect(mine).toEqual(theirs);
      // A new owner (epoch 2) goes on; the replica follows it and then refuses the old one.
      const next = await open(store, source);
      await next.commit((d) => d.patchDocument("plan", [{ op: "replace", path: "/approved", value: true }]));
      await store.commit({ sessionId: replica, epoch: 2, expectedVersion: 2, replica: true }, await logOf(2));
      const late = { ...(await logOf(2))[0], version: 4, epoch: 1 } as CommitRecord;
      await expect(
        store.commit({ sessionId: replica, epoch: 1, expectedVersion: 3, replica: true }, [late]),
      ).rejects.toBeInstanceOf(StaleOwnerError);
      const followed = await open(store, replica, "read");
      expect([followed.version, followed.epoch]).toEqual([3, 2]);
      expect(followed.view().documents[0]?.value).toEqual({ steps: ["a"], approved: true });
      // Ownership at a granted epoch: refused at or below the stored one, and it fences the replica's feed.
      await expect(store.open(replica, { ...request, epoch: 2 })).rejects.toBeInstanceOf(StaleOwnerError);
      const owner = await openSession({ id: replica, storage: store, registry: contractRegistry, epoch: 7 });
      expect([owner.epoch, owner.version]).toEqual([7, 3]);
      await expect(
        store.commit({ sessionId: replica, epoch: 2, expectedVersion: 3, replica: true }, [late]),
      ).rejects.toBeInstanceOf(StaleOwnerError);
      await owner.commit((d) => d.setDocument("plan", "plan", { steps: ["b"], approved: true }));
      expect((await open(store, replica, "read")).view().documents[0]?.value).toEqual({
        steps: ["b"],
        approved: true,
      });
    });

    it("lists finished items oldest first, and removes one item's every row for retention", async () => {
      const store = harness.storage();
      const id = freshId("retention");
      const session = await open(store, id);
      const done = { state: { status: "succeeded" as const, result: 1 } };
      await commitAsKernel(session, (d) => {
        d.writeTask(created(d, { ...demoTask("a"), ...done }));
        d.writeTask(created(d, { ...demoTask("a.0"), ...done, parentId: "a", childIndex: 0 }));
      });
      await commitAsKernel(session, (d) => d.writeTask(created(d, { ...demoTask("b"), ...done })));
      const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "hello" });
      await session.cancelSubmission(sub.id, "not needed");
      await commitAsKernel(session, (d) => d.writeTask(created(d, demoTask("open")))); // unfinished: never listed
      const before = await store.readSettled(id, 10);
      expect([before.items.map((i) => i.id), before.count]).toEqual([["a", "b", sub.id], 3]);
      expect((await store.readSettled(id, 2)).items.map((i) => i.id)).toEqual(["a", "b"]);
      const [a, , s] = before.items as StoredItem[];
      await commitAsKernel(session, (d) => {
        d.removeSettled({
          version: a?.version as number,
          id: "a",
          root: "a",
          tasks: [{ id: "a" }, { id: "a.0", parentId: "a", childIndex: 0 }],
        });
        d.removeSettled({ version: s?.version as number, id: sub.id, submission: sub.id, tasks: [] });
      });
      const after = await store.readSettled(id, 10);
      expect([after.items.map((i) => i.id), after.count]).toEqual([["b"], 1]);
      expect([await store.readTask(id, "a"), await store.readTask(id, "a.0")]).toEqual([
        undefined,
        undefined,
      ]);
      expect(await store.readTaskTree(id, "a")).toEqual([]);
      expect(await store.readSubmission(id, sub.id)).toBeUndefined();
      const { items } = await store.readItems(id, Number.MAX_SAFE_INTEGER, 10);
      expect(items.map((i) => i.id).sort()).toEqual(["b", "open"]);
      const reopened = await open(store, id);
      expect(
        reopened
          .view()
          .tasks.map((t) => t.id)
          .sort(),
      ).toEqual(["b", "open"]);
      expect(reopened.view().submissions).toEqual([]);
      // The requestId stays taken: a retry is refused, never accepted as new work.
      await expect(
        reopened.submit({ requestId: "r1", conversationId: "main", input: "hello" }),
      ).rejects.toBeInstanceOf(DuplicateRequestError);
      const { changes } = await store.readChanges(id, 0, 100);
      const last = changes.at(-1)?.value as CommitRecord | undefined;
      expect(last?.removed?.map((r) => r.id)).toEqual(["a", sub.id]);
    });

    it("loads hundreds of open task trees whole, each with its children in order, as one by one", async () => {
      const store = harness.storage();
      const id = freshId("many-trees");
      const session = await open(store, id);
      await commitAsKernel(session, (d) => {
        for (let i = 0; i < 300; i++) {
          d.writeTask(created(d, demoTask(`root-${i}`)));
          for (let c = 0; c < 2; c++)
            d.writeTask(created(d, { ...demoTask(`root-${i}.${c}`), parentId: `root-${i}`, childIndex: c }));
        }
      });
      const expected = session.view().tasks.map((t) => t.id);
      expect(expected).toHaveLength(900);
      const reopened = await open(store, id);
      expect(
        reopened
          .view()
          .tasks.map((t) => t.id)
          .sort(),
      ).toEqual([...expected].sort());
      const tree = (await store.readTaskTree(id, "root-7")).map((row) => (row.value as { id: string }).id);
      expect(tree).toEqual(["root-7", "root-7.0", "root-7.1"]);
    });

    it("keeps parked waits apart from live work: counted by the session row, found by key, page and deadline", async () => {
      const store = harness.storage();
      const id = freshId("parked");
      const session = await openParking(store, id);
      await commitAsKernel(session, (d) => {
        for (let i = 0; i < 5; i++) d.writeTask(created(d, demoTask(`w-${i}`)));
      });
      await commitAsKernel(session, (d) => {
        for (let i = 0; i < 5; i++)
          d.writeTask({ ...taskIn(d, `w-${i}`), state: awaiting(`k:${i}`, i % 2 ? 9_000 - i : undefined) });
      });
      const reader = await open(store, id, "read");
      expect(reader.view().tasks).toEqual([]);
      expect(reader.parkedInStorage).toBe(5);
      expect((await store.readWaiting(id, ["k:3", "k:none"])).map(idsOf)).toEqual([["w-3"], []]);
      const parked = await store.readParked(id, undefined, 10);
      expect(parked.map((i) => i.id)).toEqual(["w-4", "w-3", "w-2", "w-1", "w-0"]);
      // A page may end inside one version (all five were created by one commit): the next goes on below it.
      const [, second] = parked as [StoredItem, StoredItem];
      expect((await store.readParked(id, second, 2)).map((i) => i.id)).toEqual(["w-2", "w-1"]);
      expect((await store.readDeadlines(id, 10)).map((row) => row.key)).toEqual([
        "deadlines/8997/w-3",
        "deadlines/8999/w-1",
      ]);
      // A wait that moves on is live again, and its index rows are gone.
      await commitAsKernel(session, (d) =>
        d.writeTask({ ...taskIn(d, "w-3"), state: { status: "running" } }),
      );
      const after = await open(store, id, "read");
      expect(after.parkedInStorage).toBe(4);
      expect(after.view().tasks.map((t) => t.id)).toEqual(["w-3"]);
      expect(await store.readWaiting(id, ["k:3"])).toEqual([[]]);
      expect((await store.readDeadlines(id, 10)).map((row) => row.key)).toEqual(["deadlines/8999/w-1"]);
      expect((await store.readParked(id, undefined, 10)).map((i) => i.id)).not.toContain("w-3");
    });

    it("reads a parked wait back with its whole tree in order, from the log's tail and from its rows", async () => {
      const store = harness.storage({ tailCommits: 1_000 });
      const id = freshId("parked-tree");
      const session = await openParking(store, id);
      // A tree parks only when nothing else of it is open: its children have ended.
      const child = (parent: string, index: number) => ({
        ...demoTask(`${parent}.${index}`),
        state: { status: "succeeded" as const, result: index },
        parentId: parent,
        childIndex: index,
      });
      await commitAsKernel(session, (d) => {
        for (const task of [demoTask("w"), child("w", 0), child("w", 1), child("w.1", 0), demoTask("v")])
          d.writeTask(created(d, task));
      });
      await commitAsKernel(session, (d) => {
        for (const [task, key] of [
          ["w", "k:w"],
          ["v", "k:v"],
        ] as const)
          d.writeTask({ ...taskIn(d, task), state: awaiting(key) });
      });
      const tree = ["w", "w.0", "w.1", "w.1.0"];
      // The tail holds the rows, then (the writer closed) the rows do; several keys are read in one read.
      expect((await store.readWaiting(id, ["k:w", "k:none", "k:v"])).map(idsOf)).toEqual([tree, [], ["v"]]);
      await session.close();
      expect((await store.readWaiting(id, ["k:w", "k:none", "k:v"])).map(idsOf)).toEqual([tree, [], ["v"]]);
      expect((await store.readWaiting(id, ["k:v", "k:w"])).map(idsOf)).toEqual([["v"], tree]);
    });

    it("deletes a dropped early signal's row with its commit: its key takes a new one, in the same group too", async () => {
      const store = harness.storage({ tailCommits: 4 });
      const id = freshId("dropped");
      const session = await open(store, id);
      const early = (d: KernelDraft, key: string, n: number) =>
        d.signalWrites.write({
          key,
          requestId: `r-${n}`,
          payload: { n },
          receivedAt: 1_000,
          version: d.version,
        });
      await commitAsKernel(session, (d) => {
        early(d, "k:a", 1);
        early(d, "k:b", 2);
        early(d, "k:c", 3);
      });
      // Dropped, then given a new signal: in one commit, and in two commits of one group.
      await commitAsKernel(session, (d) => {
        d.signalWrites.drop("k:a", d.version);
        early(d, "k:a", 4);
      });
      await Promise.all([
        commitAsKernel(session, (d) => d.signalWrites.drop("k:b", d.version)),
        commitAsKernel(session, (d) => early(d, "k:b", 5)),
      ]);
      await commitAsKernel(session, (d) => d.signalWrites.drop("k:c", d.version));
      // Read together, in one read: each key's row in the keys' order, none where none is stored.
      const payloads = async () => {
        const rows = await store.readSignals(id, ["k:c", "k:b", "k:none", "k:a"]);
        expect(rows).toHaveLength(4);
        expect(rows[2]).toBeUndefined();
        const [c, b, , a] = rows.map((row) => row?.value);
        return { a, b, c };
      };
      const expected = { a: { payload: { n: 4 } }, b: { payload: { n: 5 } }, c: undefined };
      expect(await payloads()).toMatchObject(expected);
      expect(session.earlySignals().map((s) => [s.key, s.payload])).toEqual([
        ["k:a", { n: 4 }],
        ["k:b", { n: 5 }],
      ]);
      // Past a materialized tail, reopened by a reader and by the next writer: the same.
      for (let i = 0; i < 4; i++)
        await commitAsKernel(session, (d) => d.appendEntry("c", { kind: "note", text: `${i}` }));
      expect(await payloads()).toMatchObject(expected);
      const reader = await open(store, id, "read");
      expect(reader.earlySignals().map((s) => s.key)).toEqual(["k:a", "k:b"]);
      const changes = (await store.readChanges(id, 0, 100)).changes.map((c) => c.value as CommitRecord);
      expect(
        changes.flatMap((c) => (c.droppedSignals ?? []).map((d) => [c.version, d.key, d.version])),
      ).toEqual([
        [2, "k:a", 1],
        [3, "k:b", 1],
        [5, "k:c", 1],
      ]);
      await session.close();
      const next = await open(store, id);
      expect(next.earlySignals().map((s) => s.key)).toEqual(["k:a", "k:b"]);
      await next.close();
    });

    it("refuses a taken requestId with the typed refusal at a pruning boundary too, and keeps the session usable", async () => {
      const store = harness.storage();
      const id = freshId("refuse-at-prune");
      const session = await open(store, id);
      const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "hello" });
      await session.cancelSubmission(sub.id, "not needed");
      const [item] = (await store.readSettled(id, 10)).items as StoredItem[];
      await commitAsKernel(session, (d) =>
        d.removeSettled({ version: item?.version as number, id: sub.id, submission: sub.id, tasks: [] }),
      );
      // The retry's commit is the one whose group also prunes the change log (every PRUNE_EVERY versions).
      while (session.version < PRUNE_EVERY - 1)
        await session.commit((d) =>
          d.setDocument("plan", "plan", { steps: [String(session.version)], approved: true }),
        );
      await expect(
        session.submit({ requestId: "r1", conversationId: "main", input: "hello" }),
      ).rejects.toBeInstanceOf(DuplicateRequestError);
      expect(session.status).toBe("open");
      await session.commit((d) => d.setDocument("plan", "plan", { steps: ["after"], approved: true }));
      expect(session.version).toBe(PRUNE_EVERY);
    });

    it("serves commits still only in the change log to every other handle, record by record, as a view", async () => {
      const id = freshId("tail");
      const writes: RowWrite[] = [];
      const writer = await open(
        harness.storage({ tailCommits: 1_000, onWrite: (row) => void writes.push(row) }),
        id,
      );
      const sub = await writer.submit({ requestId: "r1", conversationId: "main", input: "first" });
      await commitAsKernel(writer, (d) => {
        d.writeTask(created(d, { ...demoTask("root"), submissionId: sub.id }));
        d.setDocument("plan", "plan", { steps: ["a"], approved: false });
      });
      // Two commits in one group: one change-log row.
      await Promise.all([
        commitAsKernel(writer, (d) => {
          d.writeTask(created(d, { ...demoTask("root.0"), parentId: "root", childIndex: 0 }));
          d.appendEntry("main", { kind: "note", text: "child 0" }, { taskId: "root.0" });
        }),
        commitAsKernel(writer, (d) => {
          d.writeTask(created(d, { ...demoTask("root.1"), parentId: "root", childIndex: 1 }));
          d.patchDocument("plan", [{ op: "replace", path: "/approved", value: true }]);
        }),
      ]);
      await commitAsKernel(writer, (d) => {
        const done = d.task("root.0") as NonNullable<ReturnType<KernelDraft["task"]>>;
        d.writeTask({ ...done, state: { status: "succeeded", result: { ok: true } } });
      });
      expect(writer.version).toBe(5);
      // Nothing but the rows written with their commit (the requestId's, the entries) and change-log rows
      // was written: one log row per group.
      expect(writes.map((row) => `${row.table}/${row.key.join("/")}`)).toEqual([
        "requests/r1",
        "entries/main/0",
        "changes/1",
        "changes/2",
        "entries/main/1",
        "changes/4",
        "changes/5",
      ]);
      // Another handle (another tab, a restarted object) reads the same records from the log's tail.
      const other = harness.storage();
      const reader = await open(other, id, "read");
      expect(durable(reader.view())).toEqual(durable(writer.view()));
      const value = (row: { value: unknown } | undefined) => row?.value;
      expect(value(await other.readTask(id, "root.0"))).toEqual(
        writer.view().tasks.find((t) => t.id === "root.0"),
      );
      expect(value(await other.readSubmission(id, sub.id))).toEqual(writer.submission(sub.id));
      expect(value(await other.readRequest(id, "r1"))).toEqual(writer.submission(sub.id));
      expect((await other.readTaskTree(id, "root")).map((row) => (row.value as { id: string }).id)).toEqual([
        "root",
        "root.0",
        "root.1",
      ]);
      expect((await other.readEntries(id, "main", 0, 10)).map((row) => row.key)).toEqual([
        "entries/main/0",
        "entries/main/1",
      ]);
      const { changes } = await other.readChanges(id, 0, 10);
      expect(changes.map((c) => c.key)).toEqual([1, 2, 3, 4, 5].map((v) => `changes/${v}`));
      // A new writer writes them into rows when it opens, each record once, in its latest state; the view
      // is the same, and so is what the first handle reads now.
      const rows: RowWrite[] = [];
      const next = await open(harness.storage({ onWrite: (row) => void rows.push(row) }), id);
      expect(durable(next.view())).toEqual({ ...durable(writer.view()), version: 5 });
      const meta = await harness.storage().open(id, { mode: "read", at: 0, entryTail: 1, settled: 0 });
      expect(meta?.meta.value).toMatchObject({ format: STORAGE_FORMAT, version: 5, materialized: 5 });
      expect(value(await harness.storage().readTask(id, "root.0"))).toMatchObject({
        state: { status: "succeeded", result: { ok: true } },
      });
      expect((await harness.storage().readTaskTree(id, "root")).length).toBe(3);
      await next.submit({ requestId: "r2", conversationId: "main", input: "second" });
      await expect(
        writer.submit({ requestId: "r3", conversationId: "main", input: "stale" }),
      ).rejects.toBeInstanceOf(StaleOwnerError);
    });

    it("writes a tail's records once each when it is due, and reads the same before and after", async () => {
      const id = freshId("tail-due");
      const writes: RowWrite[] = [];
      const store = harness.storage({ tailCommits: 4, onWrite: (row) => void writes.push(row) });
      const session = await open(store, id);
      for (let i = 0; i < 3; i++) {
        await commitAsKernel(session, (d) => d.writeTask(created(d, demoTask(`t${i}`))));
        await commitAsKernel(session, (d) => {
          const t = d.task(`t${i}`) as NonNullable<ReturnType<KernelDraft["task"]>>;
          d.writeTask({ ...t, state: { status: "succeeded", result: i } });
        });
      }
      // Versions 1–4 were written as rows with the fourth commit, 5–6 stay in the log.
      const tasks = writes.filter((row) => row.table === "tasks");
      expect(
        tasks.map((row) => [row.key[0], (row.value as { state: { status: string } }).state.status]),
      ).toEqual([
        ["t0", "succeeded"],
        ["t1", "succeeded"],
      ]);
      const before = durable((await open(harness.storage(), id, "read")).view());
      await session.close(); // writes the rest
      expect(writes.filter((row) => row.table === "tasks").map((row) => row.key[0])).toEqual([
        "t0",
        "t1",
        "t2",
      ]);
      expect(durable((await open(harness.storage(), id, "read")).view())).toEqual(before);
    });

    it("refuses to open a session whose change-log row not yet in rows is corrupt, naming it, and writes nothing", async () => {
      const id = freshId("tail-corrupt");
      const logged = new Map<number, unknown>();
      const onWrite: WriteHook = (row) => {
        if (row.table === "changes") logged.set(row.key[0] as number, row.value);
      };
      const session = await open(harness.storage({ tailCommits: 1_000, onWrite }), id);
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "one" }));
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "two" }));
      await harness.corrupt(id, "changes", [2], { version: 2, nonsense: true });
      for (const mode of ["write", "read"] as const) {
        const error = await open(harness.storage(), id, mode).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(CorruptRecordError);
        expect(error).toMatchObject({ record: "changes/2" });
      }
      // Mended, the session is as it was: the failed writer's open took no epoch, the first writer still
      // owns it, and nothing of it was lost.
      await harness.corrupt(id, "changes", [2], logged.get(2));
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "three" }));
      const reopened = await open(harness.storage(), id, "read");
      expect(reopened.view().conversations[0]?.entries.map((e) => e.content)).toMatchObject([
        { text: "one" },
        { text: "two" },
        { text: "three" },
      ]);
    });

    it("deletes one session with every row of it, and leaves the others as they were", async () => {
      const store = harness.storage();
      const gone = freshId("deleted");
      const kept = freshId("kept");
      for (const id of [gone, kept]) {
        const session = await open(store, id);
        await session.submit({ requestId: "r1", conversationId: "main", input: "hello" });
        await session.commit((d) => d.setDocument("plan", "plan", { steps: ["a"], approved: true }));
      }
      const before = durable((await open(store, kept, "read")).view());
      expect(store.deleteSession).toBeDefined();
      await store.deleteSession?.(gone);
      await expect(open(store, gone, "read")).rejects.toBeInstanceOf(SessionNotFoundError);
      expect((await store.readChanges(gone, 0, 10)).changes).toEqual([]);
      expect(await store.readRequest(gone, "r1")).toBeUndefined();
      expect(durable((await open(store, kept, "read")).view())).toEqual(before);
      // The id can be used again from nothing.
      const fresh = await open(store, gone);
      expect([fresh.version, fresh.view().submissions]).toEqual([0, []]);
    });

    it("exports a session whole at its version and imports it as a copy that reads the same and goes on", async () => {
      const store = harness.storage({ tailCommits: 8 });
      const id = freshId("exported");
      const session = await openParking(store, id);
      const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "send the notice" });
      await session.submit({ requestId: "r2", conversationId: "main", input: "and then?" });
      await session.cancelSubmission(sub.id, "not needed");
      await commitAsKernel(session, (d) => {
        d.writeTask(created(d, demoTask("root")));
        for (let c = 0; c < 3; c++)
          d.writeTask(created(d, { ...demoTask(`root.${c}`), parentId: "root", childIndex: c }));
        for (let i = 0; i < 3; i++) d.writeTask(created(d, demoTask(`w-${i}`)));
      });
      await commitAsKernel(session, (d) => {
        for (let i = 0; i < 3; i++)
          d.writeTask({ ...taskIn(d, `w-${i}`), state: awaiting(`k:${i}`, i === 1 ? 9_000 : undefined) });
      });
      await session.signal("k:early", { n: 1 }, { requestId: "s1" });
      for (let i = 0; i < 30; i++)
        await commitAsKernel(session, (d) => {
          d.appendEntry("main", { kind: "note", text: `note ${i}` });
          if (i % 3 === 0) d.setDocument("plan", "plan", { steps: [`${i}`], approved: i % 2 === 0 });
          else d.patchDocument("plan", [{ op: "replace", path: "/steps/0", value: `${i}` }]);
        });
      expect(store.exportRaw).toBeDefined();
      // Through JSON, as it crosses from one host to another.
      const snapshot = JSON.parse(JSON.stringify(await exportSession(store, id)));
      expect(snapshot.head).toMatchObject({ version: session.version });
      expect(await exportSession(store, freshId("none"))).toBeUndefined();
      const copyId = freshId("imported");
      const other = harness.storage();
      expect(await importSession(other, copyId, snapshot)).toEqual({
        version: session.version,
        epoch: session.epoch,
      });
      await expect(importSession(other, copyId, snapshot)).rejects.toBeInstanceOf(DuplicateKeyError);
      await expect(
        importSession(other, freshId("bad"), { ...snapshot, rows: [{ table: "x" }] }),
      ).rejects.toThrow(/malformed/);
      const [mine, theirs] = await Promise.all([open(other, copyId, "read"), open(store, id, "read")]);
      const { id: _a, ...copied } = durable(mine.view());
      const { id: _b, ...original } = durable(theirs.view());
      expect(copied).toEqual(original);
      expect(mine.parkedInStorage).toBe(3);
      // Every read a copy serves reads the same there.
      const reads = async (s: Storage, sid: string) => ({
        entries: await s.readEntries(sid, "main", 0, 40),
        request: (await s.readRequest(sid, "r1"))?.value,
        tree: (await s.readTaskTree(sid, "root")).map((r) => r.value),
        signals: (await s.readSignals(sid, ["k:early", "k:none"])).map((r) => r?.value),
        waiting: (await s.readWaiting(sid, ["k:1"])).map(idsOf),
        parked: (await s.readParked(sid, undefined, 10)).map((i) => [i.version, i.id]),
        deadlines: (await s.readDeadlines(sid, 10)).map((r) => r.key.split("/").slice(-2)),
        settled: (await s.readSettled(sid, 10)).items.map((i) => i.id),
        items: (await s.readItems(sid, Number.MAX_SAFE_INTEGER, 20)).items.map((i) => i.id),
        documentRows: (await s.readDocumentRows(sid, "plan", 0, 1_000)).map((r) => r.value),
      });
      const copiedReads = await reads(other, copyId);
      expect(copiedReads).toEqual(await reads(store, id));
      expect(copiedReads.entries).toHaveLength(32);
      // Its log starts at the head: older versions are gone, as pruned ones are.
      const log = await other.readChanges(copyId, 0, 10);
      expect(log.oldestRetained).toBe(session.version);
      expect(log.changes.map((c) => c.value)).toEqual([snapshot.head]);
      // A writer of the copy goes on from there, and answers a repeated request as the original did.
      const writer = await open(other, copyId);
      const again = await writer.submit({
        requestId: "r1",
        conversationId: "main",
        input: "send the notice",
      });
      expect([again.id, again.status]).toEqual([sub.id, "cancelled"]);
      await writer.commit((d) => d.setDocument("plan", "plan", { steps: ["next"], approved: true }));
      const reopened = await open(other, copyId, "read");
      expect(reopened.version).toBe(session.version + 1);
      expect(reopened.view().documents[0]?.value).toEqual({ steps: ["next"], approved: true });
      // Replaced whole by a later snapshot of the original, in one transaction: nothing of the copy stays.
      await session.commit((d) => d.setDocument("later", "plan", { steps: ["later"], approved: false }));
      const later = JSON.parse(JSON.stringify(await exportSession(store, id)));
      await importSession(other, copyId, later, undefined, true);
      const replaced = await open(other, copyId, "read");
      const { id: _c, ...now } = durable(replaced.view());
      const { id: _d, ...then } = durable((await open(store, id, "read")).view());
      expect(now).toEqual(then);
      expect(await reads(other, copyId)).toEqual(await reads(store, id));
      await expect(
        writer.commit((d) => d.setDocument("stale", "plan", { steps: [], approved: false })),
      ).rejects.toBeInstanceOf(StaleOwnerError);
    });

    it("refuses a writer of a deleted session in the one created again under its id, at its epoch and version", async () => {
      const id = freshId("fenced");
      const first = await open(harness.storage(), id);
      for (let i = 0; i < 2; i++)
        await first.commit((d) => d.setDocument(`old-${i}`, "plan", { steps: [], approved: false }));
      const other = harness.storage();
      await other.deleteSession?.(id);
      const second = await open(other, id);
      for (let i = 0; i < 2; i++)
        await second.commit((d) => d.setDocument(`new-${i}`, "plan", { steps: [], approved: true }));
      expect([second.epoch, second.version]).toEqual([first.epoch, first.version]);
      const stale = first.commit((d) => d.setDocument("stale", "plan", { steps: [], approved: false }));
      await expect(stale).rejects.toBeInstanceOf(StaleOwnerError);
      const shown = (await open(other, id, "read")).view();
      expect(shown.documents.map((d) => d.id).sort()).toEqual(["new-0", "new-1"]);
    });

    it("never shows another handle's cache of a session deleted and created again under its id", async () => {
      const id = freshId("recreated");
      const writer = harness.storage();
      const reader = harness.storage();
      const first = await open(writer, id);
      for (let i = 0; i < 5; i++)
        await first.commit((d) => d.setDocument(`old-${i}`, "plan", { steps: [`${i}`], approved: false }));
      // The reader caches what it read: the log's tail of the first session, at version 5.
      expect((await open(reader, id, "read")).view().documents.map((d) => d.id)).toHaveLength(5);
      await first.close();
      // Another handle deletes the session and builds a new one further, with the same clock and versions.
      await writer.deleteSession?.(id);
      const second = await open(writer, id);
      for (let i = 0; i < 8; i++)
        await second.commit((d) => d.setDocument(`new-${i}`, "plan", { steps: [`${i}`], approved: true }));
      const shown = (await open(reader, id, "read")).view();
      expect(shown.version).toBe(8);
      expect(shown.documents.map((d) => d.id).sort()).toEqual(
        second
          .view()
          .documents.map((d) => d.id)
          .sort(),
      );
      expect(durable(shown)).toEqual(durable(second.view()));
      await second.close();
    });
  });
}
