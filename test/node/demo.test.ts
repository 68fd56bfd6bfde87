/**
 * `npm run demo`, run as a newcomer runs it: its last line is the run's summary. The campaign must deliver
 * every mail exactly once across its three process deaths — where the article puts the crash: mails 1-3
 * reused from committed receipts, mail 4 confirmed by its operation id, mail 5 not started and then run —
 * and an approval sent before the wait must be kept and taken.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";

it("runs the five-email demo start to end with no mail sent twice or lost", async () => {
  const { stdout } = await promisify(execFile)("npx", ["tsx", "examples/five-emails/demo.ts"], {
    timeout: 60_000,
  });
  const summary = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}");
  expect(summary).toEqual({
    delivered: 5,
    duplicates: 0,
    crashes: 3,
    reused: 3,
    confirmedByOperationId: 1,
    notStarted: 1,
    vias: {
      "ana@example.com": "run",
      "bo@example.com": "run",
      "cy@example.com": "run",
      "di@example.com": "confirm",
      "ed@example.com": "run",
    },
    earlyApprovalBuffered: true,
    interrupted: 1,
  });
  expect(stdout).toContain("still pending after the crash: plan-approval:plan");
  expect(stdout).toContain(
    "recovery plan: 3 mails reused (receipts committed), 1 confirmed by operation id, 1 not started (it will run)",
  );
}, 90_000);
