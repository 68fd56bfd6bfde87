import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createRegistry,
  defineTask,
  InvalidArgumentError,
  type Json,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  type Registry,
  sequentialIds,
  type Task,
  type WakeInfo,
} from "../../src/index.ts";
import { KillableStorage, SpyStorage } from "../support/storage-wrappers.ts";

/** Resolves when `signal` aborts: a phase that runs until it is told to stop. */
const untilAborted = (signal: AbortSignal) =>
  new Promise<never>((_, reject) =>
    signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
  );

const chain = defineTask({
  kind: "chain",
  version: 1,
  input: z.object({ steps: z.number().int().min(1) }),
  phases: {
    step: (ctx) => {
      const done = ((ctx.data as number | null) ?? 0) + 1;
      ctx.appendEntry("log", { kind: "note", text: `step ${done}` });
      return done < ctx.input.steps ? ctx.next("step", done) : ctx.complete({ steps: done });
    },
  },
});

const leaf = defineTask({
  kind: "leaf",
  version: 1,
  input: z.object({ fail: z.boolean().default(false), hang: z.boolean().default(false), value: z.number() }),
  phases: {
    run: async (ctx) => {
      if (ctx.input.hang) await untilAborted(ctx.signal);
      return ctx.input.fail ? ctx.fail(`leaf ${ctx.input.value} failed`) : ctx.complete(ctx.input.value);
    },
  },
});

const fanout = defineTask({
  kind: "fanout",
  version: 1,
  input: z.object({
    children: z.array(z.object({ fail: z.boolean(), hang: z.boolean(), value: z.number() })),
    policy: z.enum(["allSettled", "failFast"]),
  }),
  phases: {
    spawn: (ctx) => {
      const ids = ctx.input.children.map((child) => ctx.spawn("leaf", child));
      return ctx.wait(ids, { policy: ctx.input.policy, next: "report" });
    },
    report: (ctx) => ctx.complete(ctx.children().map((c) => ({ id: c.id, status: c.state.status }))),
  },
});

const napper = defineTask({
  kind: "napper",
  version: 1,
  input: z.object({ ms: z.number() }),
  phases: {
    start: (ctx) => ctx.sleep(ctx.clock.now() + ctx.input.ms, "woke", ctx.clock.now()),
    woke: (ctx) => ctx.complete({ slept: ctx.clock.now() - (ctx.data as number) }),
  },
});

const hanging = defineTask({
  kind: "hanging",
  version: 1,
  input: z.object({}),
  maxRestarts: 2,
  phases: { forever: (ctx) => untilAborted(ctx.signal) },
});

function registryWith(...extra: Parameters<Registry["registerTask"]>[0][]) {
  return createRegistry({ tasks: [chain, leaf, fanout, napper, hanging, ...extra] });
}

async function start(registry: Registry = registryWith(), storage = memoryStorage()) {
  const clock = new ManualClock(1_000);
  const timers = new ManualTimers(clock);
  const spy = new SpyStorage(storage);
  const wakes: WakeInfo[] = [];
  const session = await openSession({
    id: "tasks",
    storage: spy,
    registry,
    clock,
    timers,
    ids: sequentialIds(),
    onWake: (w) => wakes.push(w),
  });
  return { session, clock, timers, spy, storage, wakes };
}

