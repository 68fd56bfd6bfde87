/** The storage contract suite against the Durable Object SQLite store, running inside real workerd. */
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DO_SQLITE_MAX_ROW_BYTES } from "../../edge/index.ts";
import { exportSession, RecordTooLargeError } from "../../src/index.ts";
import { RemoteStorage } from "../support/remote-storage.ts";
import { describeStorageContract, freshId, open } from "../support/storage-contract.ts";
import { bundleWorker, startWorkerd } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/storage-host.ts", import.meta.url)));
const workerd = startWorkerd(script, { HOST: "StorageHost" });
afterAll(() => workerd.dispose());

const post = async (body: unknown) => {
  const response = await workerd.dispatchFetch("http://storage-host/", {
    method: "POST",
    body: JSON.stringify(body),
  });
  return (await response.json()) as { ok: boolean; result?: unknown; error?: never };
};

describeStorageContract("Durable Object SQLite (workerd)", {
  storage: (options) => new RemoteStorage(post, options ?? {}),
  corrupt: async (sessionId, table, key, value) => {
    await new RemoteStorage(post).unsafeWriteRaw(sessionId, table, key, value);
  },
});

describe("Durable Object SQLite row limit (workerd)", () => {
  it("refuses a commit with a row over the platform's limit before writing; the session goes on", async () => {
    const id = freshId("big");
    const session = await open(new RemoteStorage(post), id);
    await session.commit((d) => d.appendEntry("main", { kind: "note", text: "small" }));
    // workerd itself would refuse this row (SQLITE_TOOBIG, a storage failure that stops the session); the
    // store refuses it first, naming it, and nothing of the commit is written.
    const error = await session
      .commit((d) => d.appendEntry("main", { kind: "note", text: "x".repeat(2_300_000) }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordTooLargeError);
    expect(error).toMatchObject({ record: "entries/main/1", limit: DO_SQLITE_MAX_ROW_BYTES, version: 2 });
    expect([session.status, session.version]).toEqual(["open", 1]);
    // Just under the limit is written: the entry has its own row, and the commit's change-log row names it.
    await session.commit((d) => d.appendEntry("main", { kind: "note", text: "y".repeat(1_990_000) }));
    const reopened = await open(new RemoteStorage(post), id);
    const texts = reopened
      .view()
      .conversations[0]?.entries.map((e) => (e.content.kind === "note" ? e.content.text.length : -1));
    expect(texts).toEqual([5, 1_990_000]);
  });

  it("creates a 1.5 MB document: its value is stored once per row (the change log's row and its own)", async () => {
    const id = freshId("big-doc");
    const session = await open(new RemoteStorage(post), id);
    const steps = Array.from({ length: 1_500 }, (_, i) => `${i}`.padEnd(1_000, "."));
    await session.commit((d) => d.setDocument("plan", "plan", { steps, approved: false }));
    await session.commit((d) => d.patchDocument("plan", [{ op: "replace", path: "/approved", value: true }]));
    const reopened = await open(new RemoteStorage(post), id);
    expect(reopened.view().documents[0]?.value).toEqual({ steps, approved: true });
  });
});

describe("Durable Object SQLite snapshot bound (workerd)", () => {
  it("refuses to export a session larger than one snapshot moves, naming its size, before reading it", async () => {
    const id = freshId("too-big-to-move");
    const session = await open(new RemoteStorage(post), id);
    for (let i = 0; i < 20; i++)
      await session.commit((d) => d.appendEntry("main", { kind: "note", text: "x".repeat(200) }));
    const small = new RemoteStorage(post, { maxExportChars: 2_000 });
    const error = await exportSession(small, id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordTooLargeError);
    expect(error).toMatchObject({ record: `sessions/${id}`, limit: 2_000, version: 20 });
    expect((error as RecordTooLargeError).bytes).toBeGreaterThan(4_000);
    // Under the default bound it moves; the size it was refused at counts all the snapshot's rows hold.
    const snapshot = await exportSession(new RemoteStorage(post), id);
    expect(snapshot?.head).toMatchObject({ version: 20 });
    expect((error as RecordTooLargeError).bytes).toBeGreaterThanOrEqual(
      JSON.stringify(snapshot?.rows).length,
    );
  });
});
