/**
 * Rebuilding a copy from its edge's snapshot (the edge's change log no longer reaches it): what the copy
 * keeps to give again, when it can tell and when it cannot, and that a claim that cannot lead is handed
 * back at once.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { approvedPlan } from "../../examples/five-emails/app.ts";
import {
  followRemote,
  type Json,
  type LocalInput,
  linkSession,
  ManualClock,
  memoryOwnership,
  memoryStorage,
  openSession,
  RecordTooLargeError,
  ReplicaHost,
  type ReplicaRemote,
  ReplicationDivergedError,
  type Session,
  type Storage,
  StorageError,
  type WithheldSignal,
} from "../../src/index.ts";
import { MAX_PUSH_COMMITS } from "../../src/replication/protocol.ts";
import { replayInputs } from "../../src/replication/rebase.ts";
import { rebuildFromSnapshot } from "../../src/replication/snapshot-rebuild.ts";
import { ForwardingStorage } from "../../src/testing/forwarding-storage.ts";
import { notes, storeRemote, writeNotes } from "../support/store-remote.ts";
import { SESSION, TwoHosts } from "../support/two-hosts.ts";

const settle = async (rounds = 20) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

async function twoEpochsUnsent(retainChanges: number | undefined) {
  const hosts = new TwoHosts(10_000, undefined, undefined, retainChanges ? { retainChanges } : {});
  // Claims reach the edge; every push is lost (a flaky connection).
  const noPush: ReplicaRemote = {
    ...hosts.remote,
    push: async () => {
      throw new TypeError("fetch failed: the network is down");
    },
  };
  const first = await hosts.openTab("tab-1", { remote: noPush });
  await first.linked.session.submit({ requestId: "asked-first", conversationId: "main", input: "one" });
  const e1 = first.linked.epoch;
  await first.linked.close();
  // The same browser (same holder) comes back within the lease: the claim is granted at the edge's
  // version (0); the copy is ahead, and its link's pushes are lost again.
  const second = await hosts.openTab("tab-1", { remote: noPush });
  await second.linked.session.submit({ requestId: "asked-second", conversationId: "main", input: "two" });
  const e2 = second.linked.epoch;
  await second.linked.close();
  expect(e2).toBeGreaterThan(e1);
  // The lease runs out; the edge takes over and lives on past its change log.
  hosts.clock.advance(20_000);
  expect(await hosts.edgeAlarm()).toBe(true);
  const edge = hosts.edgeSession as Session;
  for (let i = 0; i < 300; i++)
    await edge.commit((d) =>
      d.setDocument(`edge-${i % 30}`, "email-plan", approvedPlan() as unknown as Json),
    );
  await settle();
  return hosts;
}

/** What the tab's copy keeps to give again when it next follows the edge (and is rebuilt). */
async function keptByFollowing(hosts: TwoHosts): Promise<LocalInput[]> {
  const kept: LocalInput[] = [];
  const following = await followRemote({
    storage: hosts.tabDisk.reopen(),
    remote: hosts.remote,
    id: SESSION,
    everyMs: 0,
    onRebased: (inputs) => void kept.push(...inputs),
  });
  await following.pull();
  await following.stop();
  return kept;
}

const asked = (kept: readonly LocalInput[]) =>
  kept.flatMap((i) => (i.kind === "submit" ? [i.input.requestId] : []));

describe("unsent commits of two epochs (a tab relinked within its lease, every push lost)", () => {
  it("through the change log (rebase), both unsent questions are kept", async () => {
    const hosts = await twoEpochsUnsent(undefined);
    expect(asked(await keptByFollowing(hosts))).toEqual(["asked-first", "asked-second"]);
  });

  it("through the snapshot too (the edge's log no longer reaches them), both are kept", async () => {
    const hosts = await twoEpochsUnsent(100);
    expect((await hosts.edgeDisk.readChanges(SESSION, 0, 1)).oldestRetained).toBeGreaterThan(10);
    expect(asked(await keptByFollowing(hosts))).toEqual(["asked-first", "asked-second"]);
  });
});

