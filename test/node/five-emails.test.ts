/**
 * The five-email reference scenario (DESIGN §1): crash at every commit boundary, and in the window between
 * "the mail service accepted mail 4" and "its receipt was committed"; after recovery exactly five mails
 * were delivered, each once, and the summary says so. The black-box batch tool, crashed mid-batch, ends
 * interrupted and never silently resends.
 */
import { describe, expect, it } from "vitest";
import {
  approvedPlan,
  batchModel,
  campaignRegistry,
  draftPlan,
  planApprovalKey,
  RECIPIENTS,
} from "../../examples/five-emails/app.ts";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import {
  type CommitGuard,
  type CommitRecord,
  type Json,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Session,
  type Storage,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";

type Crash = { commit: number; mode: "before" | "after" } | { acceptedMail: number };

/** A process's handle on the store: it can die at its k-th commit, and then does nothing more. */
class ProcessStorage extends ForwardingStorage {
  commits = 0;
  dead = false;
  constructor(
    inner: Storage,
    private readonly dieAt: { commit: number; mode: "before" | "after" } | undefined,
    private readonly onDeath: () => void,
  ) {
    super(inner);
  }
  kill(): void {
    this.dead = true;
    this.onDeath();
  }
  protected override target(): Storage {
    if (this.dead) throw new Error("process killed");
    return this.inner;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    this.commits++;
    const hit = this.dieAt?.commit === this.commits;
    if (hit && this.dieAt?.mode === "before") this.kill();
    await this.target().commit(guard, commits);
    if (hit && this.dieAt?.mode === "after") this.kill();
    if (this.dead) throw new Error("process killed after its write became durable");
  }
}

interface Outcome {
  mail: MailService;
  crashes: number;
  commits: number;
  final: Session;
  submissionId: string;
}

/** Runs the scenario, crashing once as planned, reopening and resuming until the Submission ends. */
async function run(
  crash: Crash | undefined,
  registryFor = campaignRegistry,
  retainSettled?: number,
): Promise<Outcome> {
  const mail = new MailService();
  const disk: MemoryStorage = memoryStorage();
  const clock = new ManualClock(0);
  let crashes = 0;
  let commits = 0;
  for (let incarnation = 0; incarnation < 4; incarnation++) {
    const planned = incarnation === 0 ? crash : undefined;
    const storage = new ProcessStorage(
      disk.reopen(),
      planned && "commit" in planned ? planned : undefined,
      () => {
        mail.reachable = false; // a dead process sends nothing more
        crashes++;
      },
    );
    mail.reachable = true;
    mail.onAccepted =
      planned && "acceptedMail" in planned
        ? (_receipt, count) => {
            if (count === planned.acceptedMail) storage.kill(); // accepted, but the receipt is never committed
          }
        : undefined;
    const registry = registryFor(mail);
    let session: Session | undefined;
    let submissionId: string | undefined;
    try {
      session = await openSession({
        id: "campaign",
        storage,
        registry,
        clock,
        timers: new ManualTimers(clock),
        ids: sequentialIds(incarnation * 100),
        ...(retainSettled !== undefined && { retainSettled }),
      });
      if (!session.view().documents.some((d) => d.id === "plan")) {
        await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
      }
      // The client retries its request after every crash; the same requestId never creates new work.
      const submission = await session.submit({
        requestId: "notice-1",
        conversationId: "main",
        input: "Send the approved notice to five customers and summarise",
      });
      submissionId = submission.id;
      await session.resume();
      const done = await session.wait(submission.id);
      commits += storage.commits;
      return { mail, crashes, commits, final: session, submissionId: done.id };
    } catch (error) {
      if (!storage.dead) throw error;
      commits += storage.commits;
      await session?.whenIdle(); // the dead process's phases wind down before the next one starts
      void submissionId;
    }
  }
  throw new Error("the scenario did not finish in 4 incarnations");
}

/** Fails with `message` instead of hanging the whole test when one scenario never finishes. */
async function withTimeout<T>(work: Promise<T>, message: string, ms = 5_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function expectExactlyFive(outcome: Outcome, label: string): Promise<void> {
  const counts = outcome.mail.deliveryCounts();
  expect([...counts.keys()].sort(), label).toEqual([...RECIPIENTS].sort());
  expect([...counts.values()], `${label}: each recipient exactly once`).toEqual([1, 1, 1, 1, 1]);
  // Read back from storage: with a small working set the ended Submission has left memory.
  const submission = await outcome.final.readSubmission(outcome.submissionId);
  expect(submission?.status, label).toBe("succeeded");
  expect(submission?.result, label).toMatchObject({ text: "Done: 5 of 5 notices delivered." });
  const summary = (await outcome.final.readEntries("main", 0)).find(
    (e) => e.content.kind === "note" && e.content.text.startsWith("Campaign plan:"),
  );
  expect(summary?.content, label).toMatchObject({ text: expect.stringContaining("5 of 5 emails delivered") });
}

describe("five-email reference scenario", () => {
  it("delivers exactly five mails with no crash", async () => {
    const outcome = await run(undefined);
    await expectExactlyFive(outcome, "no crash");
    expect(outcome.crashes).toBe(0);
  });

  it("delivers exactly five mails, each once, whatever commit boundary the process dies at", async () => {
    const clean = await run(undefined);
    expect(clean.commits).toBeGreaterThanOrEqual(10); // every boundary of the run below is a kill point
    // With the default working set, and with none: an ended Submission then leaves memory at once.
    for (const retain of [undefined, 0]) {
      for (let commit = 1; commit <= clean.commits; commit++) {
        for (const mode of ["before", "after"] as const) {
          const label = `crash ${mode} commit ${commit}, retainSettled ${retain ?? "default"}`;
          const outcome = await withTimeout(
            run({ commit, mode }, campaignRegistry, retain),
            `${label} did not finish`,
          );
          expect(outcome.crashes, label).toBe(1);
          await expectExactlyFive(outcome, label);
        }
      }
    }
  }, 120_000);

  it("confirms mail 4 by its operation id when the process died after the service accepted it", async () => {
    const outcome = await run({ acceptedMail: 4 });
    expect(outcome.crashes).toBe(1);
    await expectExactlyFive(outcome, "crash after mail 4 was accepted");
    // Each send's tool task ends with how its result was obtained.
    const confirmed = outcome.final
      .view()
      .tasks.flatMap((t) => (t.state.status === "succeeded" ? [t.state.result as { via?: string }] : []))
      .filter((result) => result.via === "confirm");
    // Mails go one at a time: 1-3 had their receipts committed, mail 4 (accepted, its receipt not
    // committed) is confirmed by its operation id and not sent again, and mail 5, never started, is run.
    expect(confirmed.map((r) => (r as { output: { to: string } }).output.to)).toEqual([RECIPIENTS[3]]);
    for (const run of confirmed) expect(run).toMatchObject({ outcome: "ok" });
    expect(outcome.mail.deliveries.map((d) => d.to)).toEqual(RECIPIENTS);
  });

  it("the black-box batch tool, crashed mid-batch, ends interrupted and never resends", async () => {
    const outcome = await run({ acceptedMail: 3 }, (mail) => campaignRegistry(mail, batchModel()));
    expect(outcome.mail.deliveries.map((d) => d.to)).toEqual(RECIPIENTS.slice(0, 3));
    const result = outcome.final
      .view()
      .conversations[0]?.entries.find((e) => e.content.kind === "tool-result");
    expect(result?.content).toMatchObject({ toolName: "send_batch_emails", outcome: "interrupted" });
    const submission = outcome.final.view().submissions[0];
    expect(submission?.result).toMatchObject({ text: expect.stringContaining("ended interrupted") });
  });

  it("asks again on a key of its own after a rejection, and sends once that ask is approved", async () => {
    const ask = {
      text: "Sending the approved notice.",
      toolCalls: [{ name: "send_approved_notice", args: { planId: "plan" } }],
    };
    const mail = new MailService();
    const model = scriptedModel([ask, { text: "Rejected." }, ask, { text: "Sent." }]);
    const clock = new ManualClock(1_700_000_000_000);
    const session = await openSession({
      id: "ask-again",
      storage: memoryStorage(),
      registry: campaignRegistry(mail, model),
      clock,
      timers: new ManualTimers(clock),
      ids: sequentialIds(),
    });
    await session.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
    await session.resume();
    const first = await session.submit({ requestId: "r1", conversationId: "main", input: "Send it" });
    await session.whenIdle();
    expect(session.pending().map((wait) => wait.key)).toEqual([planApprovalKey("plan")]);
    await session.signal(
      planApprovalKey("plan"),
      { approved: false, reason: "wrong list" },
      { requestId: "no" },
    );
    expect((await session.wait(first.id)).status).toBe("succeeded");
    const plan = session.view().documents.find((document) => document.id === "plan");
    expect(plan?.value).toMatchObject({ approved: false, rejections: 1 });

    const second = await session.submit({ requestId: "r2", conversationId: "main", input: "Send it again" });
    await session.whenIdle();
    // The first key keeps its rejection; the new ask waits on the next key, and its approval sends.
    expect(session.pending().map((wait) => wait.key)).toEqual([planApprovalKey("plan", 1)]);
    expect(planApprovalKey("plan", 1)).toBe("plan-approval:plan:1");
    await session.signal(planApprovalKey("plan", 1), { approved: true }, { requestId: "yes" });
    expect((await session.wait(second.id)).status).toBe("succeeded");
    expect(mail.deliveries.map((d) => d.to)).toEqual(RECIPIENTS);
    await session.close();
  });

  it("the demo's own model answers each request from what its tool reported, never more", async () => {
    const mail = new MailService();
    const clock = new ManualClock(1_700_000_000_000);
    const session = await openSession({
      id: "answers",
      storage: memoryStorage(),
      registry: campaignRegistry(mail),
      clock,
      timers: new ManualTimers(clock),
      ids: sequentialIds(),
    });
    await session.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
    await session.resume();
    const ask = async (requestId: string) => {
      const submission = await session.submit({ requestId, conversationId: "main", input: "Send it" });
      await session.whenIdle();
      return submission;
    };
    const answer = async (id: string) => ((await session.wait(id)).result as { text: string }).text;
    // Rejected: the answer says so (it read "Done: 0 of 0 notices delivered.").
    const first = await ask("r1");
    await session.signal(
      planApprovalKey("plan"),
      { approved: false, reason: "wrong list" },
      { requestId: "no" },
    );
    expect(await answer(first.id)).toBe("Not sent: the plan was rejected (wrong list).");
    // Asked again in the same conversation: a new call and a new ask (it summarised the first call again).
    const second = await ask("r2");
    expect(session.pending().map((wait) => wait.key)).toEqual([planApprovalKey("plan", 1)]);
    await session.signal(planApprovalKey("plan", 1), { approved: true }, { requestId: "yes" });
    expect(await answer(second.id)).toBe("Done: 5 of 5 notices delivered.");
    // A third time: a new run of its own, which sends again (each mail under a new operation id).
    const third = await ask("r3");
    expect(await answer(third.id)).toBe("Done: 5 of 5 notices delivered.");
    expect(mail.deliveries.map((d) => d.to)).toEqual([...RECIPIENTS, ...RECIPIENTS]);
    expect(new Set(mail.deliveries.map((d) => d.operationId)).size).toBe(10);
    await session.close();
  });

  it("says which mails failed and why, recipients included, when the provider refuses them", async () => {
    const mail = new MailService();
    mail.reachable = false;
    const session = await openSession({
      id: "failing",
      storage: memoryStorage(),
      registry: campaignRegistry(mail),
      ids: sequentialIds(),
    });
    await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
    await session.resume();
    const run = await session.submit({ requestId: "r1", conversationId: "main", input: "Send it" });
    const done = await session.wait(run.id);
    expect(done.result).toMatchObject({ text: "Done: 0 of 5 notices delivered; 5 failed." });
    const notes = session
      .view()
      .conversations[0]?.entries.flatMap((e) => (e.content.kind === "note" ? [e.content.text] : []));
    const summary = notes?.find((text) => text.includes("emails delivered")) ?? "";
    for (const to of RECIPIENTS) expect(summary).toContain(`${to} error: mail service unreachable`);
    expect(mail.deliveries).toEqual([]);
    await session.close();
  });
});
