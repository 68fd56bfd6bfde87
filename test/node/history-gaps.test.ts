/**
 * Gaps in the change log (DESIGN §9: the log is bounded, pruned as a session lives on): whoever follows a
 * session's changes and falls behind its pruning is told so with `HistoryTruncatedError`, never left with a
 * copy that silently stops where the log was cut.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { DurableObjectSqliteStorage } from "../../edge/index.ts";
import {
  createRegistry,
  defineDocument,
  defineTask,
  followRemote,
  HistoryTruncatedError,
  InvalidArgumentError,
  indexedDbStorage,
  type LocalInput,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  RefusedWriteError,
  ReplicationDivergedError,
} from "../../src/index.ts";
import { notes, storeRemote, writeNotes } from "../support/store-remote.ts";

const noop = defineTask({
  kind: "noop",
  version: 1,
  input: z.object({}),
  phases: { go: (ctx) => ctx.complete(null) },
});
const note = defineDocument({ type: "note", schema: z.record(z.string(), z.unknown()) });
const registry = createRegistry({ tasks: [noop], documents: [note] });

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

describe("a tab following its edge whose own head commit the edge's log no longer holds", () => {
  it("stops with ReplicationDivergedError instead of taking the edge's commits onto a head it cannot check", async () => {
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    const edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await edge.resume();
    for (let i = 0; i < 155; i++) await edge.commit((d) => d.setDocument(`doc-${i}`, "note", { i }));
    // The edge's change log only: no snapshot to rebuild from.
    const unwrap = { changes: storeRemote(edgeDisk, "s").changes };
    const tabDisk = memoryStorage();
    const following = await followRemote({ storage: tabDisk, remote: unwrap, id: "s", everyMs: 0 });
    expect(await following.pull()).toBe(155);
    await following.stop();
    // The tab wrote version 156 itself, which the edge never received (closed mid-run) ...
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    await tab.commit((d) => d.setDocument("offline", "note", { offline: true }));
    await tab.close();
    // ... and the edge, taken over with a newer epoch (as a claim fences the tab), wrote its own 156 and far
    // past it: its log now starts right after that version.
    await edge.close();
    await (await openSession({ id: "s", storage: edgeDisk, registry })).close();
    const edge2 = await openSession({ id: "s", storage: edgeDisk, registry });
    for (let i = 155; i < 300; i++) await edge2.commit((d) => d.setDocument(`doc-${i}`, "note", { i }));
    expect((await edge2.readChanges(0, 1)).oldestRetained).toBe(157);

    const again = await followRemote({ storage: tabDisk, remote: unwrap, id: "s", everyMs: 0 });
    await expect(again.pull()).rejects.toBeInstanceOf(ReplicationDivergedError);
    // Nothing of the edge's was stacked onto the copy's own version 156.
    const copy = await openSession({ id: "s", storage: tabDisk, registry, mode: "read" });
    expect(copy.version).toBe(156);
    expect(copy.view().documents.some((d) => d.id === "offline")).toBe(true);
    await copy.close();
    await again.stop();
    await edge2.close();
  });
});

describe("a copy the edge's change log no longer reaches, rebuilt from the edge's snapshot", () => {
  /** An edge session that ran far past its change log's bound: 300 commits, a Submission among them. */
  async function longLivedEdge() {
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    const edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await edge.resume();
    await edge.submit({ requestId: "early", conversationId: "main", input: "the first question" });
    await writeNotes(edge, 300);
    expect((await edgeDisk.readChanges("s", 0, 1)).oldestRetained).toBeGreaterThan(100);
    return { edgeDisk, edge, ...storeRemote(edgeDisk, "s") };
  }
  const viewOf = async (storage: ReturnType<typeof memoryStorage>) => {
    const copy = await openSession({ id: "s", storage, registry, mode: "read" });
    const { epoch: _epoch, ...view } = copy.view();
    await copy.close();
    return view;
  };

  it("gives a new tab the session at the edge's version, then follows the edge's next commits", async () => {
    const { edgeDisk, edge, changes, snapshot } = await longLivedEdge();
    // Without a snapshot to take, a new copy cannot start: the edge's log no longer holds version 1.
    const bare = await followRemote({ storage: memoryStorage(), remote: { changes }, id: "s", everyMs: 0 });
    await expect(bare.pull()).rejects.toBeInstanceOf(ReplicationDivergedError);
    await bare.stop();

    const tabDisk = memoryStorage();
    const pulled: number[] = [];
    const following = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
      onPulled: (version) => pulled.push(version),
    });
    expect(await following.pull()).toBe(edge.version);
    expect(pulled).toEqual([edge.version]);
    expect(await viewOf(tabDisk)).toEqual(await viewOf(edgeDisk));
    // Its log starts at the snapshot's head: older versions are gone, as pruned ones are.
    expect((await tabDisk.readChanges("s", 0, 1)).oldestRetained).toBe(edge.version);
    expect((await tabDisk.readRequest("s", "early"))?.value).toBeDefined();
    // The edge goes on; the copy follows from the change log again, commit by commit.
    for (let i = 0; i < 20; i++) await edge.commit((d) => d.setDocument(`late-${i}`, "note", { i }));
    expect(await following.pull()).toBe(edge.version);
    expect(pulled.at(-1)).toBe(edge.version);
    expect(await viewOf(tabDisk)).toEqual(await viewOf(edgeDisk));
    await following.stop();
    // A copy reopened after that follows on from its own head, which the edge's log holds.
    const again = await followRemote({ storage: tabDisk, remote: { changes }, id: "s", everyMs: 0 });
    await edge.commit((d) => d.setDocument("after-restart", "note", { i: 0 }));
    expect(await again.pull()).toBe(edge.version);
    await again.stop();
    await edge.close();
  });

  it("rebuilds a tab that wrote commits of its own, keeping the inputs they hold for whoever leads next", async () => {
    const { edgeDisk, edge, changes, snapshot } = await longLivedEdge();
    const tabDisk = memoryStorage();
    const following = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
    });
    const followed = await following.pull();
    await following.stop();
    // The tab leads a while offline: a question and a note the edge never receives.
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    await tab.submit({ requestId: "offline", conversationId: "main", input: "asked offline" });
    await tab.commit((d) => d.setDocument("offline", "note", { offline: true }));
    await tab.close();
    expect(tab.version).toBe(followed + 2);
    // The edge, taken over with a newer epoch (above the tab's, as a claim grants), writes its own next
    // versions far past its log's bound.
    await edge.close();
    await (await openSession({ id: "s", storage: edgeDisk, registry })).close();
    const edge2 = await openSession({ id: "s", storage: edgeDisk, registry });
    for (let i = 0; i < 300; i++) await edge2.commit((d) => d.setDocument(`doc-${i % 40}`, "note", { j: i }));
    expect((await edgeDisk.readChanges("s", 0, 1)).oldestRetained).toBeGreaterThan(followed + 2);

    const kept: unknown[] = [];
    const refusing = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
      onDiverged: "refuse",
    });
    await expect(refusing.pull()).rejects.toBeInstanceOf(ReplicationDivergedError);
    await refusing.stop();
    expect((await viewOf(tabDisk)).version).toBe(followed + 2);
    const rebuilt = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    expect(await rebuilt.pull()).toBe(edge2.version);
    expect(await viewOf(tabDisk)).toEqual(await viewOf(edgeDisk));
    // The tab's own question is kept to be asked again (the edge has the first one: given again, it is
    // answered by requestId); its note was never acknowledged and is gone.
    const asked = kept.flatMap((input) =>
      (input as { kind: string }).kind === "submit"
        ? [(input as { input: { requestId: string } }).input.requestId]
        : [],
    );
    // Only what the edge lacks: its own first question is not given again.
    expect(asked).toEqual(["offline"]);
    expect((await viewOf(tabDisk)).documents.some((d) => d.id === "offline")).toBe(false);
    await rebuilt.stop();
    await edge2.close();
  });
});

