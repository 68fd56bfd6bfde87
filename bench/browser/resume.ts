/**
 * The page of the worker/resume benchmark.
 * - `?setup=<steps>&db=<name>`: commits <steps> workload steps to session "bench" in IndexedDB (in groups,
 *   so setup is quick), spawns the probe task, closes; sets `window.setupDone`.
 * - `?db=<name>`: starts the session worker, as an app does on load; when the resumed probe phase
 *   announces itself, sets `window.resumeMs` to its start time measured from this navigation's start.
 */
import { indexedDbStorage, openSession } from "../../src/index.ts";
import { connectSessionWorker } from "../../worker/index.ts";
import { commitStep } from "../workload.ts";
import { PROBE, resumeChannel, resumeRegistry } from "./resume-registry.ts";

const params = new URLSearchParams(location.search);
const database = params.get("db") ?? "resume";
const state = window as unknown as { setupDone?: boolean; resumeMs?: number };

async function setup(steps: number): Promise<void> {
  const storage = indexedDbStorage(database, { durability: "relaxed" });
  const session = await openSession({ id: "bench", storage, registry: resumeRegistry(database) });
  for (let done = 0; done < steps; done += 100) {
    const group = Math.min(100, steps - done);
    await Promise.all(Array.from({ length: group }, (_, i) => commitStep(session, done + i)));
  }
  await session.spawn(PROBE, {}, { id: "probe" });
  await session.close();
  await storage.close();
  state.setupDone = true;
}

const steps = params.get("setup");
if (steps !== null) {
  void setup(Number(steps));
} else {
  resumeChannel(database).onmessage = (event: MessageEvent<{ startedAt: number }>) => {
    state.resumeMs ??= event.data.startedAt - performance.timeOrigin;
  };
  connectSessionWorker(
    new Worker(new URL("./resume.worker.ts", import.meta.url), { type: "module", name: database }),
  );
}
