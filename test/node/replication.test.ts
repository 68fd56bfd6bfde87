/**
 * One session, two hosts (issue 21): a tab leads and its edge follows; ownership moves by hand-off, by an
 * expired lease and by a claim back, always with a new epoch. The five-email run is handed over mid-send.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  approvedPlan,
  campaignModel,
  campaignRegistry,
  draftPlan,
  RECIPIENTS,
} from "../../examples/five-emails/app.ts";
import {
  type CommitRecord,
  createAgent,
  createRegistry,
  defineSignal,
  defineTask,
  EDGE_HOLDER,
  followRemote,
  InvalidArgumentError,
  type Json,
  type LocalInput,
  ManualClock,
  memoryStorage,
  OwnedElsewhereError,
  openSession,
  ReplicationDivergedError,
  type Session,
  type SessionView,
  type Submission,
  scriptedModel,
  sequentialIds,
  type Task,
} from "../../src/index.ts";
import { rebaseDiverged, replayInputs } from "../../src/replication/rebase.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";
import { acceptInboxRow, DurableInbox, inboxRowOf } from "../../worker/inbox.ts";
import { created, demoTask } from "../support/storage-contract.ts";
import { SESSION, TwoHosts } from "../support/two-hosts.ts";

const REQUEST = { requestId: "notice-1", conversationId: "main", input: "Send the approved notice" };

/** Settles every promise reaction and I/O callback queued so far (the in-process link is all promises). */
const settle = async (rounds = 20) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** What both copies must agree on (the id is the same session; nothing else may differ). */
const comparable = (view: SessionView) => ({ ...view, limits: undefined });

async function startCampaign(session: Session) {
  await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
  const submission = await session.submit(REQUEST);
  await session.resume();
  return submission;
}

function expectFiveOnce(hosts: TwoHosts) {
  const counts = hosts.mail.deliveryCounts();
  expect([...counts.keys()].sort()).toEqual([...RECIPIENTS].sort());
  expect([...counts.values()]).toEqual([1, 1, 1, 1, 1]);
  // No operation was sent twice, not even deduplicated by the provider: recovery confirmed instead.
  expect([...hosts.mail.attempts.values()].every((n) => n === 1)).toBe(true);
}

/**
 * A tab whose copy diverged: the plan reached the edge, then, cut off, the tab committed `offline` and died;
 * the edge took the session over and wrote a document of its own.
 */
async function divergedTab(hosts: TwoHosts, offline: (session: Session) => Promise<unknown>) {
  const first = await hosts.openTab();
  await first.linked.session.commit((d) =>
    d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
  );
  await first.linked.flush();
  hosts.partitioned = true;
  await offline(first.linked.session);
  first.disk.kill();
  hosts.clock.advance(10_001);
  await hosts.host.expire(SESSION);
  await (hosts.edgeSession as Session).commit((d) =>
    d.setDocument("edge-only", "email-plan", approvedPlan() as unknown as Json),
  );
  hosts.partitioned = false;
}