describe("a tab that only followed, linking after the edge's log moved past it", () => {
  const registry = notes;

  async function setup() {
    const clock = new ManualClock(1_000);
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    let edge: Session | undefined = await openSession({ id: "s", storage: edgeDisk, registry, clock });
    const host = new ReplicaHost({
      storage: edgeDisk,
      ownership: memoryOwnership(),
      clock,
      stopWriter: async () => {
        await edge?.close();
        edge = undefined;
      },
      startWriter: async () => {
        edge = await openSession({ id: "s", storage: edgeDisk, registry, clock });
      },
    });
    const remote = {
      claim: (r: Parameters<ReplicaHost["claim"]>[1]) => host.claim("s", r),
      push: (r: Parameters<ReplicaHost["push"]>[1]) => host.push("s", r),
      release: (r: Parameters<ReplicaHost["release"]>[1]) => host.release("s", r),
      changes: (after: number, limit: number) => host.changes("s", after, limit),
      snapshot: async () => JSON.parse(JSON.stringify(await host.snapshot("s"))),
    };
    await edge.signal("answer:1", { text: "yes" }, { requestId: "sig-1" });
    const tabDisk = memoryStorage();
    const f = await followRemote({ storage: tabDisk, remote, id: "s", everyMs: 0 });
    await f.pull();
    await f.stop();
    // The edge (same writer, same epoch) drops the signal the tab saw, then lives on past its log.
    await edge.dropEarlySignal("answer:1");
    await writeNotes(edge, 300);
    return { clock, edgeDisk, tabDisk, remote, host };
  }

  it("keeps nothing to give again: a signal the edge dropped since is not brought back", async () => {
    const { tabDisk, remote } = await setup();
    const kept: LocalInput[] = [];
    const linked = await linkSession({
      id: "s",
      storage: tabDisk,
      remote,
      registry,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    await linked.close();
    expect(kept).toEqual([]);
  });

  it("is refused under `refuse` (whether it wrote commits of its own cannot be told), and hands the claim back", async () => {
    const { tabDisk, remote, host } = await setup();
    const linking = linkSession({ id: "s", storage: tabDisk, remote, registry, onDiverged: "refuse" });
    await expect(linking).rejects.toBeInstanceOf(ReplicationDivergedError);
    expect((await host.ownership("s"))?.holder).toBe("edge");
  });

  it("without onRebased either: the dropped signal stays dropped at the edge", async () => {
    const { tabDisk, remote, edgeDisk } = await setup();
    const linked = await linkSession({ id: "s", storage: tabDisk, remote, registry });
    await linked.flush();
    await linked.close();
    expect(await edgeDisk.readSignals("s", ["answer:1"])).toEqual([undefined]);
  });
});

describe("a tab whose own store fails as it opens its writer, after its claim was granted", () => {
  it("hands the claim back: the edge's writer goes on at once, not after the lease", async () => {
    const hosts = new TwoHosts(10_000);
    const first = await hosts.openTab();
    await first.linked.handOff();
    await settle();
    /** A disk that is full: reads work, a writer cannot open. */
    class FullDisk extends ForwardingStorage {
      override open: Storage["open"] = async (id, options) => {
        if (options.mode === "write") throw new StorageError("quota-exceeded", "the disk is full");
        return this.inner.open(id, options);
      };
    }
    const full = new FullDisk(hosts.tabDisk.reopen());
    await expect(hosts.openTab("tab-1", { storage: full })).rejects.toMatchObject({ code: "quota-exceeded" });
    await settle();
    expect(hosts.edgeSession).toBeDefined();
    expect((await hosts.host.ownership(SESSION))?.holder).toBe("edge");
  });
});

describe("a linked tab whose own change log fails to read once as it pushes", () => {
  it("keeps leading and pushes on the next try: a local storage failure is not the edge's refusal", async () => {
    const hosts = new TwoHosts(10_000);
    const noPush: ReplicaRemote = {
      ...hosts.remote,
      push: async () => {
        throw new TypeError("fetch failed: the network is down");
      },
    };
    // Offline: a commit the edge never received, then the tab comes back within its lease.
    const offline = await hosts.openTab("tab-1", { remote: noPush });
    await offline.linked.session.submit({ requestId: "offline", conversationId: "main", input: "one" });
    await offline.linked.close();
    /** The tab's store fails the first read of a push's backlog (a transaction aborted under pressure). */
    let failures = 1;
    class FlakyLog extends ForwardingStorage {
      override readChanges: Storage["readChanges"] = async (...args) => {
        if (args[2] === MAX_PUSH_COMMITS && failures-- > 0)
          throw new StorageError("storage-failed", "the transaction was aborted");
        return this.inner.readChanges(...args);
      };
    }
    const statuses: string[] = [];
    const back = await hosts.openTab("tab-1", {
      storage: new FlakyLog(hosts.tabDisk.reopen()),
      onStatus: (status) => statuses.push(status),
    });
    await settle();
    expect(failures).toBe(0); // the read failed once
    for (let i = 0; i < 5 && back.linked.acknowledged < back.linked.session.version; i++) {
      hosts.timers.advance(1_000);
      await settle();
    }
    expect(statuses).toEqual(["leading"]);
    expect(back.linked.status).toBe("leading");
    expect(back.linked.acknowledged).toBe(back.linked.session.version);
    await back.linked.close();
  });
});

describe("a follower whose edge restarted (a new epoch) while it was away", () => {
  const registry = notes;

  it("keeps no signal to give again (a dropped one stays dropped)", async () => {
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    let edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await edge.signal("answer:1", { text: "yes" }, { requestId: "sig-1" });
    const { changes, snapshot } = storeRemote(edgeDisk, "s");
    const tabDisk = memoryStorage();
    const first = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
    });
    await first.pull();
    await first.stop();
    await edge.dropEarlySignal("answer:1");
    // The Durable Object is evicted and comes back: its writer reopens under the next epoch.
    await edge.close();
    edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await writeNotes(edge, 300);
    const kept: LocalInput[] = [];
    const again = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    await again.pull();
    await again.stop();
    expect(kept).toEqual([]);
  });
});

