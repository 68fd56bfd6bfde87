/**
 * The seeded two-host simulation (issue 21): the five-email run on a tab linked to its edge, with the link
 * cut and healed, either side killed, hand-offs, expired leases and claims back at seeded random points.
 * Invariants after every run: the edge's history is one version sequence whose epochs never go back (never
 * two writers interleaved), every version acknowledged to a tab is in it with that tab's commit, each mail
 * was delivered exactly once and no operation was sent a second time without a lookup first, the run ended,
 * and a tab that links again holds exactly the edge's view.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { approvedPlan, campaignRegistry, RECIPIENTS } from "../../examples/five-emails/app.ts";
import {
  type CommitRecord,
  defineTool,
  executePlacedCalls,
  type Json,
  type LinkedSession,
  memoryStorage,
  OwnedElsewhereError,
  ReplicationDivergedError,
  type SessionView,
  takePlacedCalls,
} from "../../src/index.ts";
import type { CrashingStorage } from "../../src/testing/index.ts";
import { rng } from "../support/task-simulation.ts";
import { SESSION, TwoHosts } from "../support/two-hosts.ts";

const LEASE_MS = 5_000;
const REQUEST = { requestId: "notice-1", conversationId: "main", input: "Send the approved notice" };
/** A call only a browser can run, asked in the same session: the tab runs it, or an executor does. */
const STAMP = { requestId: "stamp-1", conversationId: "stamp", input: "Stamp the page" };

/** The page stamp's effects by operation id, and every call to it (a lookup is how recovery confirms). */
class Stamps {
  readonly applied = new Map<string, number>();
  readonly log: { op: "run" | "lookup"; id: string }[] = [];
  tool() {
    return defineTool({
      name: "stamp_page",
      description: "Stamps the page (only a browser can)",
      input: z.object({}),
      replay: "unsafe",
      runsOn: "browser",
      confirm: (id) => {
        this.log.push({ op: "lookup", id });
        return this.applied.has(id) ? { stampedBy: "confirmed" } : undefined;
      },
      execute: (_args, { operationId }) => {
        this.log.push({ op: "run", id: operationId });
        this.applied.set(operationId, (this.applied.get(operationId) ?? 0) + 1);
        return { stampedBy: operationId };
      },
    });
  }
}

const settle = async (rounds: number) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

type Tab = { linked: LinkedSession; disk: CrashingStorage } | undefined;
const leading = (tab: Tab) => tab !== undefined && !tab.disk.isDead && tab.linked.status === "leading";

/** A tab that leads resumes its work and takes the calls that waited for a browser, as the browser host does. */
async function resumeTab(tab: NonNullable<Tab>): Promise<void> {
  await tab.linked.session.resume().catch(() => undefined);
  await takePlacedCalls(tab.linked.session, "browser").catch(() => undefined);
}

/** Links a tab again: a copy that diverged is discarded first (its unsent commits were never acknowledged). */
async function relink(hosts: TwoHosts): Promise<Tab> {
  try {
    return await hosts.openTab();
  } catch (error) {
    if (!(error instanceof ReplicationDivergedError)) return undefined; // another holder's lease, the link down
    hosts.tabDisk = memoryStorage();
    return hosts.openTab().catch(() => undefined);
  }
}

