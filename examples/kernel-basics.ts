/**
 * `npm run demo`: the kernel on embedded defaults. A session accepts inputs and edits a plan document; the
 * "disk" dies in the middle of a commit; a new process reopens the session and finds exactly what was
 * confirmed — the retried input is recognised by its requestId instead of becoming new work. Then a
 * durable task sends a batch one step per phase; the process dies mid-batch, and the next one resumes
 * from the last committed step without redoing it.
 */
import { z } from "zod";
import { createRegistry, defineDocument, defineTask, memoryStorage, openSession } from "../src/index.ts";

const plan = defineDocument({
  type: "email-plan",
  schema: z.object({ recipients: z.array(z.string()), approved: z.boolean() }),
});
const sent: string[] = []; // the outside world: survives the kernel's crashes
let dieAfterSending: string | undefined;
const sendBatch = defineTask({
  kind: "send-batch",
  version: 1,
  input: z.object({ recipients: z.array(z.string()) }),
  phases: {
    send: (ctx) => {
      const index = (ctx.data as number | null) ?? 0;
      const to = ctx.input.recipients[index];
      if (to === undefined) return ctx.complete({ sent: index });
      sent.push(to);
      ctx.appendEntry("main", { kind: "note", text: `sent to ${to}` });
      return ctx.next("send", index + 1);
    },
  },
});
const registry = createRegistry({ documents: [plan], tasks: [sendBatch] });
const log = (line: string) => console.log(`  ${line}`);

let failWrites = false;
const disk = memoryStorage();
const flaky = disk.reopen({
  onWrite: () => {
    if (failWrites) throw new Error("power lost mid-transaction");
  },
});

console.log("process 1");
const first = await openSession({ id: "support-42", storage: flaky, registry });
const accepted = await first.submit({
  requestId: "req-1",
  conversationId: "main",
  input: "Send the approved notice",
});
log(`accepted submission ${accepted.id} at version ${first.version}`);
await first.commit((draft) =>
  draft.setDocument("plan", "email-plan", {
    recipients: ["ana@example.com", "bo@example.com"],
    approved: true,
  }),
);
log(`plan committed at version ${first.version}`);

failWrites = true;
const lost = await first
  .submit({ requestId: "req-2", conversationId: "main", input: "Also add cy@example.com" })
  .then(() => "committed")
  .catch((error: Error) => `${error.name}: ${error.message}`);
log(`second input: ${lost}`);
log(`session status: ${first.status}`);

console.log("process 2 (reopened)");
const second = await openSession({ id: "support-42", storage: disk.reopen(), registry });
const view = second.view();
log(
  `version ${view.version}, epoch ${view.epoch}, submissions ${view.submissions.map((s) => s.requestId).join(", ")}`,
);
const retried = await second.submit({
  requestId: "req-1",
  conversationId: "main",
  input: "Send the approved notice",
});
log(
  `client retry of req-1 returned ${retried.id === accepted.id ? "the original submission" : "NEW WORK (bug)"}`,
);
const again = await second.submit({
  requestId: "req-2",
  conversationId: "main",
  input: "Also add cy@example.com",
});
log(`client retry of req-2 accepted as ${again.id} at version ${second.version}`);

console.log("process 2 runs a durable batch task, and dies mid-batch");
const recipients = ["ana@example.com", "bo@example.com", "cy@example.com", "di@example.com"];
// The process dies right after the mail service accepted cy's mail, before that step's commit lands.
const dyingDisk = disk.reopen({
  onWrite: () => {
    if (dieAfterSending !== undefined && sent.includes(dieAfterSending)) throw new Error("process killed");
  },
});
const third = await openSession({ id: "support-42", storage: dyingDisk, registry });
dieAfterSending = "cy@example.com";
await third.resume();
const batch = await third.spawn("send-batch", { recipients });
await third.whenIdle();
log(
  `session ${third.status}; last committed checkpoint: ${JSON.stringify(third.view().tasks[0]?.checkpoint)}`,
);
log(`outside world saw: ${sent.join(", ")}`);

console.log("process 3 (reopened) resumes the batch");
dieAfterSending = undefined;
const fourth = await openSession({ id: "support-42", storage: disk.reopen(), registry });
for (const event of fourth.previewRecovery().events) log(`recovery plan: ${JSON.stringify(event)}`);
await fourth.resume();
const done = await fourth.waitForTask(batch.id);
log(`task ${done.state.status} after ${done.attempts} phase attempts: 5 phases plus 1 counted re-entry`);
log(`outside world saw: ${sent.join(", ")}`);
log("cy was sent twice: recovery re-enters a phase from its start, so a phase with an irreversible effect");
log("must carry a stored operation id the service can deduplicate or look up (DESIGN section 4)");

const deliveries = new Map<string, number>();
for (const to of sent) deliveries.set(to, (deliveries.get(to) ?? 0) + 1);
console.log(
  JSON.stringify({
    versionAfterReopen: view.version,
    submissions: fourth.view().submissions.length,
    duplicateSubmissions:
      fourth.view().submissions.length - new Set(fourth.view().submissions.map((s) => s.requestId)).size,
    delivered: deliveries.size,
    repeatedSteps: sent.length - deliveries.size,
    phaseAttempts: done.attempts,
  }),
);