describe("linked session: a tab leads, the edge follows", () => {
  it("pushes every commit in order; the edge's stored copy equals the tab's", async () => {
    const hosts = new TwoHosts();
    const { linked } = await hosts.openTab();
    const submission = await startCampaign(linked.session);
    await linked.session.wait(submission.id);
    await linked.flush();
    expect(linked.acknowledged).toBe(linked.session.version);
    const edge = await hosts.edgeReader();
    expect(comparable(edge.view())).toEqual(comparable(linked.session.view()));
    expect(edge.epoch).toBe(linked.epoch);
    expectFiveOnce(hosts);
    // The edge did not run anything while the tab led.
    expect(hosts.edgeStarts).toBe(0);
    expect((await hosts.host.ownership(SESSION))?.holder).toBe("tab-1");
  });

  it("hands the run over mid-send: the edge finishes it, five mails, each once", async () => {
    const hosts = new TwoHosts();
    const { linked } = await hosts.openTab();
    let handOff: Promise<void> | undefined;
    hosts.mail.onAccepted = (_receipt, count) => {
      if (count === 2) handOff = linked.handOff();
    };
    const submission = await startCampaign(linked.session);
    await settle();
    expect(handOff).toBeDefined();
    await handOff;
    expect(linked.status).toBe("released");
    expect(hosts.edgeStarts).toBe(1);
    const edge = hosts.edgeSession as Session;
    expect(edge.epoch).toBeGreaterThan(linked.epoch);
    const done = await edge.wait(submission.id);
    expect(done.status).toBe("succeeded");
    expectFiveOnce(hosts);
    // The mails the tab sent before it let go were confirmed by operation id at the edge, not resent.
    const vias = edge
      .view()
      .tasks.flatMap((t) =>
        t.state.status === "succeeded" ? [(t.state.result as { via?: string }).via] : [],
      );
    expect(vias).toContain("confirm");
  });

  it("takes a crashed tab's run over once its lease runs out; results the edge never got are confirmed", async () => {
    const hosts = new TwoHosts(10_000);
    const { linked, disk } = await hosts.openTab();
    // The link goes down after the first mail: the next intents commit locally but are never acknowledged.
    hosts.mail.onAccepted = (_receipt, count) => {
      if (count === 1) hosts.partitioned = true;
    };
    const submission = await startCampaign(linked.session);
    await settle();
    const sentBeforeCrash = hosts.mail.deliveries.length;
    expect(linked.session.version).toBeGreaterThan(linked.acknowledged);
    disk.kill(); // the tab dies with commits the edge never received
    hosts.mail.onAccepted = undefined;
    // Before the lease runs out nobody takes over; after, the edge does.
    expect(await hosts.host.expire(SESSION)).toBe(false);
    hosts.clock.advance(10_001);
    expect(await hosts.host.expire(SESSION)).toBe(true);
    const edge = hosts.edgeSession as Session;
    expect((await edge.wait(submission.id)).status).toBe("succeeded");
    expectFiveOnce(hosts);
    expect(sentBeforeCrash).toBeGreaterThan(0);
    expect((await hosts.host.ownership(SESSION))?.holder).toBe(EDGE_HOLDER);
  });

  it("never sends a mail whose intent the edge has not acknowledged: a partitioned tab waits, the edge sends", async () => {
    const hosts = new TwoHosts(10_000);
    const { linked, disk } = await hosts.openTab();
    await linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
    const submission = await linked.session.submit(REQUEST);
    await linked.flush();
    hosts.partitioned = true;
    await linked.session.resume();
    await settle();
    // Mails go one at a time: the first one's intent is committed here, but its send waits for the edge,
    // which cannot be reached.
    const intents = linked.session
      .view()
      .tasks.filter(
        (t) => (t.input as { name?: string }).name === "send_email" && t.checkpoint.phase === "execute",
      );
    expect(intents.length).toBe(1);
    expect(linked.session.version).toBeGreaterThan(linked.acknowledged);
    expect(hosts.mail.deliveries).toEqual([]);
    disk.kill();
    hosts.clock.advance(10_001);
    expect(await hosts.host.expire(SESSION)).toBe(true);
    const edge = hosts.edgeSession as Session;
    expect((await edge.wait(submission.id)).status).toBe("succeeded");
    expectFiveOnce(hosts);
  });

  it("fences a partitioned tab: once the edge took over, its pushes are refused and its writer closes", async () => {
    const hosts = new TwoHosts(10_000);
    const { linked } = await hosts.openTab();
    await linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
    await linked.flush();
    hosts.partitioned = true;
    await linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", { ...approvedPlan(), body: "edited offline" } as unknown as Json),
    );
    hosts.clock.advance(10_001);
    expect(await hosts.host.expire(SESSION)).toBe(true);
    const edgeVersion = (hosts.edgeSession as Session).version;
    hosts.partitioned = false;
    hosts.timers.advance(8_000); // the tab's retry fires; the edge refuses it
    await settle();
    expect(linked.status).toBe("fenced");
    expect(linked.session.status).toBe("closed");
    // The edge never took the offline edit, and its copy did not move.
    const edge = await hosts.edgeReader();
    expect(edge.version).toBe(edgeVersion);
    expect(edge.view().documents[0]?.value).toMatchObject({ body: "Approved notice" });
  });

  it("a tab that comes back catches up from the edge, shows its result and leads again", async () => {
    const hosts = new TwoHosts();
    const first = await hosts.openTab();
    hosts.mail.onAccepted = (_receipt, count) => {
      if (count === 3) void first.linked.handOff();
    };
    const submission = await startCampaign(first.linked.session);
    await settle();
    hosts.mail.onAccepted = undefined;
    const edge = hosts.edgeSession as Session;
    await edge.wait(submission.id);
    const edgeView = edge.view();
    // The tab returns: its copy is behind; the claim fences the edge writer and the tab applies the rest.
    const second = await hosts.openTab();
    expect(hosts.edgeSession).toBeUndefined();
    expect(second.linked.session.epoch).toBeGreaterThan(edge.epoch);
    expect(second.linked.session.submission(submission.id)?.status).toBe("succeeded");
    expect(comparable({ ...second.linked.session.view(), epoch: 0 })).toEqual(
      comparable({ ...edgeView, epoch: 0 }),
    );
    // It leads again: a new commit reaches the edge.
    await second.linked.session.commit((d) =>
      d.setDocument("note", "email-plan", approvedPlan() as unknown as Json),
    );
    await second.linked.flush();
    const stored = await hosts.edgeReader();
    expect(stored.version).toBe(second.linked.session.version);
    expect(stored.view().documents.map((d) => d.id)).toContain("note");
    expectFiveOnce(hosts);
  });

  it("a tab that comes back after the edge's change log moved past it is given the edge's snapshot, and leads again", async () => {
    const hosts = new TwoHosts(10_000, undefined, undefined, { retainChanges: 100 });
    const first = await hosts.openTab();
    hosts.mail.onAccepted = (_receipt, count) => {
      if (count === 3) void first.linked.handOff();
    };
    const submission = await startCampaign(first.linked.session);
    await settle();
    hosts.mail.onAccepted = undefined;
    const edge = hosts.edgeSession as Session;
    await edge.wait(submission.id);
    const left = first.linked.session.version;
    // The edge lives on long after the tab left: its change log no longer holds what the tab lacks.
    for (let i = 0; i < 300; i++)
      await edge.commit((d) =>
        d.setDocument(`edge-${i % 30}`, "email-plan", approvedPlan() as unknown as Json),
      );
    expect((await hosts.edgeDisk.readChanges(SESSION, 0, 1)).oldestRetained).toBeGreaterThan(left + 1);
    const edgeView = edge.view();
    const second = await hosts.openTab();
    expect(second.linked.session.version).toBe(edgeView.version);
    expect(second.linked.session.submission(submission.id)?.status).toBe("succeeded");
    expect(comparable({ ...second.linked.session.view(), epoch: 0 })).toEqual(
      comparable({ ...edgeView, epoch: 0 }),
    );
    // Its log starts at the snapshot's head; it leads again, and its next commit reaches the edge.
    expect((await second.linked.session.readChanges(0, 1)).oldestRetained).toBe(edgeView.version);
    await second.linked.session.commit((d) =>
      d.setDocument("note", "email-plan", approvedPlan() as unknown as Json),
    );
    await second.linked.flush();
    const stored = await hosts.edgeReader();
    expect(stored.version).toBe(second.linked.session.version);
    expect(stored.view().documents.map((d) => d.id)).toContain("note");
    expectFiveOnce(hosts);
    // A new device (an empty copy) on the same session, after the edge's log moved on again: it is made from
    // the snapshot, with nothing of its own to keep — so even `refuse` takes it.
    await second.linked.handOff();
    await settle();
    const edgeAgain = hosts.edgeSession as Session;
    for (let i = 0; i < 300; i++)
      await edgeAgain.commit((d) =>
        d.setDocument(`later-${i % 30}`, "email-plan", approvedPlan() as unknown as Json),
      );
    hosts.tabDisk = memoryStorage();
    const device = await hosts.openTab("tab-3", { onDiverged: "refuse" });
    expect(device.linked.session.version).toBe(edgeAgain.version);
    expect(device.linked.session.view().documents.map((d) => d.id)).toContain("later-29");
  });

  it("a sleep that began in the tab wakes at the edge with no tab open, once, at its time", async () => {
    const woke: string[] = [];
    const napping = (where: string) => () =>
      createRegistry({
        tasks: [
          defineTask({
            kind: "nap",
            version: 1,
            input: z.null(),
            phases: {
              start: (ctx) => ctx.sleep(ctx.clock.now() + 60_000, "up"),
              up: (ctx) => {
                woke.push(`${where}@${ctx.clock.now()}`);
                return ctx.complete(null);
              },
            },
          }),
        ],
      });
    const hosts = new TwoHosts(10_000, napping("edge"), napping("tab"));
    const { linked, disk } = await hosts.openTab();
    const until = hosts.clock.now() + 60_000;
    const taskId = await linked.session.commit((d) => d.spawn("nap", null));
    await linked.session.resume();
    await settle();
    await linked.flush();
    disk.kill(); // the tab is gone for good; nobody opens it again
    // The lease runs out: the edge takes the session over (its alarm), holding the sleeper as stored.
    hosts.timers.advance(10_001);
    expect(await hosts.edgeAlarm()).toBe(true);
    const edge = hosts.edgeSession as Session;
    expect(edge.task(taskId.value)?.state).toMatchObject({ status: "sleeping", until });
    expect(edge.wakeInfo().nextWakeAt).toBe(until); // what the object points its alarm at
    // At its time the edge wakes it, once.
    hosts.timers.advance(until - hosts.clock.now());
    await settle();
    expect(edge.task(taskId.value)?.state.status).toBe("succeeded");
    expect(woke).toEqual([`edge@${until}`]);
  });

  it("a tab that comes back follows the edge's run live, read-only, and takes it back only when asked", async () => {
    const hosts = new TwoHosts();
    const first = await hosts.openTab();
    hosts.mail.onAccepted = (_receipt, count) => {
      if (count === 2) void first.linked.handOff();
    };
    const submission = await startCampaign(first.linked.session);
    await settle();
    hosts.mail.onAccepted = undefined;
    const edge = hosts.edgeSession as Session;
    const edgeEpoch = edge.epoch;
    // The tab comes back to the session the edge now owns: it follows it, copying the edge's commits.
    const pulled: number[] = [];
    const follower = await followRemote({
      storage: hosts.tabDisk.reopen(),
      remote: hosts.remote,
      id: SESSION,
      clock: hosts.clock,
      timers: hosts.timers,
      everyMs: 500,
      onPulled: (version) => pulled.push(version),
    });
    await edge.wait(submission.id);
    await follower.pull();
    expect(follower.version).toBe(edge.version);
    // Live: what the edge writes next reaches the copy at the follow's next tick, with no call from the tab.
    await edge.commit((d) => d.setDocument("edge-note", "email-plan", approvedPlan() as unknown as Json));
    hosts.timers.advance(500);
    await expect.poll(() => follower.version).toBe(edge.version);
    expect(pulled.length).toBeGreaterThanOrEqual(2);
    expect(pulled.at(-1)).toBe(edge.version);
    const copy = await openSession({
      id: SESSION,
      storage: hosts.tabDisk.reopen(),
      registry: createRegistry({}),
      mode: "read",
    });
    expect(comparable({ ...copy.view(), epoch: 0 })).toEqual(comparable({ ...edge.view(), epoch: 0 }));
    expect(copy.submission(submission.id)?.status).toBe("succeeded");
    await copy.close();
    // Following wrote nothing at the edge and took nothing from it: the edge still owns the session.
    expect(hosts.edgeSession).toBe(edge);
    expect(edge.epoch).toBe(edgeEpoch);
    expect((await hosts.host.ownership(SESSION))?.holder).toBe(EDGE_HOLDER);
    // Asked, the tab takes it back: nothing was left to catch up on, and its commits reach the edge again.
    await follower.stop();
    const second = await hosts.openTab();
    expect(hosts.edgeSession).toBeUndefined();
    expect(second.linked.session.version).toBe(edge.version);
    await second.linked.session.commit((d) =>
      d.setDocument("note", "email-plan", approvedPlan() as unknown as Json),
    );
    await second.linked.flush();
    expect((await hosts.edgeReader()).view().documents.map((d) => d.id)).toContain("note");
    expectFiveOnce(hosts);
  });

  it("a copy holding commits the edge never received and has written past is rebuilt from the edge, its inputs kept", async () => {
    const hosts = new TwoHosts(10_000);
    await divergedTab(hosts, (session) => session.submit({ ...REQUEST, requestId: "offline-1" }));
    const before = (await hosts.tabReader()).version;
    // Asked to refuse: following stops, and the copy is left as it was.
    const refusing = await followRemote({
      storage: hosts.tabDisk.reopen(),
      remote: hosts.remote,
      id: SESSION,
      everyMs: 0,
      onDiverged: "refuse",
    });
    await expect(refusing.pull()).rejects.toBeInstanceOf(ReplicationDivergedError);
    expect((await hosts.tabReader()).version).toBe(before);
    // By default: the Submission given offline is kept (to be given again by whoever leads next), and the
    // copy becomes the edge's.
    const kept: unknown[] = [];
    const follower = await followRemote({
      storage: hosts.tabDisk.reopen(),
      remote: hosts.remote,
      id: SESSION,
      everyMs: 0,
      onRebased: (inputs) => {
        kept.push(...inputs);
      },
    });
    await follower.pull();
    expect(kept).toEqual([
      expect.objectContaining({ kind: "submit", input: expect.objectContaining({ requestId: "offline-1" }) }),
    ]);
    const copy = await hosts.tabReader();
    const edge = hosts.edgeSession as Session;
    expect(copy.version).toBe(edge.version);
    expect(
      copy
        .view()
        .documents.map((d) => d.id)
        .sort(),
    ).toEqual(
      edge
        .view()
        .documents.map((d) => d.id)
        .sort(),
    );
    expect(copy.submissionForRequest("offline-1")).toBeUndefined();
  });

  it("refuses (if asked to) to lead from a copy whose unsent commits the edge has written past, changing nothing", async () => {
    const hosts = new TwoHosts(10_000);
    await divergedTab(hosts, (session) =>
      session.commit((d) => d.setDocument("local", "email-plan", approvedPlan() as unknown as Json)),
    );
    const before = (await hosts.tabReader()).version;
    const error = await hosts.openTab("tab-1", { onDiverged: "refuse" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReplicationDivergedError);
    expect((error as ReplicationDivergedError).version).toBe(2);
    expect((await hosts.tabReader()).version).toBe(before);
    expect(
      (await hosts.edgeReader())
        .view()
        .documents.map((d) => d.id)
        .sort(),
    ).toEqual(["edge-only", "plan"]);
  });

  it("rebases a diverged copy: the edge's history, plus the inputs the lost commits held, given again", async () => {
    const hosts = new TwoHosts(10_000);
    await divergedTab(hosts, async (session) => {
      // Offline: a person's message and a draft, committed here, never received by the edge.
      await session.submit({
        requestId: "offline-1",
        conversationId: "main",
        input: "typed offline",
      });
      const regretted = await session.submit({
        requestId: "offline-2",
        conversationId: "side",
        input: "oops",
      });
      await session.cancelSubmission(regretted.id, "sent by mistake");
      await session.commit((d) => d.setDocument("draft", "email-plan", approvedPlan() as unknown as Json));
    });
    const back = await hosts.openTab();
    const view = back.linked.session.view();
    // The edge's history is kept; the lost draft is gone; the person's message is there again, once.
    expect(view.documents.map((d) => d.id).sort()).toEqual(["edge-only", "plan"]);
    expect(back.linked.session.submissionForRequest("offline-1")?.input).toBe("typed offline");
    expect(view.submissions.filter((s) => s.requestId === "offline-1")).toHaveLength(1);

    await back.linked.flush();
    const edge = await hosts.edgeReader();
    expect(edge.submissionForRequest("offline-1")).toBeDefined();
    expect(comparable(edge.view())).toEqual(comparable(back.linked.session.view()));
    // One cancelled offline stays cancelled, and is never run: no task under it was ever started.
    await back.linked.session.resume();
    const again = back.linked.session.submissionForRequest("offline-2");
    expect((await back.linked.session.wait(again?.id ?? "")).status).toBe("cancelled");
    const { changes } = await back.linked.session.readChanges(0, 10_000);
    const under = changes.flatMap((c) => c.tasks.filter((t) => t.id.startsWith(`${again?.taskId}/`)));
    expect(under).toEqual([]);
  });

  it("a follower's rebuilt copy gives its inputs again through the durable inbox; one cancelled offline is accepted cancelled and never runs", async () => {
    const hosts = new TwoHosts(10_000);
    await divergedTab(hosts, async (session) => {
      await session.submit({ requestId: "offline-1", conversationId: "main", input: "typed offline" });
      const regretted = await session.submit({
        requestId: "offline-2",
        conversationId: "side",
        input: "oops",
      });
      await session.cancelSubmission(regretted.id, "sent by mistake");
    });
    // The edge writes past the tab's unsent commits.
    for (let i = 0; i < 4; i++)
      await (hosts.edgeSession as Session).commit((d) =>
        d.setDocument(`edge-${i}`, "email-plan", approvedPlan() as unknown as Json),
      );
    // The tab comes back as a follower of the edge: the kept inputs go to the durable inbox before the copy
    // is rebuilt.
    const inbox = new DurableInbox(`inbox-${crypto.randomUUID()}`);
    const follower = await followRemote({
      storage: hosts.tabDisk.reopen(),
      remote: hosts.remote,
      id: SESSION,
      everyMs: 0,
      onRebased: async (inputs) => {
        for (const input of inputs) await inbox.put(SESSION, inboxRowOf(input));
      },
    });
    await follower.pull();
    await follower.stop();
    const rows = await inbox.pending(SESSION);
    expect(rows).toHaveLength(2);
    expect(rows).toContainEqual({
      requestId: "offline-2",
      conversationId: "side",
      input: "oops",
      cancelled: "sent by mistake",
    });
    // A tab leads again and drains the inbox, as the worker's leader does.
    const back = await hosts.openTab();
    const session = back.linked.session;
    const before = session.version;
    for (const row of rows) {
      await acceptInboxRow(session, row);
      await inbox.remove(SESSION, row);
    }
    expect(await inbox.pending(SESSION)).toEqual([]);
    await session.resume();
    const kept = session.submissionForRequest("offline-1");
    expect((await session.wait(kept?.id ?? "")).status).toBe("succeeded");
    const regretted = session.submissionForRequest("offline-2");
    expect(regretted?.status).toBe("cancelled");
    // Accepted cancelled in one commit: no commit after the drain shows it, or its task, as anything else.
    const { changes } = await session.readChanges(before, 1_000);
    const states = changes.flatMap((commit) => {
      return [
        ...commit.submissions.filter((s) => s.requestId === "offline-2").map((s) => s.status),
        ...commit.tasks.filter((t) => t.submissionId === regretted?.id).map((t) => t.state.status),
      ];
    });
    expect(states.length).toBeGreaterThan(0);
    expect(states.every((status) => status === "cancelled")).toBe(true);
    // Given again, the same input returns that Submission as it is.
    expect((await session.submit({ requestId: "offline-2", conversationId: "side", input: "oops" })).id).toBe(
      regretted?.id,
    );
    await inbox.close();
  });

  it("gives again a cancel made offline of a Submission the edge already had", async () => {
    const hosts = new TwoHosts(10_000);
    const first = await hosts.openTab();
    const tab = first.linked.session;
    // The campaign waits for approval (a draft plan): the edge has its Submission, running.
    await tab.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
    const submission = await tab.submit(REQUEST);
    await tab.resume();
    await settle();
    await first.linked.flush();
    expect((await hosts.edgeReader()).submissionForRequest(REQUEST.requestId)?.status).toBe("running");
    // Cut off, the person cancels it; the tab dies and the edge takes over, where it still runs.
    hosts.partitioned = true;
    await tab.cancelSubmission(submission.id, "changed my mind");
    await settle();
    expect(tab.submission(submission.id)?.status).toBe("cancelled");
    first.disk.kill();
    hosts.clock.advance(10_001);
    await hosts.host.expire(SESSION);
    const edge = hosts.edgeSession as Session;
    await edge.commit((d) => d.setDocument("edge-only", "email-plan", approvedPlan() as unknown as Json));
    expect(edge.submissionForRequest(REQUEST.requestId)?.status).toBe("running");
    hosts.partitioned = false;
    // Taken back: the copy is rebuilt from the edge, and the cancel is given again.
    const back = await hosts.openTab();
    await back.linked.session.resume();
    const again = back.linked.session.submissionForRequest(REQUEST.requestId);
    expect((await back.linked.session.wait(again?.id ?? "")).status).toBe("cancelled");
    expect(hosts.mail.deliveries).toEqual([]);
  });

  it("gives again what was typed offline when a Submission those commits touched was since removed by the edge's retention", async () => {
    const hosts = new TwoHosts(10_000);
    const first = await hosts.openTab();
    const tab = first.linked.session;
    await tab.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
    const submission = await tab.submit(REQUEST);
    await tab.resume();
    await settle();
    await first.linked.flush();
    // Cut off, the person cancels the campaign and types a new message; the tab dies.
    hosts.partitioned = true;
    await tab.cancelSubmission(submission.id, "changed my mind");
    await tab.submit({ requestId: "offline-2", conversationId: "side", input: "typed offline" });
    await settle();
    first.disk.kill();
    hosts.clock.advance(10_001);
    await hosts.host.expire(SESSION);
    // The edge ends the campaign itself, and its retention removes it (its requestId stays indexed).
    const edge = hosts.edgeSession as Session;
    await edge.cancelSubmission(submission.id, "cancelled at the edge");
    await edge.whenIdle();
    await edge.close();
    const collecting = await openSession({
      id: SESSION,
      storage: hosts.edgeDisk.reopen(),
      registry: campaignRegistry(hosts.mail),
      host: "edge",
      clock: hosts.clock,
      timers: hosts.timers,
      ids: sequentialIds(900_000),
      retainSettled: 0,
      retention: { keepSettled: 0, auto: false },
    });
    expect((await collecting.collect()).removed.map((item) => item.id)).toEqual([submission.id]);
    await collecting.close();
    hosts.partitioned = false;
    // Taken back: the message typed offline is given again; the removed campaign is not run again.
    const back = await hosts.openTab();
    const session = back.linked.session;
    expect(session.submissionForRequest("offline-2")?.input).toBe("typed offline");
    expect(session.view().submissions.filter((s) => s.requestId === REQUEST.requestId)).toEqual([]);
    expect(await session.readSubmissionForRequest(REQUEST.requestId)).toBeUndefined();
    await back.linked.flush();
    const reader = await hosts.edgeReader();
    expect(comparable(reader.view())).toEqual(comparable(session.view()));
    expect(hosts.mail.deliveries).toEqual([]);
  });

  it("hands a rebase's inputs to onRebased before discarding the copy, so a tab that cannot continue the edge's run loses none", async () => {
    // The tab runs older code: no campaign task (the edge, deployed since, starts one).
    const older = () => createRegistry({ ...createAgent({ model: campaignModel(), tools: [] }) });
    const hosts = new TwoHosts(10_000, (mail) => campaignRegistry(mail), older);
    await divergedTab(hosts, (session) =>
      session.submit({ requestId: "offline-1", conversationId: "side", input: "typed offline" }),
    );
    const edge = hosts.edgeSession as Session;
    await edge.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
    await edge.submit(REQUEST); // waits for the plan's approval
    await edge.whenIdle();
    const kept: LocalInput[] = [];
    const linking = hosts.openTab("tab-1", { onRebased: (inputs) => void kept.push(...inputs) });
    await expect(linking).rejects.toMatchObject({ name: "EnvironmentError" });
    // The copy is the edge's now; what was typed offline is in the caller's hands, not lost.
    expect(kept).toEqual([
      {
        kind: "submit",
        input: { requestId: "offline-1", conversationId: "side", input: "typed offline" },
      },
    ]);
    // The copy was rebuilt from the edge (the kept inputs are for whoever leads next to give again).
    const copy = await openSession({ id: SESSION, storage: hosts.tabDisk, registry: older(), mode: "read" });
    const edgeCopy = await hosts.edgeReader();
    expect(copy.version).toBe(edgeCopy.version);
    expect(copy.submissionForRequest("offline-1")).toBeUndefined();
  });

  it("gives again an offline cancel the tab died before carrying out, of a Submission the edge already had", async () => {
    const hosts = new TwoHosts(10_000);
    const first = await hosts.openTab();
    const tab = first.linked.session;
    await tab.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
    const submission = await tab.submit(REQUEST);
    await first.linked.flush(); // the edge has the Submission (its campaign will wait for approval)
    // Cut off, the plan is approved and the campaign starts; its first mail waits for the edge to hold its
    // intent, which never comes.
    hosts.partitioned = true;
    await tab.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
    await tab.resume();
    await settle();
    // The person cancels; the tab dies before the running phases end and the cancel is carried out.
    await tab.cancelSubmission(submission.id, "changed my mind");
    first.disk.kill();
    const root = tab.view().tasks.find((t) => t.submissionId === submission.id && t.parentId === undefined);
    expect(root?.cancelRequested).toBe("changed my mind");
    expect(tab.submission(submission.id)?.status).toBe("running");
    hosts.clock.advance(10_001);
    await hosts.host.expire(SESSION);
    const edge = hosts.edgeSession as Session;
    await edge.commit((d) => d.setDocument("edge-only", "email-plan", draftPlan() as unknown as Json));
    await settle();
    expect(edge.submissionForRequest(REQUEST.requestId)?.status).toBe("running"); // awaiting approval
    hosts.partitioned = false;
    // Taken back: the copy is rebuilt from the edge, and the cancel is given again.
    const back = await hosts.openTab();
    await back.linked.session.resume();
    await settle();
    expect(back.linked.session.submissionForRequest(REQUEST.requestId)?.status).toBe("cancelled");
    expect(hosts.mail.deliveries).toEqual([]);
  });

  it("never lets an effect through on an acknowledgement older than the lease can vouch for", async () => {
    const hosts = new TwoHosts(10_000);
    const { linked } = await hosts.openTab();
    await linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
    await linked.flush();
    const version = linked.session.version;
    // Connected: an old acknowledgement is renewed by a push before the effect may start.
    hosts.clock.advance(8_000);
    let renewed = false;
    void linked.replicated(version).then(() => (renewed = true));
    await settle();
    expect(renewed).toBe(true);
    // Cut off: the acknowledgement ages past three quarters of the lease; the gate holds, the edge takes over.
    hosts.partitioned = true;
    hosts.clock.advance(8_000);
    let outcome: unknown = "pending";
    linked.replicated(version).then(
      () => (outcome = "passed"),
      (error: unknown) => (outcome = error),
    );
    await settle();
    expect(outcome).toBe("pending");
    hosts.clock.advance(2_001);
    expect(await hosts.host.expire(SESSION)).toBe(true);
    hosts.partitioned = false;
    hosts.timers.advance(1_000); // the tab's retry reaches the edge, which refuses it
    await settle();
    expect(outcome).toBeInstanceOf(OwnedElsewhereError);
    expect(linked.status).toBe("fenced");
  });

  it("pushes a long offline stretch in order once the link returns (more than it keeps in memory)", async () => {
    const hosts = new TwoHosts(1_000_000);
    const { linked } = await hosts.openTab();
    await linked.flush();
    hosts.partitioned = true;
    for (let i = 0; i < 1_200; i++)
      await linked.session.commit((d) => d.appendEntry("log", { kind: "note", text: `offline ${i}` }));
    hosts.partitioned = false;
    for (let i = 0; i < 10 && linked.acknowledged < linked.session.version; i++) {
      hosts.timers.advance(10_000);
      await settle(40);
    }
    expect(linked.status).toBe("leading");
    expect(linked.acknowledged).toBe(linked.session.version);
    const edge = await hosts.edgeReader();
    expect(edge.version).toBe(linked.session.version);
    expect((await edge.readEntries("log", 0)).map((e) => (e.content as { text: string }).text).at(-1)).toBe(
      "offline 1199",
    );
  });

  it("a tab closed after a long offline stretch its own change log pruned comes back ahead and pushes it, nothing discarded", async () => {
    const hosts = new TwoHosts(10_000);
    hosts.tabDisk = memoryStorage({ retainChanges: 10 });
    const first = await hosts.openTab();
    await first.linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
    await first.linked.flush();
    hosts.partitioned = true;
    // Offline: more commits than the tab's log keeps (it prunes all but the unacknowledged ones).
    for (let i = 0; i < 300; i++)
      await first.linked.session.commit((d) => d.appendEntry("log", { kind: "note", text: `offline ${i}` }));
    const version = first.linked.session.version;
    await first.linked.close();
    hosts.partitioned = false;
    // Reopened while its lease stands: the edge never wrote, so this copy is ahead, not diverged.
    const back = await hosts.openTab();
    expect(back.linked.session.version).toBe(version);
    expect((await back.linked.session.readEntries("log", 0)).map((e) => e.content)).toHaveLength(300);
    await back.linked.flush();
    const edge = await hosts.edgeReader();
    expect(edge.version).toBe(version);
    expect(comparable(edge.view())).toEqual(comparable(back.linked.session.view()));
  });

  it("stops renewing the lease once the local writer has stopped, so the edge takes over", async () => {
    const hosts = new TwoHosts(10_000);
    const { linked, disk } = await hosts.openTab();
    await linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
    await linked.flush();
    disk.kill(); // the tab's store fails (its disk is full, say); the writer stops on its next commit
    await expect(
      linked.session.commit((d) => d.setDocument("x", "email-plan", approvedPlan() as unknown as Json)),
    ).rejects.toThrow();
    await settle();
    expect(linked.status).toBe("closed");
    for (let step = 0; step < 20; step++) {
      hosts.timers.advance(600);
      await settle(3);
    }
    expect(await hosts.host.expire(SESSION)).toBe(true);
  });

  it("refuses a second tab while the first holds the lease, naming the holder", async () => {
    const hosts = new TwoHosts(10_000);
    await hosts.openTab("tab-1");
    const error = await hosts.openTab("tab-2").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OwnedElsewhereError);
    expect((error as OwnedElsewhereError).holder).toBe("tab-1");
  });

  it("refuses a malformed push by field and stores nothing", async () => {
    const hosts = new TwoHosts();
    const { linked } = await hosts.openTab();
    await linked.flush();
    const before = (await hosts.edgeReader()).version;
    const bad = { version: before + 1, epoch: linked.epoch, at: "yesterday" };
    const error = await hosts.host
      .push(SESSION, { holder: "tab-1", epoch: linked.epoch, commits: [bad as never] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).issues[0]?.path).toBe("commits.0");
    expect((await hosts.edgeReader()).version).toBe(before);
    const stale = await hosts.host
      .push(SESSION, { holder: "tab-2", epoch: linked.epoch, commits: [] })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(OwnedElsewhereError);
  });
});