describe("durable tasks", () => {
  it("runs phases in order, one commit per phase, staging entries with each transition", async () => {
    const { session, spy } = await start();
    await session.resume();
    const task = await session.spawn("chain", { steps: 4 });
    const before = spy.groups.length;
    const done = await session.waitForTask(task.id);
    expect(done.state).toEqual({ status: "succeeded", result: { steps: 4 } });
    expect(done.attempts).toBe(4);
    // Three more phases after the first: one commit each, nothing extra for restart bookkeeping.
    expect(spy.groups.length - before).toBe(4);
    expect(
      session.view().conversations[0]?.entries.map((e) => (e.content.kind === "note" ? e.content.text : "")),
    ).toEqual(["step 1", "step 2", "step 3", "step 4"]);
  });

  it("sleeps until a time, reports it as the next wake-up, and runs when the clock gets there", async () => {
    const { session, timers, wakes } = await start();
    await session.resume();
    const task = await session.spawn("napper", { ms: 5_000 });
    await session.whenIdle();
    expect(session.view().tasks[0]?.state).toEqual({ status: "sleeping", until: 6_000 });
    expect(wakes.at(-1)).toEqual({ runnableNow: false, nextWakeAt: 6_000 });
    timers.advance(4_999);
    await session.whenIdle();
    expect(session.view().tasks[0]?.state.status).toBe("sleeping");
    timers.advance(1);
    const done = await session.waitForTask(task.id);
    expect(done.state).toEqual({ status: "succeeded", result: { slept: 5_000 } });
    await session.whenIdle();
    expect(wakes.at(-1)).toEqual({ runnableNow: false, nextWakeAt: undefined });
  });

  it("allSettled waits for every child, then reports each one, failures included", async () => {
    const { session } = await start();
    await session.resume();
    const parent = await session.spawn("fanout", {
      policy: "allSettled",
      children: [
        { fail: false, hang: false, value: 1 },
        { fail: true, hang: false, value: 2 },
        { fail: false, hang: false, value: 3 },
      ],
    });
    const done = await session.waitForTask(parent.id);
    expect(done.state.status).toBe("succeeded");
    const report = (done.state as unknown as { result: { status: string }[] }).result;
    expect(report.map((r) => r.status)).toEqual(["succeeded", "failed", "succeeded"]);
  });

  it("failFast stops the other children, waits for them to wind down, then fails the parent", async () => {
    const { session, spy } = await start();
    await session.resume();
    const parent = await session.spawn("fanout", {
      policy: "failFast",
      children: [
        { fail: false, hang: true, value: 1 },
        { fail: true, hang: false, value: 2 },
        { fail: false, hang: true, value: 3 },
      ],
    });
    const done = await session.waitForTask(parent.id);
    expect(done.state).toMatchObject({ status: "failed", error: { code: "child-failed" } });
    const children = session.view().tasks.filter((t) => t.parentId === parent.id);
    expect(children.map((c) => c.state.status)).toEqual(["cancelled", "failed", "cancelled"]);
    // Never terminal before its children: in every committed version the parent ended after them.
    const { changes } = await session.readChanges(0, 1_000);
    const parentEnd = changes.find((c) =>
      c.tasks.some((t) => t.id === parent.id && t.state.status === "failed"),
    );
    const childEnds = children.map((child) =>
      changes.find((c) =>
        c.tasks.some((t) => t.id === child.id && ["cancelled", "failed"].includes(t.state.status)),
      ),
    );
    for (const end of childEnds) expect(end?.version).toBeLessThanOrEqual(parentEnd?.version ?? 0);
    expect(spy.groups.length).toBeGreaterThan(0);
  });

  it("cancels durably: the intent first, then the running phase's signal, children, and the terminal state", async () => {
    const { session } = await start();
    await session.resume();
    const parent = await session.spawn("fanout", {
      policy: "allSettled",
      children: [
        { fail: false, hang: true, value: 1 },
        { fail: false, hang: true, value: 2 },
      ],
    });
    await waitUntil(() => session.view().tasks.filter((t) => t.parentId === parent.id).length === 2);
    const intent = session.cancel(parent.id, "user pressed stop");
    await intent;
    expect(session.view().tasks.find((t) => t.id === parent.id)?.cancelRequested).toBe("user pressed stop");
    const done = await session.waitForTask(parent.id);
    expect(done.state).toEqual({ status: "cancelled", reason: "user pressed stop" });
    expect(
      session
        .view()
        .tasks.filter((t) => t.parentId === parent.id)
        .map((t) => t.state.status),
    ).toEqual(["cancelled", "cancelled"]);
  });

  it("a kind's onCancelled stages what a cancelled task leaves behind in the commit that ends it; a throwing one never blocks the cancel", async () => {
    const sleeper = (
      kind: string,
      onCancelled: NonNullable<Parameters<typeof defineTask>[0]["onCancelled"]>,
    ) =>
      defineTask({
        kind,
        version: 1,
        input: z.object({ label: z.string() }),
        onCancelled,
        phases: {
          nap: (ctx) => ctx.sleep(ctx.clock.now() + 60_000, "done"),
          done: (ctx) => ctx.complete(null),
        },
      });
    const noting = sleeper("noting", (task, stage) =>
      stage.appendEntry("log", {
        kind: "note",
        text: `${(task.input as { label: string }).label}: ${task.state.status}`,
      }),
    );
    const throwing = sleeper("throwing", () => {
      throw new Error("a bug in the hook");
    });
    const { session, timers } = await start(registryWith(noting, throwing));
    await session.resume();
    const [a, b, c] = [
      await session.spawn("noting", { label: "a" }),
      await session.spawn("throwing", { label: "b" }),
      await session.spawn("noting", { label: "c" }),
    ];
    await waitUntil(() => session.view().tasks.every((t) => t.state.status === "sleeping"));
    const before = session.version;
    await session.cancel(a.id, "stop a");
    await session.cancel(b.id, "stop b");
    const { changes } = await session.readChanges(before);
    // The note is committed with the cancelled state, and names the task.
    const ending = changes.find((ch) =>
      ch.tasks.some((t) => t.id === a.id && t.state.status === "cancelled"),
    );
    expect(ending?.entries.map((e) => [e.content, e.taskId])).toEqual([
      [{ kind: "note", text: "a: cancelled" }, a.id],
    ]);
    expect((await session.waitForTask(b.id)).state).toEqual({ status: "cancelled", reason: "stop b" });
    // A task that ends otherwise leaves nothing.
    timers.advance(60_001);
    expect((await session.waitForTask(c.id)).state.status).toBe("succeeded");
    const notes = session
      .view()
      .conversations.flatMap((conv) => conv.entries)
      .map((e) => e.content);
    expect(notes).toEqual([{ kind: "note", text: "a: cancelled" }]);
  });

  it("a cancel that reaches a task winding down keeps its outcome (a failure stays a failure) and stops its children", async () => {
    let release: () => void = () => undefined;
    const stubborn = defineTask({
      kind: "stubborn",
      version: 1,
      input: z.object({}),
      phases: {
        run: async (ctx) => {
          await new Promise<void>((resolve) => (release = resolve)); // finishes its write even when told to stop
          return ctx.complete(1);
        },
      },
    });
    const failing = defineTask({
      kind: "failing-fanout",
      version: 1,
      input: z.object({}),
      phases: {
        spawn: (ctx) => {
          const ids = [ctx.spawn("stubborn", {}), ctx.spawn("leaf", { fail: true, value: 2 })];
          return ctx.wait(ids, { policy: "failFast", next: "report" });
        },
        report: (ctx) => ctx.complete(null),
      },
    });
    const leaving = defineTask({
      kind: "leaving",
      version: 1,
      input: z.object({}),
      phases: {
        run: (ctx) => {
          ctx.spawn("leaf", { hang: true, value: 1 });
          return ctx.complete("done"); // its child still runs: it winds down with an outcome of success
        },
      },
    });
    const { session } = await start(registryWith(stubborn, failing, leaving));
    await session.resume();
    const failed = await session.spawn("failing-fanout", {});
    await waitUntil(() => session.task(failed.id)?.state.status === "completing");
    await session.cancel(failed.id, "user pressed stop");
    release();
    expect((await session.waitForTask(failed.id)).state).toMatchObject({
      status: "failed",
      error: { code: "child-failed" },
    });
    const succeeded = await session.spawn("leaving", {});
    await waitUntil(() => session.task(succeeded.id)?.state.status === "completing");
    await session.cancel(succeeded.id, "user pressed stop");
    expect((await session.waitForTask(succeeded.id)).state).toEqual({ status: "succeeded", result: "done" });
    const child = session.view().tasks.find((t) => t.parentId === succeeded.id);
    expect(child?.state).toMatchObject({ status: "cancelled", reason: "user pressed stop" });
  });

  it("fails a crash-looping phase with the restart reason instead of re-running it forever", async () => {
    const disk = memoryStorage();
    let handle = new KillableStorage(disk.reopen());
    let session = await openSession({ id: "loop", storage: handle, registry: registryWith() });
    await session.resume();
    const task = await session.spawn("hanging", {});
    for (let crash = 1; crash <= 3; crash++) {
      handle.kill(); // the process dies in the middle of the phase
      handle = new KillableStorage(disk.reopen());
      session = await openSession({ id: "loop", storage: handle, registry: registryWith() });
      const stored = session.view().tasks[0] as Task;
      expect(stored.restarts).toBe(crash - 1);
      await session.resume();
    }
    const done = await session.waitForTask(task.id);
    expect(done.state).toMatchObject({ status: "failed", error: { code: "restart-limit" } });
    expect((done.state as { error: { message: string } }).error.message).toContain(
      'phase "forever" was interrupted 3 times',
    );
    handle.kill();
  });

  it("re-enters an interrupted phase from its start as a counted attempt, after reopening", async () => {
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    const gate: { release: () => void } = { release: () => undefined };
    let entries = 0;
    const once = defineTask({
      kind: "once",
      version: 1,
      input: z.object({}),
      phases: {
        work: async (ctx) => {
          entries++;
          if (entries === 1) await new Promise<void>((resolve) => (gate.release = resolve));
          return ctx.complete({ entries, attempt: ctx.attempt, restarts: ctx.restarts });
        },
      },
    });
    const a = await openSession({
      id: "reenter",
      storage: first,
      registry: createRegistry({ tasks: [once] }),
    });
    await a.resume();
    const task = await a.spawn("once", {});
    await waitUntil(() => entries === 1);
    first.kill();
    const b = await openSession({
      id: "reenter",
      storage: disk.reopen(),
      registry: createRegistry({ tasks: [once] }),
    });
    expect(b.previewRecovery()).toEqual({
      events: [{ type: "restarted", taskId: task.id, phase: "work" }],
      blocked: [],
      sleeping: [],
      awaiting: [],
    });
    await b.resume();
    const done = await b.waitForTask(task.id);
    expect(done.state).toEqual({ status: "succeeded", result: { entries: 2, attempt: 2, restarts: 1 } });
    gate.release();
  });

  it("blocks tasks of unknown kinds with a reason, and runs them once the kind is registered", async () => {
    const disk = memoryStorage();
    const { session } = await start(registryWith(), disk);
    const task = await session.spawn("chain", { steps: 2 });
    await session.close();
    const later = await start(createRegistry({ tasks: [leaf] }), disk);
    await later.session.resume();
    expect(later.session.view().blocked).toEqual([
      { kind: "task", id: task.id, record: `tasks/${task.id}`, reason: 'no task kind "chain" is registered' },
    ]);
    expect(later.session.view().tasks[0]?.state.status).toBe("running");
    later.session.registerTask(chain);
    const done = await later.session.waitForTask(task.id);
    expect(done.state).toEqual({ status: "succeeded", result: { steps: 2 } });
    expect(later.session.view().blocked).toEqual([]);
  });

  it("lets go of a closed session: a registry shared by many sessions keeps none of them alive", async () => {
    setFlagsFromString("--expose-gc");
    const collectGarbage = runInNewContext("gc") as () => void;
    const shared = registryWith();
    const closed: WeakRef<object>[] = [];
    // Each session lives in its own function, so no frame of this test still refers to it.
    const runAndClose = async () => {
      const { session } = await start(shared);
      await session.resume();
      const task = await session.spawn("chain", { steps: 3 });
      await session.waitForTask(task.id);
      closed.push(new WeakRef(session));
      await session.close();
    };
    for (let i = 0; i < 3; i++) await runAndClose();
    // Registering a kind afterwards reaches no closed session (it would resume none of their work).
    shared.registerTask(
      defineTask({ kind: "late", version: 1, input: z.object({}), phases: { run: (c) => c.complete() } }),
    );
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 0)); // weak references hold until the job ends
      collectGarbage();
    }
    expect(closed.map((ref) => ref.deref() === undefined)).toEqual([true, true, true]);
  });

  it("migrates a stored task of an older version, or blocks it when no migration exists", async () => {
    const disk = memoryStorage();
    const v1 = defineTask({
      kind: "greet",
      version: 1,
      input: z.object({ name: z.string() }),
      phases: { hello: (ctx) => ctx.complete(`hello ${ctx.input.name}`) },
    });
    const { session } = await start(createRegistry({ tasks: [v1] }), disk);
    const task = await session.spawn("greet", { name: "Ana" });
    await session.close();

    const v2NoMigration = defineTask({
      kind: "greet",
      version: 2,
      input: z.object({ first: z.string() }),
      phases: { hello: (ctx) => ctx.complete(`hi ${ctx.input.first}`) },
    });
    const blocked = await start(createRegistry({ tasks: [v2NoMigration] }), disk);
    await blocked.session.resume();
    expect(blocked.session.view().blocked[0]?.reason).toBe(
      'no migration of "greet" from version 1 to 2 is registered',
    );
    await blocked.session.close();

    const v2 = defineTask({
      ...v2NoMigration,
      migrations: {
        1: (stored) => ({ ...stored, input: { first: (stored.input as { name: string }).name } }),
      },
    });
    const migrated = await start(createRegistry({ tasks: [v2] }), disk);
    await migrated.session.resume();
    const done = await migrated.session.waitForTask(task.id);
    expect(done).toMatchObject({
      kindVersion: 2,
      input: { first: "Ana" },
      state: { status: "succeeded", result: "hi Ana" },
    });
  });

  it("starts a root task for each Submission in the same commit, and ends the Submission with it", async () => {
    const registry = createRegistry({
      tasks: [chain],
      submissionTask: (submission) => ({
        kind: "chain",
        input: { steps: (submission.input as string).length },
      }),
    });
    const { session, spy } = await start(registry);
    await session.resume();
    const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "abc" });
    expect(submission.status).toBe("running");
    expect(spy.groups[0]?.[0]?.tasks.map((t) => t.id)).toEqual([submission.taskId]);
    const done = await session.wait(submission.id);
    expect(done).toMatchObject({ status: "succeeded", result: { steps: 3 } });
    expect(await session.wait(submission.id)).toEqual(done);
  });

  it("cancelling a Submission cancels its task tree and ends the Submission cancelled", async () => {
    const registry = createRegistry({
      tasks: [leaf, fanout],
      submissionTask: () => ({
        kind: "fanout",
        input: { policy: "allSettled", children: [{ fail: false, hang: true, value: 1 }] },
      }),
    });
    const { session } = await start(registry);
    await session.resume();
    const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "go" });
    await waitUntil(() => session.view().tasks.length === 2);
    await session.cancelSubmission(submission.id, "changed my mind");
    const done = await session.wait(submission.id);
    expect(done.status).toBe("cancelled");
    expect(session.view().tasks.map((t) => t.state.status)).toEqual(["cancelled", "cancelled"]);
  });

  it("turns bad task input and throwing phases into typed errors, never a crash", async () => {
    const boom = defineTask({
      kind: "boom",
      version: 1,
      input: z.object({}),
      phases: {
        go: () => {
          throw new TypeError("tool exploded");
        },
      },
    });
    const badData = defineTask({
      kind: "bad-data",
      version: 1,
      input: z.object({}),
      phases: {
        go: (ctx) => ctx.next("go", { when: new Date() } as unknown as Json),
        later: (ctx) => ctx.complete(),
      },
    });
    const { session } = await start(registryWith(boom, badData));
    await session.resume();
    await expect(session.spawn("chain", { steps: "many" })).rejects.toMatchObject({
      code: "invalid-argument",
    });
    await expect(session.spawn("nope", {})).rejects.toBeInstanceOf(Error);
    const a = await session.spawn("boom", {});
    expect((await session.waitForTask(a.id)).state).toEqual({
      status: "failed",
      error: { name: "TypeError", code: "phase-failed", message: "tool exploded" },
    });
    const b = await session.spawn("bad-data", {});
    expect((await session.waitForTask(b.id)).state).toMatchObject({
      status: "failed",
      error: { code: "invalid-record" },
    });
    await expect(session.cancel("missing")).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1_000 && !condition(); i++) await new Promise((resolve) => setImmediate(resolve));
  expect(condition()).toBe(true);
}