describe("an empty tab linking to a session too large to snapshot", () => {
  it("fails, and hands the claim back: the edge's writer goes on at once", async () => {
    const hosts = new TwoHosts(10_000, undefined, undefined, { retainChanges: 100 });
    const first = await hosts.openTab();
    await first.linked.handOff();
    await settle();
    const edge = hosts.edgeSession as Session;
    for (let i = 0; i < 300; i++)
      await edge.commit((d) =>
        d.setDocument(`edge-${i % 30}`, "email-plan", approvedPlan() as unknown as Json),
      );
    hosts.tabDisk = memoryStorage();
    const tooLarge: ReplicaRemote = {
      ...hosts.remote,
      // As edgeReplica reports the edge's 413 (snapshot-workerd.test.ts).
      snapshot: async () => {
        throw new RecordTooLargeError(
          "the session is too large to move",
          `sessions/${SESSION}`,
          9e6,
          8e6,
          300,
        );
      },
    };
    await expect(hosts.openTab("tab-2", { remote: tooLarge })).rejects.toBeInstanceOf(RecordTooLargeError);
    // The claim stopped the edge's writer; handed back, it runs again without waiting for the lease.
    await settle();
    expect(hosts.edgeSession).toBeDefined();
    expect((await hosts.host.ownership(SESSION))?.holder).toBe("edge");
  });
});