async function simulate(seed: number) {
  const random = rng(seed);
  const stamps = new Stamps();
  const registry = (mail: Parameters<typeof campaignRegistry>[0]) =>
    campaignRegistry(mail, undefined, stamps.tool());
  const hosts = new TwoHosts(LEASE_MS, registry, registry);
  let executors = 0;
  /** An executor (another tab, say) takes the calls waiting at the edge for a browser, if the edge leads. */
  const execute = async () => {
    const edge = hosts.edgeSession;
    if (!edge || hosts.partitioned) return false;
    await executePlacedCalls(
      {
        pending: () => edge.pending(),
        signal: (key, payload, options) => edge.signal(key, payload, options),
      },
      {
        host: "browser",
        executor: `executor-${++executors}`,
        tools: [stamps.tool()],
        leaseMs: LEASE_MS,
        acceptWaitMs: 100,
      },
    ).catch(() => undefined); // the edge died under it: the call follows its rules with whoever is next
    return true;
  };
  const events: string[] = [];
  const acknowledged: { version: number; epoch: number }[] = [];
  let tab: Tab = await hosts.openTab();
  // Moves that land inside the run: right after a seeded tab commit or a seeded mail being accepted.
  const inRun: (() => void)[] = [
    () => {
      hosts.partitioned = true;
      events.push("cut (in run)");
    },
    () => {
      tab?.disk.kill();
      events.push("kill tab (in run)");
    },
    () => {
      if (leading(tab)) void tab?.linked.handOff().catch(() => undefined);
      events.push("hand off (in run)");
    },
    () => {
      hosts.killEdge();
      events.push("kill edge (in run)");
    },
  ];
  const atCommit = new Map<number, () => void>();
  const atSend = new Map<number, () => void>();
  for (let n = random.int(3); n >= 0; n--) {
    const move = inRun[random.int(inRun.length)] as () => void;
    if (random.chance(0.5)) atCommit.set(3 + random.int(12), move);
    else atSend.set(1 + random.int(5), move);
  }
  hosts.onTabCommit = (count) => atCommit.get(count)?.();
  hosts.mail.onAccepted = (_receipt, count) => atSend.get(count)?.();
  const first = tab.linked.session;
  await first.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
  const submission = await first.submit(REQUEST);
  await first.submit(STAMP);
  void first.resume();

  const noteAcknowledged = async () => {
    if (!tab || tab.disk.isDead || tab.linked.acknowledged === 0) return;
    const version = tab.linked.acknowledged;
    const commit = (await hosts.tabDisk.readChanges(SESSION, version - 1, 1)).changes[0]?.value as
      | CommitRecord
      | undefined;
    if (commit?.version === version) acknowledged.push({ version, epoch: commit.epoch });
  };

  for (let step = 0; step < 14; step++) {
    await settle(1 + random.int(6));
    await noteAcknowledged();
    const roll = random.int(9);
    if (roll === 0) {
      hosts.partitioned = !hosts.partitioned;
      events.push(hosts.partitioned ? "cut" : "heal");
    } else if (roll === 1 && tab && !tab.disk.isDead) {
      tab.disk.kill();
      events.push("kill tab");
    } else if (roll === 2 && leading(tab) && !hosts.partitioned) {
      await tab?.linked.handOff().catch(() => undefined);
      events.push("hand off");
    } else if (roll === 3) {
      hosts.timers.advance(LEASE_MS + 1);
      events.push(`lease runs out → edge ${(await hosts.edgeAlarm()) ? "writes" : "waits"}`);
    } else if (roll === 4 && hosts.edgeSession) {
      hosts.killEdge();
      events.push("kill edge");
    } else if (roll === 5) {
      events.push(`edge alarm → ${(await hosts.edgeAlarm()) ? "writes" : "waits"}`);
    } else if (roll === 7) {
      events.push((await execute()) ? "executor at the edge" : "no executor");
    } else if (roll === 6 && !leading(tab) && !hosts.partitioned) {
      tab = await relink(hosts);
      if (tab) void resumeTab(tab);
      events.push(tab ? "tab claims back" : "tab claim refused");
    } else {
      hosts.timers.advance(1 + random.int(2_000));
    }
  }

  // Heal everything and let whoever holds the session finish the run.
  hosts.onTabCommit = undefined;
  hosts.mail.onAccepted = undefined;
  hosts.partitioned = false;
  let ended: SessionView["submissions"][number] | undefined;
  for (let round = 0; round < 30 && ended === undefined; round++) {
    // Time passes as it does for a live tab: its batched pushes and renewals run between the steps, so only
    // a dead or cut-off tab loses its lease here.
    for (let step = 0; step < 20; step++) {
      hosts.timers.advance((LEASE_MS + 1) / 20);
      await settle(3);
    }
    await hosts.edgeAlarm();
    await settle(20);
    await noteAcknowledged();
    const holder = leading(tab) ? tab?.linked.session : hosts.edgeSession;
    // By requestId: a request given again after a rebase is a new Submission for the same request.
    const state = await holder?.readSubmissionForRequest(REQUEST.requestId);
    const stamp = await holder?.readSubmissionForRequest(STAMP.requestId);
    const over = (s: typeof state) => s?.status === "succeeded" || s?.status === "failed";
    if (over(state) && over(stamp)) ended = state;
    // While the edge leads, the page stamp waits for a browser: an executor takes it.
    if (!leading(tab) && over(state) && !over(stamp)) await execute();
    // The edge never received the request (the tab died before pushing it): the person comes back to
    // the tab, whose copy still holds it; linking again gives it to the edge's history.
    if (!state && !leading(tab) && round % 3 === 2) {
      tab = await relink(hosts);
      if (tab) void resumeTab(tab);
      events.push(tab ? "tab back for its unsent request" : "tab claim refused");
    }
  }
  // A tab cut off while the edge took over learns it at its next push: this one (fenced, it stops).
  if (leading(tab))
    await tab?.linked.flush().catch((error: unknown) => {
      if (!(error instanceof OwnedElsewhereError)) throw error;
      events.push("tab learns it was fenced");
    });
  return { hosts, events, acknowledged, submission, ended, tab, stamps };
}

