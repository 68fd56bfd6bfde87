/**
 * Honest outcomes under crash loops (DESIGN §4, "at the restart limit"): a host killed right after every
 * takeover drives tool calls past their restart limit. They must never be reported as errors they were
 * not: a call that happened gets its real result (confirmed by operation id), one that did not is
 * `not-run`, and what nothing can confirm is `unknown` — and no mail is ever sent twice.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { sendEmailTool } from "../../examples/five-emails/app.ts";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import {
  type CommitGuard,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  type Entry,
  type MemoryStorage,
  memoryStorage,
  openSession,
  type Registry,
  type Storage,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";
import { rng } from "../support/task-simulation.ts";

/** A process's store handle that dies (like its tab) after `allowed` more commits: later calls all fail. */
class DyingStorage extends ForwardingStorage {
  dead = false;
  constructor(
    inner: Storage,
    private allowed: number,
    private readonly onDeath: () => void,
  ) {
    super(inner);
  }
  die(): void {
    if (this.dead) return;
    this.dead = true;
    this.onDeath();
  }
  protected override target(): Storage {
    if (this.dead) throw new Error("process killed");
    return this.inner;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    if (this.allowed-- <= 0) this.die();
    await this.target().commit(guard, commits);
  }
}

const RECIPIENTS = Array.from({ length: 8 }, (_, i) => `user${i}@example.com`);

function campaignModel() {
  return scriptedModel([
    {
      text: "Sending the notice.",
      toolCalls: RECIPIENTS.map((to) => ({
        name: "send_email",
        args: JSON.stringify({ to, body: "notice" }),
      })),
    },
    { text: "Done." },
  ]);
}

/** Tool results of the conversation by call id. */
function results(entries: readonly Entry[]) {
  const byCall = new Map<string, { outcome: string; output: unknown }>();
  for (const entry of entries)
    if (entry.content.kind === "tool-result")
      byCall.set(entry.content.toolCallId, { outcome: entry.content.outcome, output: entry.content.output });
  return byCall;
}

/**
 * Runs the campaign on `disk` with a host that dies after each takeover: the first process dies after
 * `firstDeliveries` mails; each of the next `takeovers` processes commits its recovery, lets at most one
 * more mail out and dies. A last process runs undisturbed.
 */
async function crashLoop(seed: number, registryOf: (mail: MailService) => Registry, mail: MailService) {
  const random = rng(seed);
  const disk: MemoryStorage = memoryStorage();
  const takeovers = 4 + random.int(4);
  for (let life = 0; life <= takeovers + 1; life++) {
    const last = life === takeovers + 1;
    mail.reachable = true;
    const storage = new DyingStorage(disk, last ? Number.POSITIVE_INFINITY : life === 0 ? 2 : 1, () => {
      mail.reachable = false;
    });
    let accepted = 0;
    const allowedMails = life === 0 ? 1 + random.int(4) : random.int(2);
    mail.onAccepted = () => {
      if (!last && ++accepted >= allowedMails) storage.die();
    };
    const session = await openSession({
      id: "loop",
      storage,
      registry: registryOf(mail),
      ids: sequentialIds(1_000 * (life + 1)),
    });
    if (life === 0)
      await session.submit({ requestId: "r1", conversationId: "main", input: "Send the notice" });
    await session.resume();
    if (last) {
      const submission = session.submissionForRequest("r1");
      const done = await session.wait(submission?.id ?? "");
      const entries = await session.readEntries("main", 0);
      await session.close();
      return { done, entries, takeovers };
    }
    await session.whenIdle().catch(() => undefined);
    await session.close();
  }
  throw new Error("unreachable");
}

