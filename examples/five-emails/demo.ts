/**
 * `npm run demo`: the five-email scenario of DESIGN §1 on embedded defaults (scripted model, in-memory
 * "disk", no keys). The process dies right after the mail service accepted mail 4, before its receipt is
 * committed; a new process reopens the session, confirms mail 4 by its operation id instead of resending
 * it, sends what was never sent, and summarises. Then, for contrast, the black-box batch tool crashes
 * mid-batch and can only report `interrupted`. The last line is a JSON summary.
 */
import {
  type CommitRecord,
  type Json,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Session,
  type Storage,
} from "../../src/index.ts";
import { approvedPlan, batchModel, campaignRegistry, RECIPIENTS } from "./app.ts";
import { MailService } from "./mail-service.ts";

const say = (line: string) => console.log(`  ${line}`);

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
    readItems: async (...args) => alive().readItems(...args),
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

async function scenario(label: string, mail: MailService, dieAtMail: number, batch: boolean) {
  const disk = memoryStorage();
  const registry = () => (batch ? campaignRegistry(mail, batchModel()) : campaignRegistry(mail));
  console.log(`\n${label}: process 1`);
  const handle = processHandle(disk);
  mail.onAccepted = (receipt, count) => {
    say(`mail service accepted mail ${count} (${receipt.to}, operation ${receipt.operationId})`);
    if (count === dieAtMail) {
      say(`*** process dies now: mail ${count} was accepted, its receipt is not committed ***`);
      handle.kill();
      mail.reachable = false;
    }
  };
  const first = await openSession({ id: "support-42", storage: handle, registry: registry() });
  await first.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
  narrate(first);
  const submission = await first.submit({
    requestId: "notice-1",
    conversationId: "main",
    input: "Send the approved notice to five customers and summarise",
  });
  await first.resume();
  await first.wait(submission.id).catch(() => undefined);
  await first.whenIdle();
  say(`session ${first.status}; delivered so far: ${mail.deliveries.map((d) => d.to).join(", ")}`);

  console.log(`${label}: process 2 reopens the session`);
  mail.reachable = true;
  mail.onAccepted = (receipt, count) => say(`mail service accepted mail ${count} (${receipt.to})`);
  const second = await openSession({ id: "support-42", storage: disk.reopen(), registry: registry() });
  const unfinished = second
    .view()
    .tasks.filter((t) => !["succeeded", "failed", "cancelled"].includes(t.state.status));
  say(`${unfinished.length} unfinished tasks on disk; resume() will:`);
  for (const event of second.previewRecovery().events) say(`  ${JSON.stringify(event)}`);
  narrate(second);
  // The client retries its request: the same requestId returns the original Submission.
  const retried = await second.submit({ requestId: "notice-1", conversationId: "main", input: "(retry)" });
  say(`client retry returned ${retried.id === submission.id ? "the original submission" : "NEW WORK"}`);
  await second.resume();
  const done = await second.wait(submission.id);
  say(`submission ${done.status}: ${JSON.stringify((done.result as { text?: string } | undefined)?.text)}`);
  const interrupted = (second.view().conversations[0]?.entries ?? []).filter(
    (e) => e.content.kind === "tool-result" && e.content.outcome === "interrupted",
  ).length;
  return { interrupted };
}

const campaignMail = new MailService();
const campaign = await scenario("five emails, one tool call per email", campaignMail, 4, false);
const batchMail = new MailService();
const batch = await scenario("for contrast: one black-box batch call", batchMail, 3, true);

const counts = campaignMail.deliveryCounts();
console.log(
  `\ncampaign deliveries: ${RECIPIENTS.map((to) => `${to} x${counts.get(to) ?? 0}`).join(", ")}; black-box batch delivered ${batchMail.deliveries.length} and stopped`,
);
console.log(
  JSON.stringify({
    delivered: counts.size,
    duplicates: campaignMail.deliveries.length - counts.size,
    crashes: 2,
    interrupted: campaign.interrupted + batch.interrupted,
  }),
);
