/**
 * Retention (DESIGN §9): a policy removes finished work from storage by count and/or age, archiving it
 * first if asked, and never removes what the session still holds or needs. Shown on a seeded agent
 * workload (three conversations with queued follow-ups, tools that succeed, fail or wait for approval,
 * crashes at random moments, automatic and explicit collection), checked against storage after every
 * collection: what memory and views hold is all in storage, removed items leave no row behind, the archive
 * got exactly what was stored, a removed requestId is never run again, and a reopened session and a folded
 * change stream equal the live view.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type ArchivedItem,
  applyChangeToView,
  type CollectResult,
  createAgent,
  createRegistry,
  DuplicateRequestError,
  defineTool,
  emptyView,
  InvalidArgumentError,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type RetentionPolicy,
  type Session,
  type Submission,
  scriptedModel,
  sequentialIds,
  type Task,
} from "../../src/index.ts";
import { rng } from "../support/task-simulation.ts";

const Args = z.object({ n: z.number() });
const tools = [
  defineTool({
    name: "work",
    description: "works",
    input: Args,
    replay: "safe",
    execute: async ({ n }) => ({ n }),
  }),
  defineTool({
    name: "ask",
    description: "asks first",
    input: Args,
    replay: "safe",
    approval: true,
    execute: async ({ n }) => ({ asked: n }),
  }),
  defineTool({
    name: "broken",
    description: "fails",
    input: Args,
    replay: "safe",
    execute: async () => {
      throw new Error("upstream 503");
    },
  }),
];

/** "use <tool>" calls that tool once; anything else (and every tool result) is answered with text. */
const model = scriptedModel([
  (request) => {
    const last = request.messages.at(-1);
    const tool = last?.role === "user" ? /^use (\w+)$/.exec(last.content)?.[1] : undefined;
    return tool ? { toolCalls: [{ name: tool, args: { n: request.messages.length } }] } : { text: "ok" };
  },
]);
const registry = () => createRegistry({ ...createAgent({ model, tools }) });
const INPUTS = ["use work", "use ask", "use broken", "hello"];
const isDone = (s: Submission | undefined) => s !== undefined && !["accepted", "running"].includes(s.status);

interface Run {
  readonly disk: MemoryStorage;
  session: Session;
  readonly clock: ManualClock;
  timers: ManualTimers;
  /** The store handle of the current process (a dead process's handle is closed). */
  handle: MemoryStorage;
  readonly policy: RetentionPolicy;
  readonly retainSettled: number;
  /** requestId → Submission id, for every accepted input. */
  readonly requests: Map<string, string>;
  /** The last committed version of every Submission and task, as the change stream carried it. */
  readonly seen: { submissions: Map<string, Submission>; tasks: Map<string, Task> };
  /** What the archive received, by item id (twice is allowed: a death between archive and removal). */
  readonly archived: Map<string, ArchivedItem>;
  readonly removed: Set<string>;
  readonly errors: unknown[];
  incarnation: number;
}

async function open(run: Run): Promise<void> {
  run.timers = new ManualTimers(run.clock);
  run.handle = run.disk.reopen();
  run.session = await openSession({
    id: "long",
    storage: run.handle,
    registry: registry(),
    clock: run.clock,
    timers: run.timers,
    ids: sequentialIds(run.incarnation++ * 10_000),
    retainSettled: run.retainSettled,
    retention: run.policy,
  });
  run.session.subscribe(run.session.version, (change) => {
    for (const s of change.submissions) run.seen.submissions.set(s.id, s);
    for (const t of change.tasks) run.seen.tasks.set(t.id, t);
    for (const item of change.removed ?? []) run.removed.add(item.id);
  });
  await run.session.resume();
}