describe("restart counting", () => {
  const once = defineTask({
    kind: "once",
    version: 1,
    maxRestarts: 0, // any counted restart fails it
    input: z.object({}),
    phases: { run: (ctx) => ctx.complete({ ran: true }) },
  });

  it("does not count a restart for work this process created before resume(): it never ran anywhere", async () => {
    const storage = memoryStorage();
    const session = await openSession({ id: "s", storage, registry: createRegistry({ tasks: [once] }) });
    const task = await session.spawn("once", {});
    // A fresh process could not tell and would count it; this one knows it created the task itself.
    expect(session.previewRecovery().events.map((a) => a.type)).toEqual(["restart-limit"]);
    await session.resume();
    const done = await session.waitForTask(task.id);
    expect(done.state.status).toBe("succeeded");
    expect(done.restarts).toBe(0);
  });

  /** A task whose only phase hangs, started and then cut off by its process going away mid-phase. */
  async function diedMidPhase(maxRestarts?: number) {
    const hangs = defineTask({
      kind: "hangs",
      version: 1,
      ...(maxRestarts !== undefined && { maxRestarts }),
      input: z.object({}),
      phases: { run: (ctx) => untilAborted(ctx.signal) },
    });
    const storage = memoryStorage();
    const registry = () => createRegistry({ tasks: [hangs] });
    const first = await openSession({ id: "s", storage, registry: registry() });
    const task = await first.spawn("hangs", {});
    await first.resume(); // starts the phase: not a restart
    await first.close(); // the process goes away mid-phase
    return { storage, registry, task };
  }

  it("counts one restart per process death for a phase that was running when the process died", async () => {
    const { storage, registry, task } = await diedMidPhase(1);
    const second = await openSession({ id: "s", storage: storage.reopen(), registry: registry() });
    await second.resume();
    expect(second.view().tasks.find((t) => t.id === task.id)?.restarts).toBe(1);
    await second.close();
    const third = await openSession({ id: "s", storage: storage.reopen(), registry: registry() });
    await third.resume(); // a second death mid-phase: over the limit of 1
    const failed = await third.waitForTask(task.id);
    expect(failed.state).toMatchObject({ status: "failed", error: { code: "restart-limit" } });
    await third.close();
  });

  it("previews recovery with the session's own restart limit, the one resume() applies", async () => {
    const { storage, registry, task } = await diedMidPhase();
    const second = await openSession({
      id: "s",
      storage: storage.reopen(),
      registry: registry(),
      maxRestarts: 0,
    });
    expect(second.previewRecovery().events.map((a) => a.type)).toEqual(["restart-limit"]);
    await second.resume();
    const failed = await second.waitForTask(task.id);
    expect(failed.state).toMatchObject({ status: "failed", error: { code: "restart-limit" } });
    await second.close();
  });
});

describe("observe-only waits", () => {
  it("stop when their signal aborts, and a later end of the work still reaches new waiters", async () => {
    const gate = defineTask({
      kind: "gate",
      version: 1,
      input: z.object({}),
      phases: { run: (ctx) => untilAborted(ctx.signal) },
    });
    const session = await openSession({
      id: "s",
      storage: memoryStorage(),
      registry: createRegistry({ tasks: [gate] }),
    });
    const task = await session.spawn("gate", {});
    await session.resume();
    const controller = new AbortController();
    const waiting = session.waitForTask(task.id, { signal: controller.signal });
    controller.abort(new Error("gave up"));
    await expect(waiting).rejects.toThrow("gave up");
    const versionWait = session.waitForVersion(session.version + 1);
    await session.cancel(task.id, "enough");
    await versionWait;
    expect((await session.waitForTask(task.id)).state.status).toBe("cancelled");
    await session.close();
  });
});
