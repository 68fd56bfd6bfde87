/**
 * The task machine alone: state × event → next state or typed refusal, with no storage and no scheduler.
 * Then the boundaries around it: what an app's draft and a deferred commit may write.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  APPLIES_TO,
  createRegistry,
  defineDocument,
  defineTask,
  InvalidArgumentError,
  InvalidTaskEventError,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  RefusedWriteError,
  sequentialIds,
  type Task,
  type TaskEvent,
  type TaskState,
  type TaskStatus,
} from "../../src/index.ts";
import { KernelDraft } from "../../src/session/draft.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";
import { SessionState } from "../../src/session/state.ts";
import { dispatch } from "../../src/tasks/machine.ts";
import { SpyStorage } from "../support/storage-wrappers.ts";

const kind = defineTask({
  kind: "k",
  version: 1,
  input: z.object({ n: z.number() }),
  data: { a: z.null(), b: z.number().nullable(), c: z.any() },
  phases: {
    a: (ctx) => ctx.next("b", 1),
    b: (ctx) => ctx.complete(ctx.data),
    c: (ctx) => ctx.complete(null),
  },
});
const registry = createRegistry({ tasks: [kind] });

function record(id: string, state: TaskState, extra: Partial<Task> = {}): Task {
  return {
    id,
    kind: "k",
    kindVersion: 1,
    input: { n: 1 },
    state,
    checkpoint: { phase: "a", data: null },
    attempts: 1,
    restarts: 0,
    createdAt: 0,
    updatedAt: 0,
    ...extra,
  };
}

const STATES: Record<TaskStatus, TaskState> = {
  pending: { status: "pending" },
  running: { status: "running" },
  sleeping: { status: "sleeping", until: 50 },
  waiting: { status: "waiting", children: ["t/done"], policy: "allSettled", thenPhase: "b" },
  awaiting: {
    status: "awaiting",
    keys: ["k:1"],
    mode: "any",
    thenPhase: "c",
    since: 0,
    deadline: { at: 50, phase: "c" },
  },
  completing: { status: "completing", outcome: "succeeded", result: 7 },
  succeeded: { status: "succeeded", result: 7 },
  failed: { status: "failed", error: { name: "TaskError", code: "failed", message: "no" } },
  cancelled: { status: "cancelled", reason: "stop" },
};

/** A draft over a state holding task `t` in `status`, with one child `t/done` that has already succeeded. */
function draftWith(status: TaskStatus): KernelDraft {
  const state = new SessionState("s", 0, 10);
  state.putTask(record("t", STATES[status]));
  state.putTask(record("t/done", { status: "succeeded", result: 1 }, { parentId: "t" }));
  return new KernelDraft(state, registry, 1, 100);
}

const EVENTS: Record<string, TaskEvent> = {
  "phase-ended next": {
    type: "phase-ended",
    taskId: "t",
    transition: { type: "next", phase: "b", data: 2 },
    aborted: false,
  },
  "phase-ended complete": {
    type: "phase-ended",
    taskId: "t",
    transition: { type: "complete", result: 3 },
    aborted: false,
  },
  "phase-failed": { type: "phase-failed", taskId: "t", error: { name: "E", code: "boom", message: "boom" } },
  "cancel-requested": { type: "cancel-requested", taskId: "t", reason: "user" },
  woke: { type: "woke", taskId: "t", phase: "a" },
  started: { type: "started", taskId: "t", phase: "a" },
  restarted: { type: "restarted", taskId: "t", phase: "a" },
  "restart-limit": { type: "restart-limit", taskId: "t", phase: "a", restarts: 4 },
  "join-rechecked": { type: "join-rechecked", taskId: "t", open: 0 },
  "child-ended": { type: "child-ended", taskId: "t", childId: "t/done" },
  "deadline-passed": { type: "deadline-passed", taskId: "t", phase: "c" },
  migrated: {
    type: "migrated",
    taskId: "t",
    from: 1,
    to: 1,
    input: { n: 2 },
    checkpoint: { phase: "b", data: null },
  },
};