async function start(seed: number): Promise<Run> {
  const r = rng(seed);
  const archived = new Map<string, ArchivedItem>();
  const errors: unknown[] = [];
  const maxAgeMs = r.chance(0.5) ? 100 + r.int(400) : undefined;
  const policy: RetentionPolicy = {
    ...((maxAgeMs === undefined || r.chance(0.5)) && { keepSettled: r.int(6) }),
    ...(maxAgeMs !== undefined && { maxAgeMs }),
    ...(r.chance(0.5) && { auto: false }),
    archive: (batch) => {
      for (const item of batch) archived.set(item.id, item);
    },
    // A dead process's store handle is closed: its background collection failing on it is expected.
    onError: (error) => (error as { code?: string }).code !== "storage-closed" && errors.push(error),
  };
  const run = {
    disk: memoryStorage(),
    clock: new ManualClock(0),
    policy,
    retainSettled: 1 + r.int(3),
    requests: new Map(),
    seen: { submissions: new Map(), tasks: new Map() },
    archived,
    removed: new Set<string>(),
    errors,
    incarnation: 0,
  } as unknown as Run;
  await open(run);
  return run;
}

/** What memory and the view hold is all in storage, exactly as held. */
async function checkHeldIsStored(run: Run): Promise<void> {
  const view = run.session.view();
  for (const s of view.submissions)
    expect(await run.disk.readSubmission("long", s.id)).toEqual(row("submissions", s.id, s));
  for (const t of view.tasks) expect(await run.disk.readTask("long", t.id)).toEqual(row("tasks", t.id, t));
  for (const p of view.pending) expect(await run.disk.readTask("long", p.taskId)).toBeDefined();
}
const row = (table: string, id: string, value: unknown) => ({ key: `${table}/${id}`, value });

/** Every removed item: no row left, archived as it was last committed, finished when it went. */
async function checkRemoved(run: Run): Promise<void> {
  for (const id of run.removed) {
    const archived = run.archived.get(id);
    expect(archived, `removed item ${id} reached the archive`).toBeDefined();
    const item = archived as ArchivedItem;
    if (item.submission) {
      expect(await run.disk.readSubmission("long", id)).toBeUndefined();
      expect(item.submission).toEqual(run.seen.submissions.get(id));
      expect(isDone(item.submission)).toBe(true);
    }
    const tree = [...run.seen.tasks.values()].filter((t) => rootOf(run, t) === item.root);
    expect(item.tasks.map((t) => t.id).sort()).toEqual(tree.map((t) => t.id).sort());
    for (const task of item.tasks) {
      expect(task).toEqual(run.seen.tasks.get(task.id));
      expect(["succeeded", "failed", "cancelled"]).toContain(task.state.status);
      expect(await run.disk.readTask("long", task.id)).toBeUndefined();
    }
    if (item.root) expect(await run.disk.readTaskTree("long", item.root)).toEqual([]);
  }
}

function rootOf(run: Run, task: Task): string {
  let at = task;
  while (at.parentId !== undefined) at = run.seen.tasks.get(at.parentId) as Task;
  return at.id;
}

/** Collects until nothing more is removable; checks the policy's count and age bounds. */
async function collectAll(run: Run): Promise<CollectResult[]> {
  const results: CollectResult[] = [];
  // What the session holds now (nothing runs meanwhile: the caller waited for idle): none of it may go.
  const held = new Set(run.session.view().submissions.map((s) => s.id));
  for (const t of run.session.view().tasks) if (t.parentId === undefined) held.add(t.id);
  for (let result = await run.session.collect(); ; result = await run.session.collect()) {
    results.push(result);
    for (const item of result.removed) expect(held.has(item.id), `${item.id} was held`).toBe(false);
    const cutoff = run.clock.now() - (run.policy.maxAgeMs ?? 0);
    for (const item of result.removed) {
      const changed = Math.max(item.submission?.updatedAt ?? 0, ...item.tasks.map((t) => t.updatedAt));
      // Removed for its age, or beyond the count: never a young item under an age-only policy.
      if (run.policy.keepSettled === undefined) expect(changed).toBeLessThanOrEqual(cutoff);
    }
    if (!result.more) break;
  }
  const { count } = await run.disk.readSettled("long", 1);
  if (run.policy.keepSettled !== undefined) {
    expect(count).toBeLessThanOrEqual(run.policy.keepSettled + run.retainSettled);
    if (run.policy.maxAgeMs === undefined)
      expect(count).toBeGreaterThanOrEqual(Math.min(run.policy.keepSettled, count + run.removed.size));
  }
  return results;
}

