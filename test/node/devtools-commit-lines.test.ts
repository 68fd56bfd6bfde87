/**
 * What the devtools write about a commit and a tree must be what the records hold: a signal's key, sender,
 * payload and the task that took it; a parent that succeeded over failed tool calls is not plain success;
 * siblings are drawn in the order they were started; counts read as English ("1 tool call").
 */
import { describe, expect, it } from "vitest";
import { type CommitRecord, emptyView, memoryStorage, type Task } from "../../src/index.ts";
import { describeCommit, describeSignals, layoutTasks } from "../../web/devtools/derive.ts";
import { SessionHistory } from "../../web/devtools/history.ts";
import { outcomeInTree, problemsBelow } from "../../web/devtools/outcome.ts";
import { counted } from "../../web/devtools/words.ts";
import { FAILED_SESSION, writeFailedRun } from "../support/failed-run.ts";

const commit = (version: number, extra: Partial<CommitRecord>): CommitRecord => ({
  version,
  epoch: 1,
  at: 1_000 + version,
  deferred: false,
  conversations: [],
  entries: [],
  documents: [],
  tasks: [],
  submissions: [],
  ...extra,
});

describe("devtools commit lines and trees", () => {
  it("say which signal a commit took, from whom, with what, and which task took it; and which it dropped", () => {
    const signal = { key: "plan-approval:plan", requestId: "ops-ana", payload: { approved: true } };
    const taken = commit(7, {
      signals: [{ ...signal, receivedAt: 1_007, version: 7, consumedBy: "t/run", consumedAt: 1_007 }],
    });
    expect(describeSignals(taken)).toEqual([
      {
        kind: "taken",
        key: "plan-approval:plan",
        taskId: "t/run",
        text: 'plan-approval:plan from request ops-ana: {"approved":true}; taken by t/run',
      },
    ]);
    const early = commit(3, { signals: [{ ...signal, receivedAt: 1_003, version: 3 }] });
    expect(describeSignals(early)[0]).toMatchObject({ kind: "received", key: "plan-approval:plan" });
    expect(describeSignals(early)[0]?.text).toContain("no wait takes it yet, kept");
    // Taken later than it came: the line says when it came.
    const later = commit(9, {
      signals: [{ ...signal, receivedAt: 1_003, version: 3, consumedBy: "t/run", consumedAt: 1_009 }],
    });
    expect(describeSignals(later)[0]?.text).toContain("(received at v3, ");
    const dropped = commit(12, { droppedSignals: [{ key: "plan-approval:later", version: 4 }] });
    expect(describeSignals(dropped)).toEqual([
      {
        kind: "dropped",
        key: "plan-approval:later",
        text: "plan-approval:later: early signal accepted at v4 dropped, no wait took it",
      },
    ]);
    expect(describeSignals(commit(13, {}))).toEqual([]);
  });

  it("never call a parent that succeeded over failed tool calls plainly succeeded", async () => {
    const disk = memoryStorage();
    const { session, submissionId } = await writeFailedRun(() => disk.reopen());
    const view = session.view();
    const below = problemsBelow(view.tasks);
    const root = view.tasks.find((t) => t.parentId === undefined) as Task;
    expect(outcomeInTree(root, below)).toEqual({
      label: "succeeded with problems",
      tone: "warn",
      reason: "1 error, 1 interrupted below",
    });
    // A tool call keeps its own outcome (nothing is below it).
    for (const task of view.tasks.filter((t) => t.parentId !== undefined))
      expect(below.has(task.id)).toBe(false);
    const stored = await disk.reopen().readChanges(FAILED_SESSION, 0, 10_000);
    const lines = stored.changes.flatMap((row) => describeCommit(row.value as CommitRecord, below));
    await session.close();
    expect(lines.filter((line) => line.startsWith(`submission ${submissionId} → succeeded`))).toEqual([
      `submission ${submissionId} → succeeded with problems (1 error, 1 interrupted below)`,
    ]);
  });

  it("draws siblings left to right in the order they were started", () => {
    const task = (id: string, parentId: string | undefined, childIndex: number | undefined): Task =>
      ({
        id,
        ...(parentId !== undefined && { parentId }),
        ...(childIndex !== undefined && { childIndex }),
        createdAt: 0,
      }) as Task;
    const tasks = [
      task("run", undefined, undefined),
      ...[4, 3, 2, 1, 0].map((n) => task(`run/mail-${n}`, "run", n)),
    ];
    const { nodes, width } = layoutTasks(tasks);
    const row = nodes.filter((n) => n.task.parentId === "run").sort((a, b) => a.x - b.x);
    expect(row.map((n) => n.task.id)).toEqual([0, 1, 2, 3, 4].map((n) => `run/mail-${n}`));
    const parent = nodes.find((n) => n.task.id === "run");
    expect(parent?.x).toBe(((row[0]?.x ?? 0) + (row[4]?.x ?? 0)) / 2); // centred over its children
    expect(Math.max(...nodes.map((n) => n.x + 210))).toBeLessThanOrEqual(width);
  });

  it("count in English", () => {
    expect(counted(1, "tool call")).toBe("1 tool call");
    expect(counted(0, "tool call")).toBe("0 tool calls");
    expect(counted(1, "child", "children")).toBe("1 child");
    expect(counted(5, "child", "children")).toBe("5 children");
  });
});