/** What each event does to a task in each state: its next status, "refused", or "same" (nothing changes). */
const TABLE: Record<TaskStatus, Record<keyof typeof EVENTS, TaskStatus | "refused" | "same">> = {
  running: {
    "phase-ended next": "running",
    "phase-ended complete": "succeeded",
    "phase-failed": "failed",
    "cancel-requested": "running", // marked; the running phase is signalled and ends it
    woke: "refused",
    started: "refused",
    restarted: "running",
    "restart-limit": "failed",
    "join-rechecked": "refused",
    "child-ended": "same",
    "deadline-passed": "refused",
    migrated: "running",
  },
  pending: {
    "phase-ended next": "running",
    "phase-ended complete": "succeeded",
    "phase-failed": "failed",
    "cancel-requested": "cancelled",
    woke: "refused",
    started: "running",
    restarted: "refused",
    "restart-limit": "refused",
    "join-rechecked": "refused",
    "child-ended": "same",
    "deadline-passed": "refused",
    migrated: "pending",
  },
  sleeping: {
    "phase-ended next": "refused",
    "phase-ended complete": "refused",
    "phase-failed": "refused",
    "cancel-requested": "cancelled",
    woke: "running",
    started: "refused",
    restarted: "refused",
    "restart-limit": "refused",
    "join-rechecked": "refused",
    "child-ended": "same",
    "deadline-passed": "refused",
    migrated: "sleeping",
  },
  waiting: {
    "phase-ended next": "refused",
    "phase-ended complete": "refused",
    "phase-failed": "refused",
    "cancel-requested": "cancelled",
    woke: "refused",
    started: "refused",
    restarted: "refused",
    "restart-limit": "refused",
    "join-rechecked": "running", // its only child has ended: the join is due
    "child-ended": "running",
    "deadline-passed": "refused",
    migrated: "waiting",
  },
  completing: {
    "phase-ended next": "refused",
    "phase-ended complete": "refused",
    "phase-failed": "refused",
    "cancel-requested": "completing", // its outcome stays; its children are asked to stop
    woke: "refused",
    started: "refused",
    restarted: "refused",
    "restart-limit": "refused",
    "join-rechecked": "succeeded",
    "child-ended": "succeeded",
    "deadline-passed": "refused",
    migrated: "completing",
  },
  awaiting: {
    "phase-ended next": "refused",
    "phase-ended complete": "refused",
    "phase-failed": "refused",
    "cancel-requested": "cancelled", // the wait ends with its task: no signal can revive it
    woke: "refused",
    started: "refused",
    restarted: "refused",
    "restart-limit": "refused",
    "join-rechecked": "refused",
    "child-ended": "same",
    "deadline-passed": "running",
    migrated: "awaiting",
  },
  succeeded: terminalRow(),
  failed: terminalRow(),
  cancelled: terminalRow(),
};

function terminalRow(): Record<keyof typeof EVENTS, "refused" | "same"> {
  const row = Object.fromEntries(Object.keys(EVENTS).map((name) => [name, "refused" as const]));
  return { ...row, "cancel-requested": "same", "child-ended": "same" };
}