describe("a tab that wrote offline, where the edge's log still shows where the copies part", () => {
  const registry = notes;

  it("keeps every input of its own commits, its signals too, though the log no longer reaches the start", async () => {
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    let edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await writeNotes(edge, 300);
    const { changes, snapshot } = storeRemote(edgeDisk, "s");
    const tabDisk = memoryStorage();
    const first = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
    });
    expect(await first.pull()).toBe(300);
    await first.stop();
    expect((await edgeDisk.readChanges("s", 0, 1)).oldestRetained).toBeGreaterThan(1);
    // The tab leads offline: an answer and a question the edge never receives.
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    await tab.signal("answer:2", { text: "given offline" }, { requestId: "sig-2" });
    await tab.submit({ requestId: "offline", conversationId: "main", input: "asked offline" });
    await tab.close();
    // The edge takes over above the tab's epoch and writes its own 301, 302 …, short of its next pruning.
    await edge.close();
    await (await openSession({ id: "s", storage: edgeDisk, registry })).close();
    edge = await openSession({ id: "s", storage: edgeDisk, registry });
    for (let i = 0; i < 20; i++) await edge.commit((d) => d.setDocument(`edge-${i}`, "note", { i }));
    const kept: LocalInput[] = [];
    const again = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    expect(await again.pull()).toBe(edge.version);
    await again.stop();
    expect(kept.map((input) => input.kind)).toEqual(["signal", "submit"]);
    expect(kept[0]).toMatchObject({ key: "answer:2", requestId: "sig-2" });
    await edge.close();
  });
});

