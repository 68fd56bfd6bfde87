/**
 * A tab that comes to a long-lived edge session (issue: long life × one session on two hosts): the edge's
 * change log was pruned long ago, so the tab's copy starts from the edge's snapshot of the session
 * (`GET …/replica/snapshot`), then follows the edge's next commits from its change log — all over the
 * shipped edge example's HTTP API on real workerd.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asyncCampaignRegistry } from "../../examples/five-emails/app.ts";
import {
  edgeReplica,
  followRemote,
  memoryStorage,
  openSession,
  RecordTooLargeError,
  SessionNotFoundError,
  type Timers,
} from "../../src/index.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const ID = "long-lived";

describe("a new tab on a long-lived edge session (workerd)", () => {
  let edge: EdgeExample;
  beforeAll(async () => {
    edge = await EdgeExample.start(script, {
      vars: { RETAIN_CHANGES: "100", MAX_SNAPSHOT_CHARS: "300000", RATE_LIMIT_PER_MINUTE: "100000" },
    });
  });
  afterAll(() => edge.dispose());

  /** One commit at the edge: a decision kept for a plan no campaign asked about yet. */
  const decide = (n: number) =>
    edge.json(`/sessions/${ID}/signals/plan-approval:later-${n}`, {
      body: { requestId: `decision-${n}`, payload: { approved: n % 2 === 0 } },
    });
  /** The edge's replica routes for one session, as a tab calls them. */
  const replica = (sessionId: string) =>
    edgeReplica({
      baseUrl: "http://edge.test",
      token: EdgeExample.token,
      sessionId,
      fetch: (input, init) =>
        edge.workerd.dispatchFetch(String(input), init as never) as unknown as Promise<Response>,
    });
  const edgeView = () =>
    edge.json<{ version: number; documents: unknown[]; submissions: unknown[] }>(`/sessions/${ID}/view`);

  it("starts the tab's copy from the edge's snapshot, then follows the edge's change log", async () => {
    const submitted = await edge.request(`/sessions/${ID}/submissions?wait=10000`, {
      body: { requestId: "campaign", conversationId: "main", input: "Send the approved notice" },
    });
    expect(submitted.status).toBe(200);
    for (let n = 0; n < 300; n++) await decide(n);
    const changes = await edge.json<{ oldestRetained: number }>(
      `/sessions/${ID}/replica/changes?after=0&limit=1`,
    );
    expect(changes.oldestRetained).toBeGreaterThan(1);

    const remote = edgeReplica({
      baseUrl: "http://edge.test",
      token: EdgeExample.token,
      sessionId: ID,
      fetch: (input, init) =>
        edge.workerd.dispatchFetch(String(input), init as never) as unknown as Promise<Response>,
    });
    const tab = memoryStorage();
    const following = await followRemote({ storage: tab, remote, id: ID, everyMs: 0 });
    const before = await edgeView();
    expect(await following.pull()).toBe(before.version);
    const registry = asyncCampaignRegistry({
      send: async () => {
        throw new Error("a copy sends nothing");
      },
      lookup: async () => undefined,
    });
    const copy = async () => {
      const session = await openSession({ id: ID, storage: tab, registry, mode: "read" });
      const view = session.view();
      await session.close();
      return view;
    };
    const shown = await copy();
    expect(shown.version).toBe(before.version);
    expect(shown.documents).toEqual(before.documents);
    expect(shown.submissions).toEqual(before.submissions);
    expect((await tab.readSignals(ID, ["plan-approval:later-299"]))[0]?.value).toMatchObject({
      payload: { approved: false },
    });
    // The edge goes on; the copy follows from the change log, not another snapshot.
    for (let n = 300; n < 310; n++) await decide(n);
    expect(await following.pull()).toBe((await edgeView()).version);
    expect((await tab.readChanges(ID, 0, 1)).oldestRetained).toBe(before.version);
    await following.stop();
  });

  it("refuses to move a session larger than a snapshot may be (413, its size): a following tab stops and says so", async () => {
    const big = "too-big";
    const made = await edge.request(`/sessions/${big}/submissions?wait=10000`, {
      body: { requestId: "campaign", conversationId: "main", input: "Send the approved notice" },
    });
    expect(made.status).toBe(200);
    const reason = "r".repeat(500);
    for (let n = 0; n < 700; n++)
      await edge.json(`/sessions/${big}/signals/plan-approval:later-${n}`, {
        body: { requestId: `big-${n}`, payload: { approved: true, reason } },
      });
    const refused = await edge.request(`/sessions/${big}/replica/snapshot`);
    expect(refused.status).toBe(413);
    const problem = (await refused.json()) as { code: string; detail: string };
    expect(problem.code).toBe("snapshot-too-large");
    expect(problem.detail).toMatch(/holds \d+ characters of rows, more than one snapshot moves \(300000\)/);
    const following = await followRemote({
      storage: memoryStorage(),
      remote: replica(big),
      id: big,
      everyMs: 0,
    });
    const error = await following.pull().catch((e: unknown) => e);
    await following.stop();
    // Typed, with the session's size and the bound, as the store refused it at the edge.
    expect(error).toBeInstanceOf(RecordTooLargeError);
    expect(error).toMatchObject({ record: `sessions/${big}`, limit: 300_000 });
    expect((error as RecordTooLargeError).bytes).toBeGreaterThan(300_000);
    expect((error as Error).message).toMatch(/more than one snapshot moves/);
  });

  it("stops a follower of a session the edge never held, told so, instead of retrying every tick", async () => {
    const remote = replica("never-made");
    await expect(remote.changes(0, 1)).rejects.toBeInstanceOf(SessionNotFoundError);
    await expect(remote.snapshot?.()).rejects.toBeInstanceOf(SessionNotFoundError);
    // Ticking as a page's follower does: a refusal stops it (onError), a passing failure would retry.
    let tick: (() => void) | undefined;
    const timers: Timers = {
      setTimeout: (run) => {
        tick = run;
        return 0;
      },
      clearTimeout: () => undefined,
    };
    const outcome = new Promise<string>((resolve) => {
      void followRemote({
        storage: memoryStorage(),
        remote,
        id: "never-made",
        everyMs: 1_000,
        timers,
        onError: (e) => resolve(`stopped: ${e.name}`),
        onRetry: (e) => resolve(`retried: ${e.message}`),
      }).then(() => tick?.());
    });
    expect(await outcome).toBe("stopped: SessionNotFoundError");
  });

  it("answers the snapshot route only to a caller allowed to replicate a session it holds", async () => {
    expect((await edge.raw(`/sessions/${ID}/replica/snapshot`)).status).toBe(401);
    for (const route of ["snapshot", "changes?after=0"]) {
      const missing = await edge.request(`/sessions/never-made/replica/${route}`);
      expect(missing.status, route).toBe(404);
      expect(await missing.text()).not.toMatch(/at |\.ts/);
    }
  });
});