async function step(run: Run, r: ReturnType<typeof rng>, n: number): Promise<void> {
  const action = r.next();
  if (action < 0.4) {
    const requestId = `r${n}`;
    const s = await run.session.submit({
      requestId,
      conversationId: `c${r.int(3)}`,
      input: INPUTS[r.int(INPUTS.length)] as string,
    });
    run.requests.set(requestId, s.id);
  } else if (action < 0.6) {
    const pending = run.session.pending();
    const wait = pending[r.int(pending.length)];
    if (wait) await run.session.signal(wait.key, { approved: r.chance(0.7) }, { requestId: `d-${wait.key}` });
  } else if (action < 0.8) {
    run.timers.advance(r.int(200));
  } else if (action < 0.93) {
    await collectAll(run);
    await checkHeldIsStored(run);
    await checkRemoved(run);
  } else {
    // The process dies: no close, no flush; a new one takes over with the next epoch.
    await run.handle.close();
    await open(run);
  }
  await run.session.whenIdle();
}

async function simulate(seed: number): Promise<Run> {
  const r = rng(seed);
  const run = await start(seed);
  for (let n = 0; n < 90; n++) await step(run, r, n);
  // Everything ends: every wait answered, time moves on; then what may go, goes.
  for (let guard = 0; run.session.unfinishedSubmissions() > 0 && guard < 50; guard++) {
    for (const wait of run.session.pending())
      await run.session.signal(wait.key, { approved: true }, { requestId: `end-${wait.key}` });
    run.timers.advance(1_000);
    await run.session.whenIdle();
  }
  expect(run.session.unfinishedSubmissions()).toBe(0);
  run.timers.advance(10_000);
  await collectAll(run);
  await checkHeldIsStored(run);
  await checkRemoved(run);
  expect(run.errors).toEqual([]);
  return run;
}

describe("retention", () => {
  it("removes only what the policy allows and nothing still held or needed (property, 60 seeds)", async () => {
    let removed = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const run = await simulate(seed);
      removed += run.removed.size;
      // A retried requestId: the same Submission while it is stored, refused once it was removed.
      const before = (await run.session.readSubmissions({ limit: 500 })).submissions.length;
      for (const [requestId, id] of run.requests) {
        const retry = run.session.submit({ requestId, conversationId: "c0", input: "again" });
        if (run.removed.has(id)) await expect(retry).rejects.toBeInstanceOf(DuplicateRequestError);
        else expect((await retry).id).toBe(id);
      }
      expect((await run.session.readSubmissions({ limit: 500 })).submissions.length).toBe(before);
      // A reopened session and a change stream folded from the start equal the live view.
      const reader = await openSession({
        id: "long",
        storage: run.disk.reopen(),
        mode: "read",
        retainSettled: run.retainSettled,
      });
      expect(reader.view()).toEqual(run.session.view());
      const { changes } = await run.session.readChanges(0, 100_000);
      let folded = emptyView("long", run.session.view().limits);
      for (const change of changes) folded = applyChangeToView(folded, change);
      expect(folded).toEqual(run.session.view());
    }
    // The policies did remove work (a property that holds because nothing was removed proves nothing).
    expect(removed).toBeGreaterThan(300);
  }, 120_000);
});