describe("at the restart limit", () => {
  it("confirms every crash-looped send: delivered ones are ok, the others not-run, none sent twice", async () => {
    const lengths = new Set<number>();
    for (let seed = 1; seed <= 16; seed++) {
      const mail = new MailService();
      const { done, entries, takeovers } = await crashLoop(
        seed,
        (m) => createRegistry({ ...createAgent({ model: campaignModel(), tools: [sendEmailTool(m)] }) }),
        mail,
      );
      lengths.add(takeovers);
      expect(takeovers, `seed ${seed}`).toBeGreaterThan(3); // past the default limit of 3
      // The settling phase has its own 3 restarts; cut off more often than that, a call is only ever unknown.
      const settled = takeovers <= 6;
      expect(done.status, `seed ${seed}`).toBe("succeeded");
      expect(
        [...mail.deliveryCounts().values()].every((n) => n === 1),
        `seed ${seed}: sent twice`,
      ).toBe(true);
      const byCall = results(entries);
      expect(byCall.size, `seed ${seed}`).toBe(RECIPIENTS.length);
      RECIPIENTS.forEach((to, i) => {
        const result = byCall.get(`call_0_${i}`); // the scripted model's id for call i of its first turn
        const delivered = mail.deliveries.some((d) => d.to === to);
        // The truth, whichever way: never "error" for a call whose fate was only cut off.
        const truth = delivered ? "ok" : "not-run";
        if (settled) expect(result?.outcome, `seed ${seed} ${to}`).toBe(truth);
        else expect([truth, "unknown"], `seed ${seed} ${to}`).toContain(result?.outcome);
      });
    }
    expect(lengths.size).toBeGreaterThan(2); // the seeds cover several loop lengths, settled and not
  });

  it("ends a call nothing can confirm as unknown, and tells the model not to repeat it blindly", async () => {
    const effects: string[] = [];
    const charge = defineTool({
      name: "charge_card",
      description: "Charge a card",
      input: z.object({ cents: z.number() }),
      replay: "unsafe",
      maxRestarts: 1,
      execute: ({ cents }) => {
        effects.push(`charged ${cents}`);
        return { ok: true };
      },
    });
    const disk = memoryStorage();
    const model = () =>
      scriptedModel([
        { text: "", toolCalls: [{ name: "charge_card", args: '{"cents":500}' }] },
        { text: "Stopped." },
      ]);
    const registry = () => createRegistry({ ...createAgent({ model: model(), tools: [charge] }) });
    // Three processes each die with the charge running (intent committed, result never committed).
    for (let life = 0; life < 3; life++) {
      const storage = new DyingStorage(disk, life === 0 ? 2 : 1, () => undefined);
      const session = await openSession({
        id: "u",
        storage,
        registry: registry(),
        ids: sequentialIds(100 * (life + 1)),
      });
      if (life === 0) await session.submit({ requestId: "r", conversationId: "main", input: "charge" });
      await session.resume();
      await session.whenIdle().catch(() => undefined);
      await session.close();
    }
    const session = await openSession({
      id: "u",
      storage: disk,
      registry: registry(),
      ids: sequentialIds(900),
    });
    const plan = session.previewRecovery();
    await session.resume();
    const submission = session.submissionForRequest("r");
    await session.wait(submission?.id ?? "");
    const result = results(await session.readEntries("main", 0)).get("call_0_0");
    expect(result?.outcome).toBe("unknown");
    expect(JSON.stringify(result?.output)).toContain("do not call it again without checking");
    // The first process ran it; once the intent was committed, the kernel never ran it blindly again.
    expect(effects).toEqual(["charged 500"]);
    expect(plan.events.length).toBeGreaterThan(0);
  });

  it("takes the limit per tool: a tool with maxRestarts 0 settles at its first restart", async () => {
    const mail = new MailService();
    const strict = { ...sendEmailTool(mail), maxRestarts: 0 };
    const disk = memoryStorage();
    const registry = () => createRegistry({ ...createAgent({ model: campaignModel(), tools: [strict] }) });
    const first = new DyingStorage(disk, 2, () => {
      mail.reachable = false;
    });
    mail.onAccepted = (_receipt, count) => {
      if (count >= 2) first.die();
    };
    const a = await openSession({ id: "p", storage: first, registry: registry(), ids: sequentialIds(1) });
    await a.submit({ requestId: "r", conversationId: "main", input: "go" });
    await a.resume();
    await a.whenIdle().catch(() => undefined);
    await a.close();
    mail.reachable = true;
    mail.onAccepted = undefined;
    const b = await openSession({ id: "p", storage: disk, registry: registry(), ids: sequentialIds(500) });
    const plan = b.previewRecovery();
    const limits = plan.events.filter((e) => e.type === "restart-limit");
    expect(limits.length).toBe(RECIPIENTS.length);
    expect(limits.every((e) => e.type === "restart-limit" && e.settleIn === "settle")).toBe(true);
    await b.resume();
    await b.wait(b.submissionForRequest("r")?.id ?? "");
    const byCall = results(await b.readEntries("main", 0));
    expect([...byCall.values()].filter((r) => r.outcome === "ok")).toHaveLength(2);
    expect([...byCall.values()].filter((r) => r.outcome === "not-run")).toHaveLength(RECIPIENTS.length - 2);
    expect(mail.deliveries).toHaveLength(2); // nothing was sent after the limit
  });
});