describe("two-host simulation: partitions, kills, hand-offs, claims back", () => {
  it("keeps one history, every acknowledged commit, every mail once, and converging views (200 seeds)", async () => {
    let handOffs = 0;
    let takeOvers = 0;
    let claimsBack = 0;
    let executorRuns = 0;
    for (let seed = 1; seed <= 200; seed++) {
      const { hosts, events, acknowledged, ended, stamps } = await simulate(seed);
      const label = `seed ${seed}: ${events.join(", ")}`;
      handOffs += events.filter((e) => e === "hand off").length;
      takeOvers += events.filter((e) => e.endsWith("edge writes")).length;
      claimsBack += events.filter((e) => e === "tab claims back").length;

      // One history: versions 1..n, epochs never going back.
      const log = (await hosts.edgeDisk.readChanges(SESSION, 0, 100_000)).changes.map(
        (c) => c.value as CommitRecord,
      );
      expect(
        log.map((c) => c.version),
        label,
      ).toEqual(log.map((_, i) => i + 1));
      for (let i = 1; i < log.length; i++)
        expect((log[i] as CommitRecord).epoch, label).toBeGreaterThanOrEqual(
          (log[i - 1] as CommitRecord).epoch,
        );
      // Nothing acknowledged to a tab was lost or replaced.
      for (const { version, epoch } of acknowledged) expect(log[version - 1]?.epoch, label).toBe(epoch);

      // The run ended, with each mail delivered once; a repeated send always followed a lookup.
      expect(ended?.status, label).toBe("succeeded");
      const counts = hosts.mail.deliveryCounts();
      expect([...counts.keys()].sort(), label).toEqual([...RECIPIENTS].sort());
      expect([...counts.values()], label).toEqual([1, 1, 1, 1, 1]);
      const sent = new Set<string>();
      const looked = new Set<string>();
      for (const entry of hosts.mail.log) {
        if (entry.op === "lookup") looked.add(entry.operationId);
        else {
          if (sent.has(entry.operationId)) expect(looked.has(entry.operationId), label).toBe(true);
          sent.add(entry.operationId);
        }
      }

      // The page stamp ended too, its effect taken once, never run again without a lookup first; when an
      // executor ran it, the edge's history holds its marks in order: accepted, completed, applied.
      const stampState = (await hosts.edgeReader())
        .view()
        .submissions.find((x) => x.requestId === STAMP.requestId);
      expect(stampState?.status, label).toBe("succeeded");
      expect([...stamps.applied.values()], label).toEqual([1]);
      const stampRuns = new Set<string>();
      const stampLooked = new Set<string>();
      for (const entry of stamps.log) {
        if (entry.op === "lookup") stampLooked.add(entry.id);
        else {
          if (stampRuns.has(entry.id)) expect(stampLooked.has(entry.id), label).toBe(true);
          stampRuns.add(entry.id);
        }
      }
      const stampTask = log
        .flatMap((c) => c.tasks)
        .findLast((t) => (t.input as { name?: string }).name === "stamp_page");
      const byExecutor = (stampTask?.state as { result?: { executor?: string } } | undefined)?.result
        ?.executor;
      if (byExecutor !== undefined) {
        executorRuns++;
        const accepted = log.findLastIndex((c) =>
          c.tasks.some(
            (t) =>
              t.id === stampTask?.id &&
              t.state.status === "awaiting" &&
              (t.state.about as { acceptedBy?: string } | undefined)?.acceptedBy === byExecutor,
          ),
        );
        const completed = log.findIndex((c) =>
          (c.signals ?? []).some(
            (x) =>
              x.key.startsWith(`done:${stampTask?.id}:`) &&
              (x.payload as { executor?: string }).executor === byExecutor,
          ),
        );
        const applied = log.findIndex((c) =>
          c.entries.some((e) => e.content.kind === "tool-result" && e.taskId === stampTask?.id),
        );
        expect(accepted, label).toBeGreaterThan(-1);
        expect(completed, label).toBeGreaterThan(accepted);
        expect(applied, label).toBeGreaterThan(completed);
      }

      // A tab that links now holds exactly the edge's copy.
      hosts.timers.advance(LEASE_MS + 1);
      await hosts.edgeAlarm();
      await settle(10);
      const final = await relink(hosts);
      expect(final, label).toBeDefined();
      await final?.linked.flush();
      const edge = await hosts.edgeReader();
      const { limits: _a, ...theirs } = edge.view();
      const { limits: _b, ...mine } = (final as NonNullable<Tab>).linked.session.view();
      expect(mine, label).toEqual(theirs);
      const finalState = await final?.linked.session.readSubmissionForRequest(REQUEST.requestId);
      expect(finalState?.status, label).toBe("succeeded");
      await final?.linked.close();
    }
    // The seeds cover every kind of move.
    expect(handOffs).toBeGreaterThan(20);
    expect(takeOvers).toBeGreaterThan(20);
    expect(claimsBack).toBeGreaterThan(20);
    expect(executorRuns).toBeGreaterThan(20);
  }, 120_000);
});
