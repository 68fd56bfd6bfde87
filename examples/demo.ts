/**
 * `npm run demo`: the kernel foundation on embedded defaults. A session accepts inputs and edits a plan
 * document; the "disk" dies in the middle of a commit; a new process reopens the session and finds exactly
 * what was confirmed — the retried input is recognised by its requestId instead of becoming new work.
 */
import { z } from "zod";
import { createRegistry, defineDocument, memoryStorage, openSession } from "../src/index.ts";

const plan = defineDocument({
  type: "email-plan",
  schema: z.object({ recipients: z.array(z.string()), approved: z.boolean() }),
});
const registry = createRegistry({ documents: [plan] });
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

console.log(
  JSON.stringify({
    confirmedBeforeCrash: 2,
    versionAfterReopen: view.version,
    submissions: second.view().submissions.length,
    duplicates:
      second.view().submissions.length - new Set(second.view().submissions.map((s) => s.requestId)).size,
  }),
);
