/**
 * `durable-agent/testing` as an app developer uses it: the five-email app crash-tested with
 * `simulateCrashes` (killed after and as it makes every commit, and under seeded multi-kill plans) passes
 * its own check — every recipient mailed exactly once — and the kernel's. Broken apps are caught, each with
 * the kill plan that breaks it: a non-idempotent send declared replay-safe; an unsafe send whose confirm
 * wrongly answers "never sent" (killed as the receipt commits, after the provider took the message); a task that answers one tool call twice; work that waits for something nobody sends.
 */

import { describe, expect, it } from "vitest";
import { z } from "zod";
import { approvedPlan, campaignRegistry, RECIPIENTS } from "../../examples/five-emails/app.ts";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import {
  createAgent,
  createRegistry,
  defineSignal,
  defineTask,
  defineTool,
  type Json,
  scriptedModel,
} from "../../src/index.ts";
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
    // Whole; killed after each commit but the last; killed as each commit is made; 30 seeded plans.
    expect(report.runs).toBe(1 + (report.commits - 1) + report.commits + 30);
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

  it("catches an unsafe send whose confirm wrongly says 'never sent', killed as its receipt commits", async () => {
    const careless: CrashScenario<{ sent: string[] }> = {
      world: () => ({ sent: [] }),
      registry: (world) => {
        const send = defineTool({
          name: "send",
          description: "Sends a message",
          input: z.object({ to: z.string() }),
          replay: "unsafe",
          confirm: () => undefined, // wrong: it never looks, so a sent message reads as never sent
          execute: ({ to }) => {
            world.sent.push(to);
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
    const report = await simulateCrashes(careless);
    expect(report.failures.length).toBeGreaterThan(0);
    for (const failure of report.failures) expect(failure.error).toBe("check: sent 2 times");
    // Among them the article's case: the provider took the message, the process died as its receipt committed.
    expect(report.failures.map((f) => f.kills[0]?.at)).toContain("before");
  });

  it("catches a task that answers one tool call twice, and work that never ends", async () => {
    const twice = defineTask({
      kind: "twice",
      version: 1,
      input: z.null(),
      phases: {
        start: (ctx) => {
          for (let i = 0; i < 2; i++)
            ctx.appendEntry("c", {
              kind: "tool-result",
              toolCallId: "call-1",
              toolName: "lookup",
              outcome: "ok",
              output: { i },
            });
          return ctx.complete(null);
        },
      },
    });
    const answeredTwice = await simulateCrashes({
      world: () => null,
      registry: () =>
        createRegistry({ tasks: [twice], submissionTask: () => ({ kind: "twice", input: null }) }),
      drive: async (session) => [await session.submit({ requestId: "r", conversationId: "c", input: "go" })],
    });
    expect(answeredTwice.failures[0]).toEqual({ kills: [], error: "tool call call-1 answered twice in c" });

    const forever = defineTask({
      kind: "forever",
      version: 1,
      input: z.null(),
      phases: { start: (ctx) => ctx.waitFor("never:sent", { next: "start" }) },
    });
    const neverEnds = await simulateCrashes(
      {
        world: () => null,
        registry: () =>
          createRegistry({
            tasks: [forever],
            signals: [defineSignal({ key: "never:*", schema: z.null() })],
            submissionTask: () => ({ kind: "forever", input: null }),
          }),
        drive: async (session) => [
          await session.submit({ requestId: "r", conversationId: "c", input: "go" }),
        ],
      },
      { maxWaitMs: 100 },
    );
    expect(neverEnds.failures[0]?.kills).toEqual([]);
    expect(neverEnds.failures[0]?.error).toMatch(/^process 1: submission .+ never ended \(waited 100 ms\)$/);
  });
});
