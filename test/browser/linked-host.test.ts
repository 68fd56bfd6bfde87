/**
 * The browser host of a linked session in real Chromium (IndexedDB, Web Locks), its edge an in-process
 * `ReplicaHost` over a memory store: how the tab takes the session back.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ClaimRequestSchema,
  createRegistry,
  defineTask,
  memoryOwnership,
  memoryStorage,
  openSession,
  PushRequestSchema,
  ReleaseRequestSchema,
  ReplicaHost,
  type ReplicaRemote,
  systemClock,
} from "../../src/index.ts";
import { BrowserSessionHost } from "../../worker/index.ts";

const echo = defineTask({
  kind: "echo",
  version: 1,
  input: z.object({ text: z.string() }),
  phases: { run: (ctx) => ctx.complete({ echoed: ctx.input.text }) },
});
const registry = () =>
  createRegistry({
    tasks: [echo],
    submissionTask: (s) => ({ kind: "echo", input: { text: String(s.input) } }),
  });

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
}

/** An edge that leads `sessionId` (it wrote one Submission), reached with a network's delay. */
async function edgeOf(sessionId: string) {
  const storage = memoryStorage();
  const edge = await openSession({ id: sessionId, storage, registry: registry(), mode: "write" });
  await edge.submit({ requestId: "at-edge", conversationId: "main", input: "from the edge" });
  await edge.close();
  const host = new ReplicaHost({
    storage,
    ownership: memoryOwnership(),
    clock: systemClock,
    stopWriter: async () => undefined,
    startWriter: async () => undefined,
  });
  const claims: number[] = [];
  const later = async <T>(call: () => Promise<T>): Promise<T> => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    return structuredClone(await call());
  };
  const remote: ReplicaRemote = {
    claim: (r) =>
      later(async () => {
        const grant = await host.claim(sessionId, ClaimRequestSchema.parse(r));
        claims.push(grant.epoch);
        return grant;
      }),
    push: (r) =>
      later(() =>
        host.push(sessionId, { ...PushRequestSchema.parse(structuredClone(r)), commits: r.commits }),
      ),
    release: (r) => later(() => host.release(sessionId, ReleaseRequestSchema.parse(r))),
    changes: (after, limit) => later(() => host.changes(sessionId, after, limit)),
    snapshot: () => later(() => host.snapshot(sessionId)),
  };
  return { host, remote, claims };
}

describe("browser host: a linked session taken back", () => {
  it("claims once when takeBack() is asked again while its claim is under way (a double click)", async () => {
    const id = Math.random().toString(36).slice(2);
    const sessionId = `s-${id}`;
    const edge = await edgeOf(sessionId);
    const statuses: string[] = [];
    const tab = await BrowserSessionHost.start({
      database: `linked-${id}`,
      sessionId,
      registry,
      durability: "relaxed",
      link: {
        remote: edge.remote,
        holder: "browser-1",
        takeBack: "when-asked",
        onStatus: (status) => statuses.push(status),
      },
    });
    try {
      await until(() => statuses.includes("following"), "the tab to follow the edge");
      await Promise.all([tab.takeBack(), tab.takeBack()]);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(edge.claims).toHaveLength(1);
      expect(tab.isLeader).toBe(true);
      expect(tab.linkState()?.status).toBe("leading");
      expect((await edge.host.ownership(sessionId))?.epoch).toBe(tab.linkState()?.epoch);
      expect(statuses).not.toContain("refused");
      expect(statuses).not.toContain("fenced");
    } finally {
      await tab.close();
    }
  });

  it("a browser refused the claim while another leads follows the edge's copy of that run", async () => {
    const id = Math.random().toString(36).slice(2);
    const sessionId = `s-${id}`;
    const edge = await edgeOf(sessionId);
    const browser = (name: string, statuses: string[]) =>
      BrowserSessionHost.start({
        database: `linked-${name}-${id}`,
        sessionId,
        registry,
        durability: "relaxed",
        link: {
          remote: edge.remote,
          holder: name,
          followEveryMs: 50,
          onStatus: (status) => statuses.push(status),
        },
      });
    const first: string[] = [];
    const second: string[] = [];
    const a = await browser("a", first);
    const b = await browser("b", second);
    try {
      await a.whenLeader();
      expect(first).toContain("leading");
      await until(() => second.includes("refused"), "the second browser's claim to be refused");
      const submission = await a.submit({ requestId: "in-a", conversationId: "main", input: "from a" });
      await a.wait(submission.id);
      await until(() => a.linkState()?.acknowledged === a.session?.version, "a's commits to reach the edge");
      // The second browser shows what the first wrote (through the edge), not a copy nobody updates.
      await until(
        () => b.session?.submissionForRequest("in-a")?.status === "succeeded",
        "the second browser to show the first one's run",
      );
      expect(b.isLeader).toBe(false);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
