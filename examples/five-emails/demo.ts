/**
 * `npm run demo`: the five-email scenario of DESIGN §1 on embedded defaults (scripted model, in-memory
 * "disk", no keys). The campaign waits for a person to approve its plan, and the process dies while it
 * waits; the next process finds the wait pending, gets the approval, and dies right after the mail service
 * accepted mail 4, before its receipt is committed (receipts 1-3 are committed, mail 5 not started); a
 * third process reuses mails 1-3, confirms mail 4 by its operation id instead of resending it, runs mail 5,
 * and summarises. Then an approval that arrives before the wait is kept and taken; and, for contrast, the
 * black-box batch tool crashes mid-batch and can only report `interrupted`. The last line is JSON.
 */
import {
  type CommitRecord,
  type Json,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Session,
  type Storage,
  TOOL_TASK,
} from "../../src/index.ts";
import {
  type AsyncMailService,
  asyncCampaignRegistry,
  batchModel,
  campaignRegistry,
  draftPlan,
  planApprovalKey,
  RECIPIENTS,
} from "./app.ts";
import { MailService } from "./mail-service.ts";

const say = (line: string) => console.log(`  ${line}`);

/** How many processes this demo killed (counted, for the last line). */
let crashes = 0;

/** A process's handle on the disk; `kill()` ends the process: it neither reads nor writes again. */
function processHandle(disk: MemoryStorage): Storage & { kill(): void } {
  const inner = disk.reopen();
  let dead = false;
  const alive = () => {
    if (dead) throw new Error("process killed");
    return inner;
  };
  return {
    kill: () => {
      if (!dead) crashes++;
      dead = true;
    },
    open: async (...args) => alive().open(...args),
    commit: async (...args) => alive().commit(...args),
    readEntries: async (...args) => alive().readEntries(...args),
    readChanges: async (...args) => alive().readChanges(...args),
    readDocumentRows: async (...args) => alive().readDocumentRows(...args),
    readSubmission: async (...args) => alive().readSubmission(...args),
    readRequest: async (...args) => alive().readRequest(...args),
    readTask: async (...args) => alive().readTask(...args),
    readTaskTree: async (...args) => alive().readTaskTree(...args),
    readSignals: async (...args) => alive().readSignals(...args),
    readItems: async (...args) => alive().readItems(...args),
    readSettled: async (...args) => alive().readSettled(...args),
    readWaiting: async (...args) => alive().readWaiting(...args),
    readParked: async (...args) => alive().readParked(...args),
    readDeadlines: async (...args) => alive().readDeadlines(...args),
    close: async () => undefined,
  };
}

function narrate(session: Session): void {
  session.subscribe(session.version, (change: CommitRecord) => {
    for (const entry of change.entries) {
      const c = entry.content;
      if (c.kind === "tool-result") {
        const output = c.output as { to?: string; error?: string };
        say(`v${change.version} tool ${c.toolName} -> ${c.outcome}${output.to ? ` (${output.to})` : ""}`);
      } else if (c.kind === "model") {
        const calls = c.toolCalls.map((t) => t.name).join(", ");
        say(`v${change.version} model: ${JSON.stringify(c.text)}${calls ? ` calls ${calls}` : ""}`);
      } else if (c.kind === "note" || c.kind === "interrupted") {
        say(`v${change.version} ${c.kind}: ${"text" in c ? c.text : c.partialText}`);
      }
    }
  });
}

/**
 * The mail provider reached over the network: one message at a time, each after a short delay (a rate-
 * limited provider), so receipts are committed one by one while later mails are still queued.
 */
function provider(mail: MailService, delayMs = 5): AsyncMailService {
  let queue: Promise<unknown> = Promise.resolve();
  return {
    send: (message) => {
      const sent = queue.then(async () => {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        return mail.send({ ...message, body: "Approved notice" });
      });
      queue = sent.catch(() => undefined);
      return sent;
    },
    lookup: async (operationId) => mail.lookup(operationId),
  };
}