describe("the task machine", () => {
  for (const status of Object.keys(TABLE) as TaskStatus[]) {
    for (const [name, event] of Object.entries(EVENTS)) {
      const expected = TABLE[status][name];
      it(`${status} × ${name} → ${expected}`, () => {
        const draft = draftWith(status);
        if (expected === "refused") {
          expect(() => dispatch(draft, event)).toThrow(InvalidTaskEventError);
          expect(draft.isEmpty).toBe(true); // a refused event changes nothing
          return;
        }
        dispatch(draft, event);
        const after = draft.task("t") as Task;
        if (expected === "same") expect(after).toEqual(record("t", STATES[status]));
        else expect(after.state.status).toBe(expected);
      });
    }
  }

  it("has a row for every status and agrees with its own APPLIES_TO table", () => {
    for (const status of Object.keys(STATES) as TaskStatus[]) {
      for (const [name, event] of Object.entries(EVENTS)) {
        if (event.type === "spawn" || event.type.startsWith("submission")) continue;
        const applies = (APPLIES_TO as Record<string, readonly TaskStatus[]>)[event.type]?.includes(status);
        expect(TABLE[status][name] !== "refused", `${status} × ${name}`).toBe(applies);
      }
    }
  });

  it("counts a restart only for a re-entry after an interruption", () => {
    const restarted = draftWith("running");
    dispatch(restarted, EVENTS.restarted as TaskEvent);
    expect(restarted.task("t")).toMatchObject({ restarts: 1, attempts: 2 });
    const woke = draftWith("sleeping");
    dispatch(woke, EVENTS.woke as TaskEvent);
    expect(woke.task("t")).toMatchObject({ restarts: 0, attempts: 2, checkpoint: { phase: "a" } });
  });

  it("lets a completion win over a cancel that arrived during the phase, and a cancel win over the rest", () => {
    const marked = () => {
      const state = new SessionState("s", 0, 10);
      state.putTask(record("t", { status: "running" }, { cancelRequested: "user" }));
      return new KernelDraft(state, registry, 1, 100);
    };
    const completed = marked();
    dispatch(completed, EVENTS["phase-ended complete"] as TaskEvent);
    expect(completed.task("t")?.state).toEqual({ status: "succeeded", result: 3 });
    const moved = marked();
    dispatch(moved, EVENTS["phase-ended next"] as TaskEvent);
    expect(moved.task("t")?.state).toEqual({ status: "cancelled", reason: "user" });
    const abortedFail = marked();
    dispatch(abortedFail, {
      type: "phase-ended",
      taskId: "t",
      transition: { type: "fail", error: { name: "AbortError", code: "aborted", message: "aborted" } },
      aborted: true,
    });
    expect(abortedFail.task("t")?.state.status).toBe("cancelled");
  });

  it("ends a task created in the commit that cancels it at once: its first phase cannot have started", () => {
    const state = new SessionState("s", 0, 10);
    const draft = new KernelDraft(state, registry, 1, 100);
    dispatch(draft, { type: "spawn", task: { id: "new", kind: "k", input: { n: 1 } } });
    dispatch(draft, { type: "cancel-requested", taskId: "new", reason: "user" });
    expect(draft.task("new")?.state).toEqual({ status: "cancelled", reason: "user" });
    // One from an earlier commit may be running: it is marked, and its phase ends it.
    state.putTask(record("old", { status: "running" }, { createdVersion: 0 }));
    dispatch(draft, { type: "cancel-requested", taskId: "old", reason: "user" });
    expect(draft.task("old")).toMatchObject({ state: { status: "running" }, cancelRequested: "user" });
  });

  it("fails a transition into an inherited key or with checkpoint data its phase's schema refuses", () => {
    const inherited = draftWith("running");
    dispatch(inherited, {
      type: "phase-ended",
      taskId: "t",
      transition: { type: "next", phase: "toString", data: null },
      aborted: false,
    });
    expect(inherited.task("t")?.state).toMatchObject({ status: "failed", error: { code: "unknown-phase" } });
    const badData = draftWith("running");
    dispatch(badData, {
      type: "phase-ended",
      taskId: "t",
      transition: { type: "next", phase: "b", data: "not a number" },
      aborted: false,
    });
    expect(badData.task("t")?.state).toMatchObject({
      status: "failed",
      error: { code: "invalid-checkpoint" },
    });
  });

  it("refuses spawns it cannot honour, naming the field, and writes nothing", () => {
    const cases: [string, TaskEvent, string][] = [
      ["unknown kind", { type: "spawn", task: { id: "n", kind: "nope", input: {} } }, "kind"],
      ["bad input", { type: "spawn", task: { id: "n", kind: "k", input: { n: "x" } } }, "input"],
      ["duplicate id", { type: "spawn", task: { id: "t", kind: "k", input: { n: 1 } } }, "id"],
      [
        "inherited phase",
        { type: "spawn", task: { id: "n", kind: "k", input: { n: 1 }, phase: "toString" } },
        "phase",
      ],
      [
        "ended parent",
        { type: "spawn", task: { id: "n", kind: "k", input: { n: 1 }, parentId: "t" } },
        "parentId",
      ],
      [
        "bad data",
        { type: "spawn", task: { id: "n", kind: "k", input: { n: 1 }, phase: "b", data: "x" } },
        "data",
      ],
    ];
    for (const [name, event, path] of cases) {
      const draft = draftWith("succeeded");
      let thrown: unknown;
      try {
        dispatch(draft, event);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, name).toBeInstanceOf(InvalidArgumentError);
      expect((thrown as InvalidArgumentError).issues[0]?.path, name).toBe(path);
      expect(draft.isEmpty, name).toBe(true);
    }
  });

  it("accepts a Submission with its root task, refuses a second one for the same requestId, and ends it with its task", () => {
    const draft = new KernelDraft(new SessionState("s", 0, 10), registry, 1, 100);
    const submission = { id: "sub", requestId: "r1", conversationId: "main", input: "hi", entrySeq: 0 };
    dispatch(draft, {
      type: "submission-accepted",
      submission: { ...submission, root: { taskId: "root", kind: "k", input: { n: 1 } } },
    });
    expect(draft.submission("sub")).toMatchObject({ status: "running", taskId: "root" });
    expect(draft.task("root")).toMatchObject({ state: { status: "running" }, submissionId: "sub" });
    expect(() =>
      dispatch(draft, { type: "submission-accepted", submission: { ...submission, id: "other" } }),
    ).toThrow(InvalidArgumentError);
    dispatch(draft, {
      type: "phase-ended",
      taskId: "root",
      transition: { type: "complete", result: "ok" },
      aborted: false,
    });
    expect(draft.submission("sub")).toMatchObject({ status: "succeeded", result: "ok" });
    dispatch(draft, { type: "submission-cancel-requested", submissionId: "sub", reason: "late" });
    expect(draft.submission("sub")?.status).toBe("succeeded"); // an ended Submission never changes again
  });

  it("fails a failFast parent on its first failed child and asks the others to stop", () => {
    const state = new SessionState("s", 0, 10);
    state.putTask(
      record("p", { status: "waiting", children: ["p/1", "p/2"], policy: "failFast", thenPhase: "b" }),
    );
    state.putTask(record("p/1", { status: "running" }, { parentId: "p" }));
    state.putTask(record("p/2", { status: "sleeping", until: 99 }, { parentId: "p" }));
    const draft = new KernelDraft(state, registry, 1, 100);
    dispatch(draft, {
      type: "phase-failed",
      taskId: "p/1",
      error: { name: "E", code: "x", message: "broke" },
    });
    expect(draft.task("p/2")?.state).toEqual({ status: "cancelled", reason: "parent p failed" });
    expect(draft.task("p")?.state).toMatchObject({ status: "failed", error: { code: "child-failed" } });
  });
});