describe("devtools trees as a user's sessions grow them", () => {
  const done = (id: string, kind: string, result: unknown, parentId?: string, childIndex?: number): Task =>
    ({
      id,
      kind,
      ...(parentId !== undefined && { parentId }),
      ...(childIndex !== undefined && { childIndex }),
      createdAt: 1,
      createdVersion: 1,
      updatedAt: 2,
      restarts: 0,
      input: null,
      state: { status: "succeeded", result },
      checkpoint: { phase: "done", data: null },
    }) as unknown as Task;

  it("keep a Submission's 'with problems' on the timeline after its tree left the view", async () => {
    const disk = memoryStorage();
    const { session, submissionId } = await writeFailedRun(() => disk.reopen());
    await session.close();
    const stored = await disk.reopen().readChanges(FAILED_SESSION, 0, 10_000);
    // A view that keeps no settled work (the default keeps 20: the same once 20 later ones settled).
    const history = new SessionHistory(emptyView(FAILED_SESSION, { settled: 0, entries: 100 }));
    // The page reads the problems the history keeps as each commit comes: after every commit they are
    // what counting every task it holds again gives.
    const plain = (m: ReadonlyMap<string, ReadonlyMap<string, number>>) =>
      Object.fromEntries([...m].map(([id, counts]) => [id, Object.fromEntries(counts)]));
    for (const row of stored.changes) {
      history.append([row.value as CommitRecord]);
      expect(plain(history.problems)).toEqual(plain(problemsBelow([...history.tasks.values()])));
    }
    expect(history.problems.size).toBeGreaterThan(0);
    const lines = history.commits.flatMap((c) => describeCommit(c, history.problems));
    expect(lines.filter((l) => l.startsWith(`submission ${submissionId} → succeeded`))).toEqual([
      `submission ${submissionId} → succeeded with problems (1 error, 1 interrupted below)`,
    ]);
  });

  it("read an app task's own `outcome` field as its business, not a tool call's problem", () => {
    const root = done("order", "shop.order", { total: 3 });
    const child = done("order/review", "shop.review", { outcome: "approved" }, "order");
    expect(outcomeInTree(root, problemsBelow([root, child]))).toEqual({ label: "succeeded", tone: "good" });
  });

  it("lay out a parent of 20,000 children in start order, and a chain 3,000 deep", () => {
    const wide = [done("root", "k", null)];
    for (let i = 0; i < 20_000; i++) wide.push(done(`c${i}`, "k", null, "root", i));
    const laid = layoutTasks(wide);
    expect(laid.nodes).toHaveLength(20_001);
    const row = laid.nodes.filter((n) => n.task.parentId === "root");
    expect(row.map((n) => n.task.id)).toEqual(Array.from({ length: 20_000 }, (_, i) => `c${i}`));
    const deep = [done("t0", "k", null)];
    for (let i = 1; i < 3_000; i++) deep.push(done(`t${i}`, "k", null, `t${i - 1}`, 0));
    const chain = layoutTasks(deep);
    expect(chain.nodes).toHaveLength(3_000);
    // One above the other: every node of the chain in its own row, over its only child.
    expect(new Set(chain.nodes.map((n) => n.y)).size).toBe(3_000);
    expect(new Set(chain.nodes.map((n) => n.x)).size).toBe(1);
  });
});
