/**
 * Hand-off benchmarks (issue 21): a tab's session (here Node on fake-indexeddb, strict durability) linked
 * to the shipped edge example on local workerd, over its HTTP API.
 *
 * - `handoff/replication`: ms per local commit with the session linked (every commit pushed to the edge in
 *   the background) vs the same commits in a plain session on the same store, alternating rounds, median.
 *   The commit path does not wait for the edge: this shows what the pushes cost the tab meanwhile.
 * - `handoff/latency`: the five-email run handed over mid-send; from `handOff()` being called to the edge's
 *   first commit under its own epoch (its time as the change log records it; both clocks are this machine's),
 *   in ms; floor: one bare request to the same session in the same run. Target: `ours` ≤ 1,000 ms.
 * - `handoff/latency-crashed`: the tab killed mid-send instead; from the kill to the edge's first commit,
 *   driven by the edge's own alarm at the lease's end; floor: the lease (1,000 ms). Target: ≤ lease + 1,000.
 */
import { fileURLToPath } from "node:url";
import { approvedPlan, asyncCampaignRegistry } from "../examples/five-emails/app.ts";
import type { Receipt } from "../examples/five-emails/mail-service.ts";
import {
  createRegistry,
  edgeReplica,
  indexedDbStorage,
  type Json,
  type LinkedSession,
  linkSession,
  openSession,
  type Session,
  type Storage,
} from "../src/index.ts";
import { CrashingStorage } from "../src/testing/index.ts";
import { bundleWorker, EdgeExample } from "../test/support/workerd.ts";
import { median } from "./workload.ts";

const LEASE_MS = 1_000;
const NOTE = "n".repeat(300);
let databases = 0;
const freshStorage = () => indexedDbStorage(`bench-handoff-${++databases}`, { durability: "strict" });

async function withEdge<T>(run: (edge: EdgeExample) => Promise<T>): Promise<T> {
  const script = await bundleWorker(
    fileURLToPath(new URL("../test/edge/fixtures/edge-example.ts", import.meta.url)),
  );
  const edge = await EdgeExample.start(script, { mailDelayMs: 20, vars: { LEASE_MS: String(LEASE_MS) } });
  try {
    return await run(edge);
  } finally {
    await edge.dispose();
  }
}

const remoteOf = (edge: EdgeExample, sessionId: string, alive: () => boolean = () => true) =>
  edgeReplica({
    baseUrl: "http://edge.test",
    token: EdgeExample.token,
    sessionId,
    fetch: async (input, init) => {
      if (!alive()) throw new TypeError("fetch failed: the tab is gone");
      return (await edge.workerd.dispatchFetch(String(input), init as never)) as unknown as Response;
    },
  });

async function timeCommits(session: Session, count: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++)
    await session.commit((d) => d.appendEntry("log", { kind: "note", text: NOTE }));
  return (performance.now() - t0) / count;
}

/** ms per commit, linked vs plain, alternating rounds on fresh sessions of the same kind of store. */
export async function replicationBench(rounds = 9, commits = 150): Promise<{ ours: number; floor: number }> {
  return withEdge(async (edge) => {
    const ours: number[] = [];
    const floor: number[] = [];
    for (let round = 0; round < rounds + 1; round++) {
      const id = `bench-link-${round}`;
      const linked = await linkSession({
        id,
        storage: freshStorage(),
        registry: createRegistry(),
        remote: remoteOf(edge, id),
      });
      const plain = await openSession({
        id: `bench-plain-${round}`,
        storage: freshStorage(),
        registry: createRegistry(),
      });
      const a = await timeCommits(linked.session, commits);
      const b = await timeCommits(plain, commits);
      await linked.flush(); // everything reached the edge (not timed)
      if (linked.acknowledged !== linked.session.version)
        throw new Error("the edge did not receive every commit");
      if (round > 0) {
        ours.push(a);
        floor.push(b);
      }
      await linked.close();
      await plain.close();
    }
    return { ours: median(ours), floor: median(floor) };
  });
}

/** A tab over `storage` leading the five-email run at the edge; `onSend` sees each of its sends. */
async function campaignTab(
  edge: EdgeExample,
  id: string,
  storage: Storage,
  alive: () => boolean,
  onSend: (n: number) => void,
) {
  let sends = 0;
  const mail = {
    send: async (message: { to: string; idempotencyKey: string }) => {
      if (!alive()) throw new TypeError("fetch failed: the tab is gone");
      const receipt = await edge.json<Receipt>("/mail/send", { body: message });
      onSend(++sends);
      return receipt;
    },
    lookup: async (operationId: string) => {
      const response = await edge.request(`/mail/lookup?op=${encodeURIComponent(operationId)}`);
      return response.status === 404 ? undefined : ((await response.json()) as Receipt);
    },
  };
  const linked: LinkedSession = await linkSession({
    id,
    storage,
    registry: asyncCampaignRegistry(mail),
    remote: remoteOf(edge, id, alive),
  });
  await linked.session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
  return linked;
}

/**
 * The wall-clock time of the edge's first commit under an epoch newer than the tab's (its own writer's),
 * read from its change log: polling only finds it, the time is the commit's own.
 */
async function edgeWritesAfter(
  edge: EdgeExample,
  id: string,
  version: number,
  tabEpoch: number,
): Promise<number> {
  for (;;) {
    const { changes } = await edge.json<{ changes: { epoch: number; at: number }[] }>(
      `/sessions/${id}/replica/changes?after=${version}&limit=256`,
    );
    const first = changes.find((c) => c.epoch > tabEpoch);
    if (first) return first.at;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** From a clean hand-off (or a kill) mid-send to the edge's first commit after it, median of runs. */
export async function latencyBench(crashed: boolean, runs = 5): Promise<{ ours: number; floor: number }> {
  return withEdge(async (edge) => {
    const times: number[] = [];
    const bare: number[] = [];
    for (let run = 0; run < runs; run++) {
      const id = `bench-handoff-${crashed ? "crash" : "clean"}-${run}`;
      const disk = new CrashingStorage(freshStorage());
      let moment: Promise<{ at: number; version: number }> | undefined;
      const linked: LinkedSession = await campaignTab(
        edge,
        id,
        disk,
        () => !disk.isDead,
        (n) => {
          if (n !== 2 || moment !== undefined) return;
          moment = (async () => {
            if (crashed) {
              await linked.flush().catch(() => undefined);
              const at = Date.now();
              disk.kill();
              return { at, version: linked.acknowledged };
            }
            const at = Date.now();
            await linked.handOff();
            return { at, version: linked.acknowledged };
          })();
        },
      );
      await linked.session.submit({ requestId: "r1", conversationId: "main", input: "Send the notice" });
      await linked.session.resume();
      while (!moment) await new Promise((resolve) => setTimeout(resolve, 5));
      const { at, version } = await moment;
      times.push((await edgeWritesAfter(edge, id, version, linked.epoch)) - at);
      const t0 = performance.now();
      await edge.json(`/sessions/${id}/replica`);
      bare.push(performance.now() - t0);
    }
    return { ours: median(times), floor: crashed ? LEASE_MS : median(bare) };
  });
}