const REQUEST = {
  requestId: "notice-1",
  conversationId: "main",
  input: "Send the approved notice to five customers and summarise",
};

/**
 * The campaign with a person in the loop: process 1 drafts the plan and dies while the campaign waits for
 * its approval; process 2 finds the wait still pending, the approval arrives, and it dies right after the
 * provider accepted mail 4 (receipts 1-3 committed, mail 5 not started); process 3 reuses the three, confirms
 * mail 4 by its operation id, and runs mail 5.
 */
async function campaignScenario(mail: MailService) {
  const label = "five emails, one tool call per email, approved by a person";
  const disk = memoryStorage();
  const registry = () => asyncCampaignRegistry(provider(mail));
  console.log(`\n${label}: process 1`);
  const one = processHandle(disk);
  const first = await openSession({ id: "support-42", storage: one, registry: registry() });
  await first.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
  narrate(first);
  const submission = await first.submit(REQUEST);
  await first.resume();
  await untilPending(first);
  for (const wait of first.view().pending) say(`waiting for ${wait.key}: ${JSON.stringify(wait.about)}`);
  say("*** process dies while the campaign waits for approval ***");
  one.kill();
  await first.close();

  console.log(`${label}: process 2 reopens the session`);
  const two = processHandle(disk);
  mail.onAccepted = (receipt, count) => {
    say(`mail service accepted mail ${count} (${receipt.to}, operation ${receipt.operationId})`);
    if (count === 4) {
      say(`*** process dies now: mail ${count} was accepted, its receipt is not committed ***`);
      two.kill();
      mail.reachable = false;
    }
  };
  const second = await openSession({ id: "support-42", storage: two, registry: registry() });
  narrate(second);
  await second.resume();
  say(
    `still pending after the crash: ${second
      .view()
      .pending.map((p) => p.key)
      .join(", ")}`,
  );
  const approval = await second.signal(
    planApprovalKey("plan"),
    { approved: true },
    { requestId: "approve-1" },
  );
  say(`a person approved the plan (v${approval.signal.version}, taken by ${approval.takenBy})`);
  await second.wait(submission.id).catch(() => undefined);
  await second.whenIdle();
  say(`session ${second.status}; delivered so far: ${mail.deliveries.map((d) => d.to).join(", ")}`);

  console.log(`${label}: process 3 reopens the session`);
  mail.reachable = true;
  mail.onAccepted = (receipt, count) =>
    say(`mail service accepted mail ${count} (${receipt.to}, operation ${receipt.operationId})`);
  const third = await openSession({ id: "support-42", storage: disk.reopen(), registry: registry() });
  const mails = third.view().tasks.filter((t) => t.kind === TOOL_TASK && t.parentId?.includes("/run"));
  const reused = mails.filter((t) => t.state.status === "succeeded").length;
  const plan = third.previewRecovery();
  const confirmed = plan.events.filter((e) => e.type === "restarted" && e.detail?.includes("confirm")).length;
  // Mails are sent one at a time: those after the one in doubt were never started (no intent is stored).
  const notStarted = RECIPIENTS.length - mails.length;
  say(
    `recovery plan: ${reused} mails reused (receipts committed), ${confirmed} confirmed by operation id, ${notStarted} not started (it will run); resume() will:`,
  );
  for (const event of plan.events) say(`  ${JSON.stringify(event)}`);
  narrate(third);
  // The client retries its request: the same requestId returns the original Submission.
  const retried = await third.submit({ ...REQUEST, input: "(retry)" });
  say(`client retry returned ${retried.id === submission.id ? "the original submission" : "NEW WORK"}`);
  await third.resume();
  const done = await third.wait(submission.id);
  say(`submission ${done.status}: ${JSON.stringify((done.result as { text?: string } | undefined)?.text)}`);
  const vias = new Map<string, string>();
  for (const task of third.view().tasks) {
    const result =
      task.state.status === "succeeded"
        ? (task.state.result as { via?: string; output?: { to?: string } })
        : undefined;
    if (task.kind === TOOL_TASK && result?.output?.to) vias.set(result.output.to, result.via ?? "?");
  }
  return { reused, confirmed, notStarted, vias: Object.fromEntries(vias) };
}