describe("a follower merely behind the edge's change log", () => {
  const signals = notes;

  it("keeps nothing to give again (not even a signal the edge dropped since), and is rebuilt under `refuse` too", async () => {
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    const edge = await openSession({ id: "s", storage: edgeDisk, registry: signals });
    await edge.signal("answer:1", { text: "yes" }, { requestId: "sig-1" });
    const { changes, snapshot } = storeRemote(edgeDisk, "s");
    const tabDisk = memoryStorage();
    const first = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
    });
    expect(await first.pull()).toBe(edge.version);
    await first.stop();
    // The edge drops the signal the tab saw, then lives on past its log's bound.
    expect(await edge.dropEarlySignal("answer:1")).toBeDefined();
    await writeNotes(edge, 300);
    const kept: LocalInput[][] = [];
    const again = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
      onDiverged: "refuse",
      onRebased: (inputs) => void kept.push([...inputs]),
    });
    expect(await again.pull()).toBe(edge.version);
    await again.stop();
    expect(kept).toEqual([[]]);
    expect(await tabDisk.readSignals("s", ["answer:1"])).toEqual([undefined]);
    await edge.close();
  });
});

describe("a follower whose pulls fail", () => {
  it("retries a passing failure at the next tick (and says so), and stops on a refusal, saying why", async () => {
    const clock = new ManualClock(1_000);
    const timers = new ManualTimers(clock);
    const settle = async () => {
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    let answer: () => Promise<{ changes: unknown[]; oldestRetained: number }> = async () => {
      throw new TypeError("fetch failed");
    };
    let asked = 0;
    const retried: Error[] = [];
    const stopped: Error[] = [];
    const following = await followRemote({
      storage: memoryStorage(),
      remote: {
        changes: () => {
          asked++;
          return answer();
        },
      },
      id: "s",
      clock,
      timers,
      everyMs: 1_000,
      onRetry: (error) => retried.push(error),
      onError: (error) => stopped.push(error),
    });
    timers.advance(1_000);
    await settle();
    timers.advance(1_000);
    await settle();
    expect([asked, retried.length, stopped.length]).toEqual([2, 2, 0]);
    expect(retried[0]).toBeInstanceOf(TypeError);
    // Access withdrawn: asking again would be refused again.
    answer = async () => {
      throw new RefusedWriteError("the edge refused the session's replication: HTTP 403", "replica");
    };
    timers.advance(1_000);
    await settle();
    timers.advance(5_000);
    await settle();
    expect([asked, retried.length, stopped.length]).toEqual([3, 2, 1]);
    expect(stopped[0]).toBeInstanceOf(RefusedWriteError);
    await following.stop();
  });
});

describe("change-log bounds", () => {
  it("refuses bounds that would lose the newest commit or mean nothing, naming the option", () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => memoryStorage({ retainChanges: bad })).toThrow(InvalidArgumentError);
      expect(() => indexedDbStorage("bounds", { retainChanges: bad })).toThrow(/retainChanges/);
    }
    expect(() => memoryStorage({ retainChangeBytes: 0 })).toThrow(/retainChangeBytes/);
    expect(() => memoryStorage({ tailCommits: 0 })).toThrow(/tailCommits/);
    expect(memoryStorage({ retainChanges: 1 })).toBeDefined();
    // The Durable Object's store checks its snapshot bound the same way (NaN would turn the bound off).
    const platform = {} as ConstructorParameters<typeof DurableObjectSqliteStorage>[0];
    expect(() => new DurableObjectSqliteStorage(platform, { maxExportChars: Number.NaN })).toThrow(
      /maxExportChars/,
    );
  });
});

