/**
 * One session on two real hosts (issue 21): a tab's copy (here a Node process with its own store, speaking
 * the edge HTTP API) leads, and the shipped edge example on workerd follows, then takes over — handed the
 * run mid-send, or on its own alarm when the tab dies and its lease runs out — and hands it back.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approvedPlan, asyncCampaignRegistry, RECIPIENTS } from "../../examples/five-emails/app.ts";
import type { Receipt } from "../../examples/five-emails/mail-service.ts";
import {
  edgeReplica,
  followRemote,
  type Json,
  type LinkedSession,
  linkSession,
  type MemoryStorage,
  memoryStorage,
  type Submission,
} from "../../src/index.ts";
import { MAX_CHANGES_BYTES } from "../../src/replication/protocol.ts";
import { CrashingStorage } from "../../src/testing/index.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const LEASE_MS = 1_500;
const REQUEST = { requestId: "notice-1", conversationId: "main", input: "Send the approved notice" };

interface Tab {
  linked: LinkedSession;
  disk: CrashingStorage;
  /** Sends this tab made (each one reached the provider). */
  sends: string[];
}

describe("a linked session on Node + workerd", () => {
  let edge: EdgeExample;
  beforeAll(async () => {
    edge = await EdgeExample.start(script, { vars: { LEASE_MS: String(LEASE_MS) } });
  });
  afterAll(() => edge.dispose());

  /** While true, the tabs' calls to the edge fail as a dropped connection would. */
  let offline = false;

  /** A tab process over `store`, leading session `id` at the edge; `onSend` sees each of its sends. */
  async function openTab(id: string, store: MemoryStorage, onSend?: (count: number) => void): Promise<Tab> {
    const disk = new CrashingStorage(store.reopen());
    const sends: string[] = [];
    // The tab reaches the provider and the edge only while its process lives.
    const alive = () => {
      if (disk.isDead) throw new TypeError("fetch failed: the tab is gone");
    };
    const fetchFromTab: typeof fetch = async (input, init) => {
      alive();
      if (offline) throw new TypeError("fetch failed: the network is down");
      return (await edge.workerd.dispatchFetch(String(input), init as never)) as unknown as Response;
    };
    const mail = {
      send: async (message: { to: string; idempotencyKey: string }): Promise<Receipt> => {
        alive();
        const receipt = await edge.json<Receipt>("/mail/send", { body: message });
        sends.push(message.idempotencyKey);
        onSend?.(sends.length);
        return receipt;
      },
      lookup: async (operationId: string): Promise<Receipt | undefined> => {
        alive();
        const response = await edge.request(`/mail/lookup?op=${encodeURIComponent(operationId)}`);
        return response.status === 404 ? undefined : ((await response.json()) as Receipt);
      },
    };
    const linked = await linkSession({
      id,
      storage: disk,
      registry: asyncCampaignRegistry(mail),
      holder: "tab-1",
      remote: edgeReplica({
        baseUrl: "http://edge.test",
        token: EdgeExample.token,
        sessionId: id,
        fetch: fetchFromTab,
      }),
    });
    return { linked, disk, sends };
  }

  async function startCampaign(tab: Tab): Promise<Submission> {
    const session = tab.linked.session;
    await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
    const submission = await session.submit(REQUEST);
    await session.resume();
    return submission;
  }

  async function endedAtEdge(id: string, submissionId: string): Promise<Submission> {
    for (let i = 0; i < 40; i++) {
      const response = await edge.request(`/sessions/${id}/submissions/${submissionId}?wait=5000`);
      if (response.status === 200) {
        const submission = (await response.json()) as Submission;
        if (submission.status !== "running" && submission.status !== "accepted") return submission;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`${id}: the submission did not end at the edge`);
  }

  /** Exactly five mails since `from` (the provider is shared by every session of the runtime), each once. */
  async function expectFiveOnce(from: number): Promise<void> {
    const deliveries = (await edge.deliveries()).slice(from);
    const counts = new Map<string, number>();
    for (const { to } of deliveries) counts.set(to, (counts.get(to) ?? 0) + 1);
    expect([...counts.keys()].sort()).toEqual([...RECIPIENTS].sort());
    expect([...counts.values()]).toEqual([1, 1, 1, 1, 1]);
  }

  const ownership = async (id: string) =>
    (await edge.json<{ ownership: { holder: string; epoch: number } | null }>(`/sessions/${id}/replica`))
      .ownership;

  it("hands a run to the edge mid-send; the edge finishes it; the tab returns, shows the result and leads again", async () => {
    const from = (await edge.deliveries()).length;
    const store = memoryStorage();
    let handOff: Promise<void> | undefined;
    const tab: Tab = await openTab("linked-1", store, (count) => {
      if (count === 2) handOff = tab.linked.handOff();
    });
    const submission = await startCampaign(tab);
    // While the tab leads, the edge serves reads from its replica and refuses writes, saying who leads.
    await tab.linked.flush();
    const refused = await edge.request("/sessions/linked-1/submissions", {
      body: { ...REQUEST, requestId: "r2" },
    });
    expect(refused.status).toBe(409);
    expect((await refused.json()).code).toBe("owned-elsewhere");
    // A signal (a webhook, say) is asked to come back once the tab's lease may have run out: a 5xx is
    // retried by senders, where a 409 reads as final.
    const later = await edge.request("/sessions/linked-1/signals/plan-approval%3Aplan", {
      body: { requestId: "hook-1", payload: { approved: true } },
    });
    expect(later.status).toBe(503);
    expect((await later.json()).code).toBe("owned-elsewhere");
    expect(Number(later.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 100 && handOff === undefined; i++) await new Promise((r) => setTimeout(r, 20));
    await handOff;
    expect(tab.linked.status).toBe("released");
    expect((await ownership("linked-1"))?.holder).toBe("edge");
    const ended = await endedAtEdge("linked-1", submission.id);
    expect(ended.status).toBe("succeeded");
    expect(ended.result).toMatchObject({ text: "Done: 5 of 5 notices delivered." });
    await expectFiveOnce(from);

    // The tab comes back: it catches up from the edge and leads again.
    const back = await openTab("linked-1", store);
    expect(back.linked.session.submission(submission.id)?.status).toBe("succeeded");
    expect((await ownership("linked-1"))?.holder).toBe("tab");
    await back.linked.session.commit((d) =>
      d.setDocument("note", "email-plan", approvedPlan() as unknown as Json),
    );
    await back.linked.flush();
    const view = await edge.json<{ version: number; documents: { id: string }[] }>("/sessions/linked-1/view");
    expect(view.version).toBe(back.linked.session.version);
    expect(view.documents.map((d) => d.id)).toContain("note");
    await back.linked.close();
  }, 60_000);

  it("takes over a tab that died mid-run on its own alarm once the lease ran out, with no request sent", async () => {
    const from = (await edge.deliveries()).length;
    const store = memoryStorage();
    const tab: Tab = await openTab("linked-2", store, (count) => {
      if (count === 1) tab.disk.kill(); // the tab dies after its first mail, its receipts uncommitted
    });
    const submission = await startCampaign(tab);
    for (let i = 0; i < 100 && !tab.disk.isDead; i++) await new Promise((r) => setTimeout(r, 20));
    expect(tab.disk.isDead).toBe(true);
    // Nothing is asked of the session (reading its ownership record takes nothing over): its alarm fires
    // at the lease's end and it takes over.
    for (let i = 0; i < 100 && (await ownership("linked-2"))?.holder !== "edge"; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect((await ownership("linked-2"))?.holder).toBe("edge");
    const ended = await endedAtEdge("linked-2", submission.id);
    expect(ended.status).toBe("succeeded");
    // The mails the dead tab got out were confirmed by operation id at the edge, not sent again.
    expect(tab.sends.length).toBeGreaterThan(0);
    await expectFiveOnce(from);
  }, 60_000);

  it("pushes a backlog larger than one request may carry in several pushes, and keeps leading", async () => {
    const tab = await openTab("linked-4", memoryStorage());
    await tab.linked.flush();
    // Four commits of about 1.2 MB each: each fits a row at the edge, together not one 4 MiB push.
    offline = true;
    try {
      for (let i = 0; i < 4; i++) {
        const plan = { ...approvedPlan(), body: `plan ${i} `.padEnd(1_200_000, "x") };
        await tab.linked.session.commit((d) => d.setDocument(`big-${i}`, "email-plan", plan as Json));
      }
    } finally {
      offline = false;
    }
    await tab.linked.flush();
    expect(tab.linked.status).toBe("leading");
    expect(tab.linked.acknowledged).toBe(tab.linked.session.version);
    const view = await edge.json<{ version: number; documents: { id: string }[] }>("/sessions/linked-4/view");
    expect(view.version).toBe(tab.linked.session.version);
    expect(view.documents.map((d) => d.id)).toEqual(expect.arrayContaining(["big-0", "big-3"]));
    await tab.linked.close();
    // Read back, a page of the edge's catch-up is cut by its size (not 4.8 MB at once), and says more follow.
    const remote = edgeReplica({
      baseUrl: "http://edge.test",
      token: EdgeExample.token,
      sessionId: "linked-4",
      fetch: async (input, init) =>
        (await edge.workerd.dispatchFetch(String(input), init as never)) as unknown as Response,
    });
    const page = await remote.changes(0, 256);
    expect(page.more).toBe(true);
    expect(page.changes.length).toBeLessThan(view.version);
    expect(JSON.stringify(page.changes).length).toBeLessThan(MAX_CHANGES_BYTES + 2 * 1_300_000);
    // A new browser following the edge gets every commit in one pull, page after page.
    const copy = memoryStorage();
    const follower = await followRemote({ storage: copy, remote, id: "linked-4", everyMs: 0 });
    expect(await follower.pull()).toBe(view.version);
    await follower.stop();
    const held = await copy.readChanges("linked-4", 0, 256);
    expect(held.changes.map((c) => (c.value as { version: number }).version)).toEqual(
      Array.from({ length: view.version }, (_, i) => i + 1),
    );
  }, 60_000);

  it("refuses replica requests that are malformed, too large or not allowed, storing nothing", async () => {
    const bad = await edge.request("/sessions/linked-3/replica/claim", {
      body: { holder: "x~y", epoch: 0 },
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).errors[0].path).toBe("body.holder");
    const anonymous = await edge.raw("/sessions/linked-3/replica/claim", {
      method: "POST",
      body: JSON.stringify({ holder: "t", epoch: 0 }),
      headers: { "content-type": "application/json" },
    });
    expect(anonymous.status).toBe(401);
    const huge = await edge.request("/sessions/linked-3/replica/push", {
      body: { holder: "t", epoch: 1, commits: ["x".repeat(5 * 1024 * 1024)] },
    });
    expect(huge.status).toBe(413);
    const unclaimed = await edge.request("/sessions/linked-3/replica/push", {
      body: { holder: "t", epoch: 1, commits: [] },
    });
    expect(unclaimed.status).toBe(409);
    expect((await edge.request("/sessions/linked-3/view")).status).toBe(404);
  });
});