/** An approval that arrives before the campaign asks for it is kept, and taken the moment it does. */
async function earlyApprovalScenario(mail: MailService) {
  console.log("\nan approval that arrives before the wait");
  const session = await openSession({
    id: "support-43",
    storage: memoryStorage(),
    registry: asyncCampaignRegistry(provider(mail, 0)),
  });
  await session.commit((d) => d.setDocument("plan", "email-plan", draftPlan() as unknown as Json));
  const early = await session.signal(
    planApprovalKey("plan"),
    { approved: true },
    { requestId: "approve-early" },
  );
  say(
    `approval stored at v${early.signal.version} with no one waiting (taken by: ${early.takenBy ?? "nobody yet"})`,
  );
  const submission = await session.submit({ ...REQUEST, requestId: "notice-2" });
  await session.resume();
  const done = await session.wait(submission.id);
  const taken = (await session.readChanges(0)).changes.find((c) =>
    c.signals?.some((s) => s.key === planApprovalKey("plan") && s.consumedBy !== undefined),
  );
  say(
    `the campaign took it in the commit that began its wait (v${taken?.version}); submission ${done.status}`,
  );
  return { buffered: taken !== undefined && done.status === "succeeded" };
}

async function untilPending(session: Session): Promise<void> {
  while (session.view().pending.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
}

async function batchScenario(mail: MailService) {
  const label = "for contrast: one black-box batch call";
  const disk = memoryStorage();
  console.log(`\n${label}: process 1`);
  const handle = processHandle(disk);
  mail.onAccepted = (receipt, count) => {
    say(`mail service accepted mail ${count} (${receipt.to}, operation ${receipt.operationId})`);
    if (count === 3) {
      say(`*** process dies now: mail ${count} was accepted, nothing of the batch is committed ***`);
      handle.kill();
      mail.reachable = false;
    }
  };
  const first = await openSession({
    id: "support-44",
    storage: handle,
    registry: campaignRegistry(mail, batchModel()),
  });
  narrate(first);
  const submission = await first.submit(REQUEST);
  await first.resume();
  await first.wait(submission.id).catch(() => undefined);
  await first.whenIdle();
  console.log(`${label}: process 2 reopens the session`);
  mail.reachable = true;
  const second = await openSession({
    id: "support-44",
    storage: disk.reopen(),
    registry: campaignRegistry(mail, batchModel()),
  });
  narrate(second);
  await second.resume();
  await second.wait(submission.id);
  return (second.view().conversations[0]?.entries ?? []).filter(
    (e) => e.content.kind === "tool-result" && e.content.outcome === "interrupted",
  ).length;
}

const campaignMail = new MailService();
const campaign = await campaignScenario(campaignMail);
const early = await earlyApprovalScenario(new MailService());
const batchMail = new MailService();
const interrupted = await batchScenario(batchMail);

const counts = campaignMail.deliveryCounts();
console.log(
  `\ncampaign deliveries: ${RECIPIENTS.map((to) => `${to} x${counts.get(to) ?? 0} (${campaign.vias[to] ?? "?"})`).join(", ")}; black-box batch delivered ${batchMail.deliveries.length} and stopped`,
);
console.log(
  JSON.stringify({
    delivered: counts.size,
    duplicates: campaignMail.deliveries.length - counts.size,
    crashes,
    reused: campaign.reused,
    confirmedByOperationId: campaign.confirmed,
    notStarted: campaign.notStarted,
    vias: campaign.vias,
    earlyApprovalBuffered: early.buffered,
    interrupted,
  }),
);