describe("rebasing a diverged copy", () => {
  /** Signals of `answer:*` keys, kept when they come before their wait. */
  const answers = createRegistry({
    signals: [defineSignal({ key: "answer:*", schema: z.object({ text: z.string() }) })],
  });
  /** Rebuilds the session "lost" of `storage`, at `version`, from `remote` (nothing, by default). */
  const rebaseLost = (
    storage: ReturnType<typeof memoryStorage>,
    version: number,
    remote: {
      changes(after: number, limit: number): Promise<{ changes: unknown[]; oldestRetained: number }>;
    } = {
      changes: async () => ({ changes: [], oldestRetained: 1 }),
    },
    common = 0,
  ) =>
    rebaseDiverged(
      storage,
      remote,
      "lost",
      version,
      undefined,
      new ReplicationDivergedError("diverged", common),
      undefined,
      () => storage.open("lost", { mode: "write", at: 0, entryTail: 0, settled: 0, epoch: 0 }),
    );

  it("keeps a Submission's cancel, not one of a task below its root (a child cancelled alone)", async () => {
    const storage = memoryStorage();
    const registry = createRegistry({ ...createAgent({ model: scriptedModel([{ text: "ok" }]) }) });
    const session = await openSession({ id: "lost", storage, registry, ids: sequentialIds() });
    const kept = await session.submit({ requestId: "kept", conversationId: "main", input: "one" });
    const dropped = await session.submit({ requestId: "dropped", conversationId: "main", input: "two" });
    const child = (submission: Submission, cancelRequested: string) => ({
      ...demoTask(`${submission.taskId}/child`),
      parentId: submission.taskId,
      childIndex: 0,
      submissionId: submission.id,
      cancelRequested,
    });
    await commitAsKernel(session, (d) => {
      d.writeTask(created(d, child(kept, `parent ${kept.taskId} failed`)));
      d.writeTask(created(d, child(dropped, "cancelled by request")));
      const root = d.task(dropped.taskId as string) as Task;
      d.writeTask({ ...root, cancelRequested: "cancelled by request" });
    });
    await session.close();
    // The other host never got any of it: the whole copy is given again.
    const { inputs } = await rebaseLost(storage, 3);
    expect(inputs.map((i) => (i.kind === "submit" ? [i.input.requestId, i.cancelled] : []))).toEqual([
      ["kept", undefined],
      ["dropped", "cancelled by request"],
    ]);
  });

  it("gives a signal sent again after a drop, never the dropped one; one dropped for good is not given", async () => {
    const storage = memoryStorage();
    const session = await openSession({ id: "lost", storage, registry: answers, ids: sequentialIds() });
    await session.signal("answer:1", { text: "old" }, { requestId: "r-old" });
    await session.signal("answer:2", { text: "gone" }, { requestId: "r-gone" });
    await session.dropEarlySignal("answer:1");
    await session.signal("answer:1", { text: "new" }, { requestId: "r-new" });
    await session.dropEarlySignal("answer:2");
    const version = session.version;
    await session.close();
    const { inputs } = await rebaseLost(storage, version);
    expect(inputs).toEqual([
      { kind: "signal", key: "answer:1", payload: { text: "new" }, requestId: "r-new" },
    ]);
  });

  it("drops again, in the rebuilt copy, an early signal both copies hold that a discarded commit dropped", async () => {
    const storage = memoryStorage();
    const session = await openSession({ id: "lost", storage, registry: answers, ids: sequentialIds() });
    const shared = await session.signal("answer:1", { text: "both" }, { requestId: "r-both" });
    await session.signal("answer:2", { text: "kept" }, { requestId: "r-kept" });
    const common = session.version; // the other host holds these commits
    const history = (await storage.readChanges("lost", 0, 100)).changes.map((c) => c.value as CommitRecord);
    // Then, on this copy only: the drop, and a new signal of the dropped key after it.
    await session.dropEarlySignal("answer:1");
    await session.signal("answer:1", { text: "after" }, { requestId: "r-after" });
    const version = session.version;
    await session.close();
    const remote = {
      changes: async (after: number) => ({
        changes: history.filter((c) => c.version > after),
        oldestRetained: 1,
      }),
    };
    const { inputs } = await rebaseLost(storage, version, remote, common);
    expect(inputs).toEqual([
      { kind: "drop", key: "answer:1", version: shared.signal.version, requestId: shared.signal.requestId },
      { kind: "signal", key: "answer:1", payload: { text: "after" }, requestId: "r-after" },
    ]);
    // Through a tab's inbox too: the row asks the leader to drop that same signal.
    expect(inboxRowOf(inputs[0] as LocalInput)).toMatchObject({
      drop: { key: "answer:1", version: shared.signal.version },
    });
    const rebuilt = await openSession({ id: "lost", storage, registry: answers, ids: sequentialIds() });
    expect(rebuilt.earlySignals().map((s) => s.requestId)).toEqual(["r-both", "r-kept"]);
    await replayInputs(rebuilt, inputs);
    // What this copy had when it was cut off: the shared one dropped, the new one kept, the other untouched.
    expect(rebuilt.earlySignals().map((s) => [s.key, s.requestId])).toEqual([
      ["answer:2", "r-kept"],
      ["answer:1", "r-after"],
    ]);
    await rebuilt.close();
  });

  it("finds the version both copies share further back than one window, and drops again what a discarded commit dropped", async () => {
    // Both copies hold the first commit (the signal); then each writes more than one look back (256
    // versions) covers, the other host under a newer owner.
    const storage = memoryStorage();
    const other = memoryStorage();
    // One clock for both: their first commits are one commit (same version, epoch and time), as a copy's is.
    const clock = new ManualClock(1_000);
    const open = (store: ReturnType<typeof memoryStorage>) =>
      openSession({ id: "lost", storage: store, registry: answers, ids: sequentialIds(), clock });
    const notes = async (session: Session, count: number) => {
      for (let i = 0; i < count; i++)
        await session.commit((d) => d.appendEntry("log", { kind: "note", text: `note ${i}` }));
    };
    const session = await open(storage);
    const shared = await session.signal("answer:1", { text: "both" }, { requestId: "r-both" });
    const first = await open(other);
    await first.signal("answer:1", { text: "both" }, { requestId: "r-both" });
    await first.close();
    const taken = await open(other); // a newer owner
    await notes(taken, 300);
    await taken.close();
    // On this copy only: the drop, then its own notes.
    await session.dropEarlySignal("answer:1");
    await notes(session, 300);
    const version = session.version;
    await session.close();
    const remote = {
      changes: async (after: number, limit: number) => ({
        changes: (await other.readChanges("lost", after, limit)).changes.map((c) => c.value),
        oldestRetained: 1,
      }),
    };
    const { inputs } = await rebaseLost(storage, version, remote, shared.signal.version);
    // Which signal it dropped, by its requestId too (recorded with the drop).
    expect(inputs).toEqual([
      { kind: "drop", key: "answer:1", version: shared.signal.version, requestId: shared.signal.requestId },
    ]);
    const rebuilt = await open(storage);
    expect(rebuilt.earlySignals().map((s) => s.requestId)).toEqual(["r-both"]);
    await replayInputs(rebuilt, inputs);
    expect(rebuilt.earlySignals()).toEqual([]);
    await rebuilt.close();
  });
});
