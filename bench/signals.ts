/**
 * Signal benchmarks (DESIGN §4, waits on the outside world), on fake-indexeddb with strict durability:
 * - `signal/roundtrip`: from `signal()` to the waiting task's next phase starting, vs one plain commit of
 *   the same payload in the same session (alternating, median);
 * - `signal/waiting-10000-vs-100/signal`: `signal()` in a session with 10,000 open waits vs one with 100.
 *   The big session's keys are of parked waits (past the first 100, `liveWaits`), which stay in storage
 *   when it opens: each is found by the `waitKeys` index and read back, never by scanning the waits;
 * - `signal/waiting-10000-vs-100/open`: opening those sessions. The 100 live waits are loaded; the parked
 *   ones stay in storage (the session row counts them), so open time does not grow with them.
 */
import { z } from "zod";
import {
  createRegistry,
  defineSignal,
  defineTask,
  indexedDbStorage,
  openSession,
  type Session,
  type Storage,
} from "../src/index.ts";
import { median } from "./workload.ts";

/** What every signal benchmark sends (about 230 bytes of JSON). */
export const PAYLOAD = { decision: "approved", note: "x".repeat(200) };
const started = new Map<string, () => void>();

/**
 * The registry of the signal benchmarks: `waiter` awaits its input's key (`k:*`, PAYLOAD's shape) and calls
 * `continued(key)` as its next phase starts; that phase then ends the task, or with `hold` never ends (it
 * commits nothing, as where time is taken around whole requests: bench/edge/bench-worker.ts).
 */
export function signalRegistry(continued: (key: string) => void, hold = false) {
  const waiter = defineTask({
    kind: "waiter",
    version: 1,
    input: z.object({ key: z.string() }),
    phases: {
      ask: (ctx) => ctx.waitFor(ctx.input.key, { next: "go" }),
      go: async (ctx) => {
        continued(ctx.input.key);
        if (hold) await new Promise<void>(() => undefined);
        return ctx.complete(null);
      },
    },
  });
  return createRegistry({
    tasks: [waiter],
    signals: [defineSignal({ key: "k:*", schema: z.object({ decision: z.string(), note: z.string() }) })],
  });
}

const registry = () => signalRegistry((key) => started.get(key)?.());

let databases = 0;
const freshStorage = () => {
  databases += 1;
  return indexedDbStorage(`bench-signals-${databases}`, { durability: "strict" });
};

async function sessionWithWaits(storage: Storage, id: string, waits: number): Promise<Session> {
  const session = await openSession({ id, storage, registry: registry() });
  await session.resume();
  for (let i = 0; i < waits; i += 500) {
    await session.commit((draft) => {
      for (let j = i; j < Math.min(waits, i + 500); j++) draft.spawn("waiter", { key: `k:${j}` });
    });
  }
  await session.whenIdle();
  if (session.pending().length !== waits) throw new Error(`expected ${waits} open waits`);
  return session;
}

/**
 * ms from `signal()` to the next phase starting, against one plain commit of the same payload, after `warm`
 * rounds not measured (V8 optimizes the signal's path over the first few hundred). Every signal is for a
 * live wait, as in the Durable Object's line (bench/edge.ts): the session keeps 100 open waits, each one
 * signalled replaced (untimed) by a new one, so none is ever parked (`liveWaits`; parked waits have their
 * own line). Which side of each pair goes first alternates, so neither pays for the other's garbage.
 */
export async function roundtripBench(rounds = 150, warm = 400): Promise<{ ours: number; floor: number }> {
  const session = await sessionWithWaits(freshStorage(), "roundtrip", 100);
  const ours: number[] = [];
  const floor: number[] = [];
  const signal = async (i: number) => {
    const key = `k:${i}`;
    const phaseStarted = new Promise<number>((resolve) => started.set(key, () => resolve(performance.now())));
    const t0 = performance.now();
    await session.signal(key, PAYLOAD, { requestId: `r${i}` });
    const reached = (await phaseStarted) - t0;
    started.delete(key);
    await session.whenIdle();
    return reached;
  };
  const plain = async () => {
    const t0 = performance.now();
    await session.commit((draft) =>
      draft.appendEntry("log", { kind: "note", text: JSON.stringify(PAYLOAD) }),
    );
    return performance.now() - t0;
  };
  for (let i = 0; i < warm + rounds; i++) {
    let reached: number;
    let committed: number;
    if (i % 2 === 0) {
      reached = await signal(i);
      committed = await plain();
    } else {
      committed = await plain();
      reached = await signal(i);
    }
    await session.commit((draft) => draft.spawn("waiter", { key: `k:${i + 100}` }));
    await session.whenIdle();
    if (i >= warm) {
      ours.push(reached);
      floor.push(committed);
    }
  }
  await session.close();
  return { ours: median(ours), floor: median(floor) };
}

/** `signal()` ms and open ms with 10,000 open waits vs 100. */
export async function waitingBench(): Promise<{
  signal: { ours: number; floor: number };
  open: { ours: number; floor: number };
}> {
  const big = freshStorage();
  const small = freshStorage();
  await (await sessionWithWaits(big, "big", 10_000)).close();
  await (await sessionWithWaits(small, "small", 100)).close();
  const opens = { big: [] as number[], small: [] as number[] };
  for (let r = 0; r < 5; r++) {
    for (const [name, storage] of [
      ["big", big],
      ["small", small],
    ] as const) {
      const t0 = performance.now();
      const session = await openSession({ id: name, storage, registry: registry(), mode: "read" });
      opens[name].push(performance.now() - t0);
      await session.close();
    }
  }
  const sessions = {
    big: await openSession({ id: "big", storage: big, registry: registry() }),
    small: await openSession({ id: "small", storage: small, registry: registry() }),
  };
  await sessions.big.resume();
  await sessions.small.resume();
  const signals = { big: [] as number[], small: [] as number[] };
  for (let i = 0; i < 60; i++) {
    for (const name of ["big", "small"] as const) {
      const session = sessions[name];
      // In the big session, a wait past the first 100 (parked: read back from storage by its key).
      const key = name === "big" ? `k:${200 + i * 97}` : `k:${i}`;
      const t0 = performance.now();
      await session.signal(key, PAYLOAD, { requestId: `r${i}` });
      if (i >= 10) signals[name].push(performance.now() - t0);
      await session.whenIdle();
    }
  }
  await sessions.big.close();
  await sessions.small.close();
  return {
    signal: { ours: median(signals.big), floor: median(signals.small) },
    open: { ours: median(opens.big), floor: median(opens.small) },
  };
}
