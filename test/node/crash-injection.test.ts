/**
 * Crash injection: random commit sequences run against a store that dies at the k-th transaction —
 * before it starts, in the middle of its writes (the transaction aborts), or after it is durable but
 * before the kernel hears back. After reopening, the session must equal exactly what storage confirmed.
 *
 * Reproduce a failure with the seed and path fast-check prints: CRASH_SEED=<seed> CRASH_PATH=<path>.
 * More cases: CRASH_RUNS=20000.
 */
import "fake-indexeddb/auto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitGuard,
  type CommitRecord,
  createRegistry,
  defineDocument,
  indexedDbStorage,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  type Storage,
  sequentialIds,
} from "../../src/index.ts";
import type { KernelDraft } from "../../src/session/draft.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";
import { durable } from "../support/storage-contract.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";

const list = defineDocument({
  type: "list",
  schema: z.object({ items: z.array(z.number()) }),
  baselineEvery: 3,
  // Written by deferred commits too (the "progress" action), which only progress documents may be.
  progress: true,
});
const registry = createRegistry({ documents: [list] });

type Action =
  | { t: "submit"; req: number; conv: string }
  | { t: "note"; conv: string }
  | { t: "doc"; id: string; n: number }
  | { t: "push"; id: string; n: number }
  | { t: "task"; id: string; phase: string }
  | { t: "progress"; id: string; n: number }
  | { t: "tick" };

const conv = fc.constantFrom("a", "b");
const docId = fc.constantFrom("d0", "d1");
const action: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ t: fc.constant("submit" as const), req: fc.nat(4), conv }),
  fc.record({ t: fc.constant("note" as const), conv }),
  fc.record({ t: fc.constant("doc" as const), id: docId, n: fc.nat(9) }),
  fc.record({ t: fc.constant("push" as const), id: docId, n: fc.nat(9) }),
  fc.record({
    t: fc.constant("task" as const),
    id: fc.constantFrom("t0", "t1", "t2"),
    phase: fc.constantFrom("p1", "p2"),
  }),
  fc.record({ t: fc.constant("progress" as const), id: docId, n: fc.nat(9) }),
  fc.constant({ t: "tick" as const }),
);
/** A step: actions started in the same tick (so they may share a group commit). */
const steps = fc.array(fc.array(action, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 });
type Mode = "before" | "during" | "after";
/** How many settled items the sessions keep in memory: the default, and a small working set (DESIGN §9). */
const retain = fc.constantFrom(20, 2);
const crash = fc.record({
  transaction: fc.integer({ min: 1, max: 9 }),
  mode: fc.constantFrom<Mode>("before", "during", "after"),
  row: fc.nat(6),
});

function build(a: Exclude<Action, { t: "tick" } | { t: "submit" }>) {
  return (d: KernelDraft) => {
    switch (a.t) {
      case "note":
        d.appendEntry(a.conv, { kind: "note", text: `note ${d.version}` });
        return;
      case "doc":
      case "progress":
        d.setDocument(a.id, "list", { items: [a.n] });
        return;
      case "push": {
        const current = d.document(a.id);
        if (!current) d.setDocument(a.id, "list", { items: [a.n] });
        else d.patchDocument(a.id, [{ op: "add", path: "/items/-", value: a.n }]);
        return;
      }
      case "task":
        d.writeTask({
          id: a.id,
          kind: "demo",
          kindVersion: 1,
          input: null,
          state: { status: "running" },
          checkpoint: { phase: a.phase, data: d.version },
          attempts: (d.task(a.id)?.attempts ?? 0) + 1,
          restarts: 0,
          createdVersion: d.task(a.id)?.createdVersion ?? d.version,
          createdAt: d.at,
          updatedAt: d.at,
        });
    }
  };
}

/**
 * A store wrapper that can crash at its k-th transaction: before it starts, in the middle of its writes
 * (through the inner store's write hook, so the real transaction aborts), or after it is durable.
 */
class CrashingStorage extends ForwardingStorage {
  transactions = 0;
  crashed = false;
  /** Last version of the group being written, for snapshotting after adoption. */
  groupEnd = 0;
  constructor(
    inner: Storage,
    private readonly plan: CrashPlan | undefined,
    private readonly fault: { armed: boolean; fired: boolean },
  ) {
    super(inner);
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]) {
    this.transactions++;
    const hit = this.plan !== undefined && this.transactions === this.plan.transaction;
    if (hit && this.plan?.mode === "before") {
      this.crashed = true;
      throw new Error("crash before the transaction");
    }
    this.fault.armed = hit && this.plan?.mode === "during";
    try {
      await this.inner.commit(guard, commits);
    } finally {
      this.fault.armed = false;
      if (this.fault.fired) this.crashed = true;
    }
    this.groupEnd = commits.at(-1)?.version ?? this.groupEnd;
    if (hit && this.plan?.mode === "after") {
      this.crashed = true;
      throw new Error("crash after the transaction was durable");
    }
  }
}