describe("drafts by role", () => {
  const plan = defineDocument({ type: "plan", schema: z.object({ steps: z.array(z.string()) }) });
  const live = defineDocument({ type: "live", schema: z.object({ text: z.string() }), progress: true });

  async function open() {
    const clock = new ManualClock(0);
    const storage = new SpyStorage(memoryStorage());
    const session = await openSession({
      id: "roles",
      storage,
      registry: createRegistry({ tasks: [kind], documents: [plan, live] }),
      clock,
      timers: new ManualTimers(clock),
      ids: sequentialIds(),
    });
    return { session, storage };
  }

  it("gives an app's commit no way to write task or Submission records", async () => {
    const { session } = await open();
    await session.submit({ requestId: "r1", conversationId: "main", input: "hi" });
    const before = session.version;
    for (const method of ["writeTask", "writeSubmission", "putTask", "putSubmission", "seal"]) {
      await expect(
        session.commit((d) => (d as unknown as Record<string, () => void>)[method]?.call(d) ?? "absent"),
      ).resolves.toMatchObject({ value: "absent" });
    }
    expect(session.version).toBe(before);
  });

  it("lets an app spawn only through the machine, which validates like any other spawn", async () => {
    const { session } = await open();
    const { value: id } = await session.commit((d) => d.spawn("k", { n: 1 }, { id: "mine" }));
    expect(session.view().tasks.find((t) => t.id === id)?.state.status).toBe("running");
    await expect(session.commit((d) => d.spawn("k", { n: "bad" }))).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
  });

  it("refuses an app's write to a kernel-owned document and keeps what was committed", async () => {
    const { session } = await open();
    await session.commit((d) => d.setDocument("p", "plan", { steps: ["a"] }));
    const before = session.view();
    const refused = session.commit((d) => {
      d.appendEntry("main", { kind: "note", text: "lost" });
      d.setDocument("stream:x", "model-stream", { round: 1, chunks: [] });
    });
    await expect(refused).rejects.toBeInstanceOf(RefusedWriteError);
    await expect(refused).rejects.toMatchObject({ record: "documents/stream:x" });
    expect(session.view()).toEqual(before);
  });

  it("gives a deferred commit progress documents only, refusing anything else by name", async () => {
    const { session, storage } = await open();
    await session.commit((d) => d.setDocument("p", "plan", { steps: [] }));
    const live1 = session.commit((d) => d.setDocument("l", "live", { text: "partial" }), { deferred: true });
    const critical = session.commit(
      (d) =>
        (d as unknown as { setDocument: (...a: unknown[]) => void }).setDocument("p", "plan", {
          steps: ["x"],
        }),
      { deferred: true },
    );
    await session.flush();
    await expect(live1).resolves.toBeDefined();
    await expect(critical).rejects.toMatchObject({ name: "RefusedWriteError", record: "documents/p" });
    expect(session.view().documents.find((d) => d.id === "p")?.value).toEqual({ steps: [] });
    // The kernel's own pipeline refuses the same at seal time, whatever draft built it.
    const entry = commitAsKernel(session, (d) => d.appendEntry("main", { kind: "note", text: "x" }), {
      deferred: true,
    });
    await session.flush();
    const task = commitAsKernel(session, (d) => d.writeTask(record("w", { status: "running" })), {
      deferred: true,
    });
    await session.flush();
    await expect(entry).rejects.toMatchObject({ code: "refused-write", record: "entries/main/0" });
    await expect(task).rejects.toMatchObject({ code: "refused-write", record: "tasks/w" });
    expect(
      storage.groups.flat().some((c) => c.deferred && (c.entries.length > 0 || c.tasks.length > 0)),
    ).toBe(false);
  });
});

