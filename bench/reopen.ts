/**
 * reopen/10000-vs-100: time to reopen a session after 10,000 commits that each edit one document, against
 * one after 100. Loading reads the latest baseline plus later deltas, never the history, so the ratio
 * should stay near 1.
 */
import { indexedDbStorage, openSession } from "../src/index.ts";
import { benchRegistry, median, openBenchSession } from "./workload.ts";

async function build(database: string, commits: number) {
  const { session, storage } = await openBenchSession(database, "relaxed");
  for (let i = 0; i < commits; i++) {
    await session.commit((d) =>
      d.setDocument("progress", "progress", { step: i, label: `step ${i}`, done: [] }),
    );
  }
  await session.close();
  await storage.close();
}

async function timeReopen(database: string): Promise<number> {
  const storage = indexedDbStorage(database);
  const start = performance.now();
  const session = await openSession({ id: "bench", storage, registry: benchRegistry });
  const elapsed = performance.now() - start;
  if (session.version === 0) throw new Error(`${database} was not built`);
  await session.close();
  await storage.close();
  return elapsed;
}

export async function reopenBench(): Promise<{ ours: number; floor: number }> {
  await build("reopen-10000", 10_000);
  await build("reopen-100", 100);
  for (let i = 0; i < 3; i++) {
    await timeReopen("reopen-10000");
    await timeReopen("reopen-100");
  }
  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < 15; i++) {
    ours.push(await timeReopen("reopen-10000"));
    floor.push(await timeReopen("reopen-100"));
  }
  return { ours: median(ours), floor: median(floor) };
}
