/**
 * `durable-agent/testing` as an app developer uses it: the five-email app crash-tested with
 * `simulateCrashes` (killed after every commit, and under seeded multi-kill plans) passes its own check —
 * every recipient mailed exactly once — and the kernel's; a naive app (a non-idempotent send declared
 * replay-safe) is caught, with the kill plan that breaks it.
 */

import { describe, expect, it } from "vitest";
import { z } from "zod";
import { approvedPlan, campaignRegistry, RECIPIENTS } from "../../examples/five-emails/app.ts";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import { createAgent, createRegistry, defineTool, type Json, scriptedModel } from "../../src/index.ts";
import { type CrashScenario, simulateCrashes } from "../../src/testing/index.ts";

const fiveEmails: CrashScenario<MailService> = {
  world: () => new MailService(),
  registry: (mail) => campaignRegistry(mail),
  async drive(session) {
    if (!session.view().documents.some((d) => d.id === "plan"))
      await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
    return [
      await session.submit({ requestId: "notice-1", conversationId: "main", input: "Send the notice" }),
    ];
  },
  onDeath: (mail) => {
    mail.reachable = false; // a dead process sends nothing more
  },
  onStart: (mail) => {
    mail.reachable = true;
  },
  check(mail) {
    const counts = mail.deliveryCounts();
    for (const email of RECIPIENTS)
      if (counts.get(email) !== 1) throw new Error(`${email} got ${counts.get(email) ?? 0} mails`);
  },
};

describe("simulateCrashes", () => {
  it("passes the five-email app, killed after every commit and under seeded multi-kill plans", async () => {
    const report = await simulateCrashes(fiveEmails, { seeds: 30 });
    expect(report.failures).toEqual([]);
    expect(report.commits).toBeGreaterThanOrEqual(8);
    expect(report.runs).toBe(report.commits + 30); // whole, one per commit boundary but the last, 30 seeded
  }, 60_000);

  it("catches a non-idempotent send declared replay-safe, naming the kill that breaks it", async () => {
    const naive: CrashScenario<{ sent: string[] }> = {
      world: () => ({ sent: [] }),
      registry: (world) => {
        const send = defineTool({
          name: "send",
          description: "Sends a message (no idempotency key: a re-run sends it again)",
          input: z.object({ to: z.string() }),
          replay: "safe", // wrong: it is not safe to repeat
          execute: async ({ to }) => {
            world.sent.push(to);
            await new Promise((resolve) => setImmediate(resolve));
            return { sent: to };
          },
        });
        const model = scriptedModel([
          { toolCalls: [{ name: "send", args: { to: "ana" } }] },
          { text: "sent" },
        ]);
        return createRegistry({ ...createAgent({ model, tools: [send] }) });
      },
      drive: async (session) => [await session.submit({ requestId: "r", conversationId: "c", input: "go" })],
      check: (world) => {
        if (world.sent.length !== 1) throw new Error(`sent ${world.sent.length} times`);
      },
    };
    const report = await simulateCrashes(naive);
    expect(report.failures.length).toBeGreaterThan(0);
    expect(report.failures[0]?.error).toBe("check: sent 2 times");
    expect(report.failures[0]?.kills).toHaveLength(1);
  });
});
