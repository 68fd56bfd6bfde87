/**
 * What the devtools say about a run must be what its records hold: a tool call that failed, was cut off or
 * was confirmed after a crash never reads as plain success, a Submission whose calls failed is not plain
 * green, and the recovery lane lists what recovery did, from the change log as storage holds it.
 */
import { describe, expect, it } from "vitest";
import { type CommitRecord, memoryStorage, type Submission, type Task } from "../../src/index.ts";
import { recoveryLane, submissionOutcome, taskOutcome } from "../../web/devtools/outcome.ts";
import { FAILED_SESSION, writeFailedRun } from "../support/failed-run.ts";

const toolName = (task: Task) => (task.input as { name?: string } | null)?.name;

describe("devtools outcomes", () => {
  it("show each tool call's real outcome, the Submission's problems and the recovery that happened", async () => {
    const disk = memoryStorage();
    const { session, submissionId } = await writeFailedRun(() => disk.reopen());
    const view = session.view();
    const byTool = new Map(view.tasks.filter(toolName).map((t) => [toolName(t), t]));
    // The machine says "succeeded" for all three (each call was answered); what they show is the outcome.
    for (const task of byTool.values()) expect(task.state.status).toBe("succeeded");
    const lookup = taskOutcome(byTool.get("lookup_price") as Task);
    expect(lookup).toMatchObject({ label: "error", tone: "bad" });
    expect(lookup.reason).toContain("HTTP 503");
    expect(taskOutcome(byTool.get("charge_card") as Task)).toMatchObject({
      label: "interrupted",
      tone: "bad",
    });
    expect(taskOutcome(byTool.get("send_receipt") as Task)).toMatchObject({
      label: "confirmed",
      tone: "good",
    });

    const submission = view.submissions.find((s) => s.id === submissionId) as Submission;
    expect(submission.status).toBe("succeeded");
    const shown = submissionOutcome(submission, view, Date.now());
    expect(shown).toMatchObject({ label: "succeeded with problems", tone: "warn" });
    expect(shown.problems).toBe("1 error, 1 interrupted");

    // The lane, from the change log as stored.
    const stored = await disk.reopen().readChanges(FAILED_SESSION, 0, 10_000);
    const commits = stored.changes.map((row) => row.value as CommitRecord);
    const lane = [...recoveryLane(commits, { ...view, version: 0, tasks: [] }).values()].flat();
    const kinds = (taskId: string | undefined) => lane.filter((m) => m.taskId === taskId).map((m) => m.kind);
    expect(lane.filter((m) => m.kind === "epoch")).toHaveLength(1);
    expect(lane.find((m) => m.kind === "epoch")?.text).toMatch(/epoch 1 → 2/);
    expect(kinds(byTool.get("charge_card")?.id)).toEqual(["restart", "interrupted"]);
    expect(kinds(byTool.get("send_receipt")?.id)).toEqual(["restart", "confirmed"]);
    // The failed lookup was not recovered: it failed on its own, before the crash.
    expect(kinds(byTool.get("lookup_price")?.id)).toEqual([]);
    await session.close();
  });

  it("say an unfinished Submission is open and for how long nothing committed, not 'running'", async () => {
    const disk = memoryStorage();
    const { session } = await writeFailedRun(() => disk.reopen());
    const view = session.view();
    const open: Submission = { ...(view.submissions[0] as Submission), status: "running", updatedAt: 1_000 };
    const shown = submissionOutcome(open, view, 1_000 + 125_000);
    expect(shown.label).toBe("open");
    expect(shown.reason).toContain("no commit for 2 min");
    await session.close();
  });
});