describe("retention, case by case", () => {
  async function session(policy: RetentionPolicy, retainSettled = 3) {
    const disk = memoryStorage();
    const clock = new ManualClock(0);
    const s = await openSession({
      id: "long",
      storage: disk,
      registry: registry(),
      clock,
      timers: new ManualTimers(clock),
      ids: sequentialIds(),
      retainSettled,
      retention: { auto: false, ...policy },
    });
    await s.resume();
    const turns: Submission[] = [];
    const submit = async (n: number, input = "hello") => {
      const sub = await s.submit({ requestId: `r${n}`, conversationId: "c", input });
      turns.push(await s.wait(sub.id));
      clock.advance(10);
    };
    return { disk, clock, s, turns, submit };
  }

  it("keeps the working set even when the policy would keep less", async () => {
    const { disk, s, turns, submit } = await session({ keepSettled: 0 });
    for (let n = 0; n < 8; n++) await submit(n, n % 2 ? "use work" : "hello");
    const { removed } = await s.collect();
    // The five oldest go; the three the session still holds (retainSettled: 3) stay, in memory and stored.
    expect(removed.map((i) => i.id)).toEqual(turns.slice(0, 5).map((t) => t.id));
    for (const held of s.view().submissions)
      expect((await disk.readSubmission("long", held.id))?.value).toEqual(held);
    expect(s.view().submissions.map((t) => t.id)).toEqual(
      turns
        .slice(5)
        .map((t) => t.id)
        .sort(),
    );
    expect((await disk.readSettled("long", 10)).count).toBe(3);
  });

  it("removes by age only what ended longer ago than the policy says", async () => {
    const { disk, clock, s, turns, submit } = await session({ maxAgeMs: 100 }, 1);
    for (let n = 0; n < 6; n++) await submit(n); // ended at 0, 10, …, 50
    clock.set(135); // older than 100 ms: those that ended at 0, 10, 20, 30
    const { removed } = await s.collect();
    expect(removed.map((i) => i.id)).toEqual(turns.slice(0, 4).map((t) => t.id));
    expect((await disk.readSettled("long", 10)).items.map((i) => i.id)).toEqual(
      turns.slice(4).map((t) => t.id),
    );
  });

  it("keeps a batch whose archive fails, and says why", async () => {
    const failing = await session({
      keepSettled: 1,
      archive: () => {
        throw new Error("archive bucket unreachable");
      },
    });
    for (let n = 0; n < 6; n++) await failing.submit(n);
    const version = failing.s.version;
    await expect(failing.s.collect()).rejects.toThrow("archive bucket unreachable");
    expect(failing.s.version).toBe(version); // nothing committed
    expect((await failing.disk.readSettled("long", 10)).count).toBe(6);
    for (const turn of failing.turns) expect(await failing.s.readSubmission(turn.id)).toEqual(turn);
  });

  it("collects on its own as work finishes, so storage stays bounded however long the session lives", async () => {
    const errors: unknown[] = [];
    const disk = memoryStorage();
    const s = await openSession({
      id: "auto",
      storage: disk,
      registry: registry(),
      ids: sequentialIds(),
      retainSettled: 2,
      retention: { keepSettled: 10, onError: (e) => errors.push(e) },
    });
    await s.resume();
    let highest = 0;
    for (let n = 0; n < 300; n++) {
      const sub = await s.submit({
        requestId: `r${n}`,
        conversationId: "c",
        input: n % 3 ? "use work" : "hi",
      });
      await s.wait(sub.id);
      await s.whenIdle();
      highest = Math.max(highest, (await disk.readSettled("auto", 1)).count);
    }
    await s.collect();
    expect(errors).toEqual([]);
    // Bounded by the policy plus what finishes while an automatic pass (every 16 finished) is in flight,
    // never by the 300 Submissions made.
    expect(highest).toBeLessThanOrEqual(10 + 2 * 16);
    expect((await disk.readSettled("auto", 1)).count).toBe(10);
    const page = await s.readSubmissions({ limit: 500 });
    expect(page.submissions.map((x) => x.requestId)).toEqual(
      Array.from({ length: 10 }, (_, i) => `r${299 - i}`),
    );
    // The conversation itself is kept whole: entries are not work items.
    expect((await s.readEntries("c", 0)).length).toBe(s.conversation("c")?.entryCount);
  });

  it("refuses a policy that is not what it looks like, before anything is opened or removed", async () => {
    const disk = memoryStorage();
    for (const retention of [
      { keepSettled: Number.NaN },
      { keepSettled: -1 },
      { keepSettled: 2.5 },
      { maxAgeMs: Number.NaN },
    ]) {
      await expect(openSession({ id: "bad", storage: disk, retention })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
    }
    await expect(openSession({ id: "bad", storage: disk, retainSettled: -1 })).rejects.toThrow(
      /retainSettled/,
    );
    // Nothing was created by the refused opens.
    expect(await disk.open("bad", { mode: "read", at: 0, entryTail: 1, settled: 1 })).toBeUndefined();
  });
});