type CrashPlan = { transaction: number; mode: Mode; row: number };
type Store = { storage: (onWrite: (row: unknown, index: number) => void) => Storage; reopen: () => Storage };

/** Runs the plan; returns the durable view after each confirmed transaction (index 0: before any). */
async function run(store: Store, plan: Action[][], crashPlan: CrashPlan | undefined, retainSettled: number) {
  const fault = { armed: false, fired: false };
  const storage = new CrashingStorage(
    store.storage((_row, index) => {
      if (fault.armed && index >= (crashPlan?.row ?? 0)) {
        fault.fired = true;
        throw new Error("crash in the middle of the transaction");
      }
    }),
    crashPlan,
    fault,
  );
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const session = await openSession({
    id: "s",
    storage,
    registry,
    clock,
    timers,
    ids: sequentialIds(),
    deferredFlushMs: 10,
    retainSettled,
  });
  const snapshots: unknown[] = [durable(session.view())];
  session.subscribe(0, (change) => {
    if (change.version === storage.groupEnd) snapshots.push(durable(session.view()));
  });
  const background: Promise<unknown>[] = [];
  for (const step of plan) {
    if (session.status !== "open") break;
    const pending: Promise<unknown>[] = [];
    for (const a of step) {
      if (a.t === "tick") timers.advance(10);
      else if (a.t === "submit") {
        pending.push(
          session.submit({ requestId: `r${a.req}`, conversationId: a.conv, input: `input ${a.req}` }),
        );
      } else if (a.t === "progress") {
        // Deferred progress resolves only when a timer or a critical commit flushes it: not awaited here
        // (handled at once: it may be refused long before the run ends, when the process dies).
        const progress = commitAsKernel(session, build(a), { deferred: true });
        progress.catch(() => undefined);
        background.push(progress);
      } else pending.push(commitAsKernel(session, build(a)));
    }
    await Promise.allSettled(pending);
  }
  if (session.status === "open") await session.flush().catch(() => undefined);
  await Promise.allSettled(background);
  return { snapshots, session, crashed: storage.crashed };
}

async function checkCrash(
  makeStore: () => Store,
  plan: Action[][],
  crashPlan: CrashPlan,
  retainSettled: number,
): Promise<void> {
  const reference = await run(makeStore(), plan, undefined, retainSettled);
  const store = makeStore();
  const crashed = await run(store, plan, crashPlan, retainSettled);
  const reopened = await openSession({ id: "s", storage: store.reopen(), registry, retainSettled });
  const got = durable(reopened.view());
  if (!crashed.crashed) {
    expect(got).toEqual(durable(reference.session.view()));
  } else {
    expect(crashed.session.status).toBe("stopped");
    const k = crashPlan.transaction;
    // Everything the crashed process confirmed matches the reference run, transaction by transaction…
    expect(crashed.snapshots).toEqual(reference.snapshots.slice(0, k));
    // …and the reopened session holds exactly what storage confirmed: the in-flight transaction too only
    // when it became durable before the crash.
    expect(got).toEqual(reference.snapshots[crashPlan.mode === "after" ? k : k - 1]);
  }
  // The reopened session is a healthy writer.
  await reopened.commit((d) => d.appendEntry("a", { kind: "note", text: "after recovery" }));
  const again = await openSession({
    id: "s",
    storage: store.reopen(),
    registry,
    mode: "read",
    retainSettled,
  });
  expect(durable(again.view())).toEqual(durable(reopened.view()));
}

const runs = Number(process.env.CRASH_RUNS ?? 2000);
const seed = process.env.CRASH_SEED ? Number(process.env.CRASH_SEED) : undefined;
const path = process.env.CRASH_PATH;

function memoryStore(): Store {
  const disk = memoryStorage();
  // A short tail: commits' rows are written from the change log every few commits, crashes included.
  return { storage: (onWrite) => disk.reopen({ onWrite, tailCommits: 3 }), reopen: () => disk.reopen() };
}

let databases = 0;
function fakeIndexedDbStore(): Store {
  const name = `crash-${databases++}`;
  return {
    storage: (onWrite) => indexedDbStorage(name, { onWrite, tailCommits: 3 }),
    reopen: () => indexedDbStorage(name),
  };
}

describe("crash injection", () => {
  it(`reopens to exactly the last confirmed commit, in-memory store (${runs} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(steps, crash, retain, (plan, crashPlan, k) =>
        checkCrash(memoryStore, plan, crashPlan, k),
      ),
      { numRuns: runs, ...(seed !== undefined && { seed }), ...(path !== undefined && { path }) },
    );
  }, 120_000);

  it(`reopens to exactly the last confirmed commit, IndexedDB with real transaction aborts (${Math.ceil(runs / 10)} cases)`, async () => {
    await fc.assert(
      fc.asyncProperty(steps, crash, retain, (plan, crashPlan, k) =>
        checkCrash(fakeIndexedDbStore, plan, crashPlan, k),
      ),
      {
        numRuns: Math.ceil(runs / 10),
        ...(seed !== undefined && { seed }),
        ...(path !== undefined && { path }),
      },
    );
  }, 120_000);
});