describe("a tab's withdrawal of an answer the edge gave, where the edge's log no longer shows the parting", () => {
  const registry = notes;

  /** The edge keeps an answer; the tab copies it, withdraws it offline, and the edge's log moves on. */
  async function withdrawnOffline(answerHere: boolean) {
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    let edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await edge.signal("answer:1", { text: "yes" }, { requestId: "edge-answer" });
    const remote = storeRemote(edgeDisk, "s");
    const tabDisk = memoryStorage();
    const first = await followRemote({ storage: tabDisk, remote, id: "s", everyMs: 0 });
    expect(await first.pull()).toBe(1);
    await first.stop();
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    // Given and withdrawn here only (never sent): nothing of it goes to the edge.
    if (answerHere) {
      await tab.signal("answer:2", { text: "mine" }, { requestId: "tab-answer" });
      expect(await tab.dropEarlySignal("answer:2")).toBeDefined();
    }
    expect(await tab.dropEarlySignal("answer:1")).toBeDefined();
    await tab.close();
    // The edge restarts twice (an epoch past the tab's: the copies part) and lives on past its change log.
    await edge.close();
    await (await openSession({ id: "s", storage: edgeDisk, registry })).close();
    edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await writeNotes(edge, 300);
    expect((await edgeDisk.readChanges("s", 0, 1)).oldestRetained).toBeGreaterThan(3);
    const kept: LocalInput[] = [];
    let reads = 0;
    const counted = {
      ...remote,
      changes: (after: number, limit: number) => {
        reads++;
        return remote.changes(after, limit);
      },
    };
    const again = await followRemote({
      storage: tabDisk,
      remote: counted,
      id: "s",
      everyMs: 0,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    expect(await again.pull()).toBe(edge.version);
    await again.stop();
    // The edge's log starts past the copy's head: it cannot show the parting, and it is not read for it
    // (one read finds the gap, one after the rebuild finds nothing newer).
    expect(reads).toBe(2);
    return { edge, kept };
  }

  it("keeps the drop of the edge's own signal, and it withdraws that answer there", async () => {
    const { edge, kept } = await withdrawnOffline(false);
    expect(kept).toEqual([{ kind: "drop", key: "answer:1", version: 1, requestId: "edge-answer" }]);
    await replayInputs(edge, kept);
    expect(edge.earlySignals()).toEqual([]);
    await edge.close();
  });

  it("gives nothing of an answer given and withdrawn in the tab alone", async () => {
    const { edge, kept } = await withdrawnOffline(true);
    expect(kept.map((input) => `${input.kind} ${"key" in input ? input.key : ""}`)).toEqual([
      "drop answer:1",
    ]);
    await edge.close();
  });
});

describe("a tab's own answer, where the edge's log no longer shows the parting", () => {
  it("is not given again, and is told as withheld; one the edge holds too, and one withdrawn here, are not", async () => {
    const registry = notes;
    const edgeDisk = memoryStorage({ retainChanges: 100 });
    let edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await edge.signal("answer:1", { text: "the edge's" }, { requestId: "edge-answer" });
    const remote = storeRemote(edgeDisk, "s");
    const tabDisk = memoryStorage();
    const first = await followRemote({ storage: tabDisk, remote, id: "s", everyMs: 0 });
    expect(await first.pull()).toBe(1);
    await first.stop();
    // Offline: one answer kept, one given and withdrawn.
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    await tab.signal("answer:2", { text: "mine" }, { requestId: "tab-answer" });
    await tab.signal("answer:3", { text: "taken back" }, { requestId: "tab-withdrawn" });
    expect(await tab.dropEarlySignal("answer:3")).toBeDefined();
    await tab.close();
    // The edge restarts twice (an epoch past the tab's: the copies part) and lives on past its change log.
    await edge.close();
    await (await openSession({ id: "s", storage: edgeDisk, registry })).close();
    edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await writeNotes(edge, 300);
    expect((await edgeDisk.readChanges("s", 0, 1)).oldestRetained).toBeGreaterThan(4);
    const told: { inputs: LocalInput[]; withheld: WithheldSignal[] }[] = [];
    const again = await followRemote({
      storage: tabDisk,
      remote,
      id: "s",
      everyMs: 0,
      onRebased: (inputs, withheld) => void told.push({ inputs: [...inputs], withheld: [...withheld] }),
    });
    expect(await again.pull()).toBe(edge.version);
    await again.stop();
    // Whether the edge never had it or withdrew it cannot be told: not given again, but the app is told.
    expect(told).toEqual([
      { inputs: [], withheld: [{ key: "answer:2", payload: { text: "mine" }, requestId: "tab-answer" }] },
    ]);
    // The rebuilt copy holds what the edge holds: its answer, not the tab's.
    const copy = await openSession({ id: "s", storage: tabDisk, registry, mode: "read" });
    expect(copy.earlySignals().map((signal) => signal.key)).toEqual(["answer:1"]);
    expect(await copy.readSignal("answer:2")).toBeUndefined();
    await copy.close();
    await edge.close();
  });
});

describe("a linked tab whose pushes were lost withdraws an approval the edge kept", () => {
  it("relinks past the edge's change log, and the approval stays withdrawn there", async () => {
    const hosts = new TwoHosts(10_000, undefined, undefined, { retainChanges: 100 });
    const tab0 = await hosts.openTab("tab-0");
    await tab0.linked.handOff();
    await settle();
    const edge0 = hosts.edgeSession as Session;
    await edge0.signal("plan-approval:later", { approved: true }, { requestId: "decision" });
    const accepted = edge0.version;
    const noPush: ReplicaRemote = {
      ...hosts.remote,
      push: async () => {
        throw new TypeError("fetch failed: the network is down");
      },
    };
    const tab = await hosts.openTab("tab-1", { remote: noPush });
    expect(await tab.linked.session.dropEarlySignal("plan-approval:later")).toBeDefined();
    await tab.linked.close();
    hosts.clock.advance(20_000);
    expect(await hosts.edgeAlarm()).toBe(true);
    const edge = hosts.edgeSession as Session;
    for (let i = 0; i < 300; i++)
      await edge.commit((d) =>
        d.setDocument(`edge-${i % 30}`, "email-plan", approvedPlan() as unknown as Json),
      );
    expect((await hosts.edgeDisk.readChanges(SESSION, 0, 1)).oldestRetained).toBeGreaterThan(accepted + 1);
    // No onRebased: linkSession gives the kept inputs again itself.
    const again = await hosts.openTab("tab-1");
    expect(again.linked.session.earlySignals().map((s) => s.key)).toEqual([]);
    await again.linked.close();
  });
});

describe("a linked tab whose pushes were lost answered a wait the edge never heard of", () => {
  it("relinks past the edge's change log: the answer is not given again, and onRebased is told it is withheld", async () => {
    const hosts = new TwoHosts(10_000, undefined, undefined, { retainChanges: 100 });
    const noPush: ReplicaRemote = {
      ...hosts.remote,
      push: async () => {
        throw new TypeError("fetch failed: the network is down");
      },
    };
    const tab = await hosts.openTab("tab-1", { remote: noPush });
    await tab.linked.session.signal("plan-approval:mine", { approved: true }, { requestId: "offline" });
    await tab.linked.close();
    hosts.clock.advance(20_000);
    expect(await hosts.edgeAlarm()).toBe(true);
    const edge = hosts.edgeSession as Session;
    for (let i = 0; i < 300; i++)
      await edge.commit((d) =>
        d.setDocument(`edge-${i % 30}`, "email-plan", approvedPlan() as unknown as Json),
      );
    expect((await hosts.edgeDisk.readChanges(SESSION, 0, 1)).oldestRetained).toBeGreaterThan(2);
    const told: WithheldSignal[] = [];
    const again = await hosts.openTab("tab-1", {
      onRebased: (_inputs, withheld) => void told.push(...withheld),
    });
    expect(told).toEqual([{ key: "plan-approval:mine", payload: { approved: true }, requestId: "offline" }]);
    expect(again.linked.session.earlySignals()).toEqual([]);
    await again.linked.close();
  });
});

describe("the edge prunes its log while a diverged follower reads what it retains", () => {
  it("reads it again from where it starts then, and rebuilds, instead of stopping for good", async () => {
    const registry = notes;
    const edgeDisk = memoryStorage({ retainChanges: 600 });
    let edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await writeNotes(edge, 1000);
    const { changes, snapshot } = storeRemote(edgeDisk, "s");
    const tabDisk = memoryStorage();
    const first = await followRemote({
      storage: tabDisk,
      remote: { changes, snapshot },
      id: "s",
      everyMs: 0,
    });
    expect(await first.pull()).toBe(1000);
    await first.stop();
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    await tab.submit({ requestId: "offline", conversationId: "main", input: "asked offline" });
    await tab.close();
    // The edge restarts twice (an epoch past the tab's) and writes on.
    await edge.close();
    await (await openSession({ id: "s", storage: edgeDisk, registry })).close();
    edge = await openSession({ id: "s", storage: edgeDisk, registry });
    for (let i = 0; i < 20; i++) await edge.commit((d) => d.setDocument(`edge-${i}`, "note", { i }));
    // While the follower reads its retained history, the edge writes past a page of it and prunes.
    let calls = 0;
    const busy = {
      snapshot,
      changes: async (after: number, limit: number) => {
        const page = await changes(after, limit);
        if (++calls === 2)
          for (let i = 0; i < 400; i++)
            await edge.commit((d) => d.setDocument(`late-${i % 40}`, "note", { i }));
        return page;
      },
    };
    const kept: LocalInput[] = [];
    const again = await followRemote({
      storage: tabDisk,
      remote: busy,
      id: "s",
      everyMs: 0,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    expect(await again.pull()).toBe(edge.version);
    await again.stop();
    expect(asked(kept)).toEqual(["offline"]);
    await edge.close();
  });
});

describe("a drop of the tab's own signal whose log was pruned past it", () => {
  it("is not given to the edge, whose signal for the key at that version is another one", async () => {
    const registry = notes;
    // Each side took its own answer for answer:1 at version 1, apart.
    const edgeDisk = memoryStorage();
    const edge = await openSession({ id: "s", storage: edgeDisk, registry });
    await edge.signal("answer:1", { text: "the edge's" }, { requestId: "r-edge" });
    await edge.close();
    const tabDisk = memoryStorage({ retainChanges: 50 });
    const tab = await openSession({ id: "s", storage: tabDisk, registry });
    await tab.signal("answer:1", { text: "the tab's" }, { requestId: "r-tab" });
    await writeNotes(tab, 300);
    expect((await tabDisk.readChanges("s", 0, 1)).oldestRetained).toBeGreaterThan(1); // its log starts after it
    expect(await tab.dropEarlySignal("answer:1")).toMatchObject({ requestId: "r-tab", version: 1 });
    await tab.close();
    const rebuilt = await rebuildFromSnapshot(tabDisk, storeRemote(edgeDisk, "s"), "s", {
      keep: "unchecked",
    });
    // Same key, same version, another request: dropping it at the edge would withdraw the edge's answer.
    expect(rebuilt?.inputs.filter((input) => input.kind === "drop")).toEqual([]);
  });
});

describe("a follower far behind its edge", () => {
  it("catches up in one pull, page after page (it stopped after its second page, a tick each)", async () => {
    const edgeDisk = memoryStorage();
    const edge = await openSession({ id: "s", storage: edgeDisk, registry: notes });
    await writeNotes(edge, 1000);
    const follower = await followRemote({
      storage: memoryStorage(),
      remote: storeRemote(edgeDisk, "s"),
      id: "s",
      everyMs: 0,
    });
    expect(await follower.pull()).toBe(1000);
    await follower.stop();
    await edge.close();
  });
});

describe("a tab's copy and the edge's, each created on its own under one session id", () => {
  it("are not taken for one history though their epochs match: the tab's input is kept and given again", async () => {
    const registry = notes;
    const clock = new ManualClock(1_000);
    const edgeDisk = memoryStorage();
    let edge: Session | undefined = await openSession({ id: "s", storage: edgeDisk, registry, clock });
    await edge.commit((d) => d.setDocument("edge-note", "note", { text: "the edge's" }));
    const host = new ReplicaHost({
      storage: edgeDisk,
      ownership: memoryOwnership(),
      clock,
      stopWriter: async () => {
        await edge?.close();
        edge = undefined;
      },
      startWriter: async () => {
        edge = await openSession({ id: "s", storage: edgeDisk, registry, clock });
      },
    });
    const remote: ReplicaRemote = {
      claim: (r) => host.claim("s", r),
      push: (r) => host.push("s", r),
      release: (r) => host.release("s", r),
      changes: (after, limit) => host.changes("s", after, limit),
      snapshot: async () => JSON.parse(JSON.stringify(await host.snapshot("s"))),
    };
    // The tab made its own session under the same id (offline, before linking was switched on).
    clock.advance(5);
    const tabDisk = memoryStorage();
    const tab = await openSession({ id: "s", storage: tabDisk, registry, clock });
    // Its first commit holds its question: version 1 of both copies is of the same epoch, not the same commit.
    await tab.submit({ requestId: "asked-here", conversationId: "main", input: "mine" });
    await tab.commit((d) => d.setDocument("tab-note", "note", { text: "the tab's" }));
    await tab.close();
    const kept: LocalInput[] = [];
    const linked = await linkSession({
      id: "s",
      storage: tabDisk,
      remote,
      registry,
      clock,
      onRebased: (inputs) => void kept.push(...inputs),
    });
    // The tab's copy was rebuilt from the edge's: the edge's note is there, its question kept to give again.
    expect(linked.session.view().documents.map((d) => d.id)).toContain("edge-note");
    expect(asked(kept)).toEqual(["asked-here"]);
    await linked.close();
  });
});