describe("a reader of a session replaced under it (a copy rebuilt from its other host)", () => {
  it("is told its history is gone instead of taking the new session's commits onto its own", async () => {
    const registry = notes;
    const storage = memoryStorage();
    const first = await openSession({ id: "s", storage, registry });
    for (let i = 0; i < 5; i++) await first.commit((d) => d.setDocument("mine", "note", { i }));
    await first.close();
    const reader = await openSession({ id: "s", storage, registry, mode: "read" });
    expect(reader.version).toBe(5);
    // Replaced: deleted and written again from version 1 (as a rebase copies the other host's history).
    await storage.deleteSession?.("s");
    const other = await openSession({ id: "s", storage, registry });
    for (let i = 0; i < 10; i++) await other.commit((d) => d.setDocument("theirs", "note", { i }));
    await other.close();
    const error = await reader.refresh().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HistoryTruncatedError);
    expect(error).toMatchObject({ replaced: true, requestedAfter: 5 });
    // Nothing of the other session was taken onto this one's state.
    expect(reader.version).toBe(5);
    expect(reader.view().documents.map((d) => d.id)).toEqual(["mine"]);
    // A page subscribing to it meanwhile (from version 2) is told the same, and given none of the new one.
    const got: string[] = [];
    const told = new Promise<Error>((resolve) =>
      reader.subscribe(2, (change) => void got.push(...change.documents.map((d) => d.id)), {
        onError: resolve,
      }),
    );
    expect(await told).toMatchObject({ name: "HistoryTruncatedError", replaced: true });
    expect(got).toEqual([]);
    await expect(reader.readChanges(0)).rejects.toBeInstanceOf(HistoryTruncatedError);
    const fresh = await openSession({ id: "s", storage, registry, mode: "read" });
    expect(fresh.view().documents.map((d) => d.id)).toEqual(["theirs"]);
  });
});