describe("recovery as events", () => {
  it("previews exactly the events resume() dispatches", async () => {
    const clock = new ManualClock(1_000);
    const disk = memoryStorage();
    const first = await openSession({ id: "r", storage: disk, registry, clock, ids: sequentialIds() });
    await commitAsKernel(first, (d) => {
      const at = { createdVersion: d.version };
      d.writeTask(record("run", { status: "running" }, at));
      d.writeTask(record("due", { status: "sleeping", until: 500 }, at));
      d.writeTask(record("later", { status: "sleeping", until: 5_000 }, at));
      d.writeTask(record("loop", { status: "running" }, { restarts: 3, ...at }));
      d.writeTask(record("unknown", { status: "running" }, { kind: "gone", ...at }));
    });
    await first.close();
    const spy = new SpyStorage(disk);
    const second = await openSession({ id: "r", storage: spy, registry, clock, ids: sequentialIds(100) });
    const plan = second.previewRecovery();
    expect(plan.events.map((e) => [e.type, e.taskId])).toEqual([
      ["woke", "due"],
      ["restart-limit", "loop"],
      ["restarted", "run"],
    ]);
    expect(plan.blocked).toEqual([{ taskId: "unknown", reason: 'no task kind "gone" is registered' }]);
    expect(plan.sleeping).toEqual([{ taskId: "later", until: 5_000 }]);
    // Dispatching the previewed events on a draft gives exactly the records resume() commits.
    const state = new SessionState("r", 0, 10);
    for (const task of second.view().tasks) state.putTask(task);
    const draft = new KernelDraft(state, registry, second.version + 1, clock.now());
    for (const event of plan.events) dispatch(draft, event);
    const expected = plan.events.map((e) => draft.task(e.taskId));
    await second.resume();
    const recovery = spy.groups[0]?.[0];
    expect(recovery?.tasks).toEqual(expected);
    await second.close();
  });
});
