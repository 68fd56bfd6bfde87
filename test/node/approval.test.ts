/**
 * Tool approval (DESIGN §4: "tool approval is such a wait between the tool's intent and its execution"):
 * a tool that asks first commits its intent, is listed as pending with its arguments, and runs only after
 * `{ approved: true }` — with edited arguments validated again — while a rejection is a result the model
 * sees and the tool never runs. Everything survives the process dying while it waits.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import {
  type CommitGuard,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  type Entry,
  InvalidArgumentError,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  memoryStorage,
  openSession,
  SignalRefusedError,
  type Storage,
  scriptedModel,
  sequentialIds,
  TOOL_TASK,
} from "../../src/index.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";

function sendTool(mail: MailService, approval: boolean | ((args: { to: string }) => boolean) = true) {
  return defineTool({
    name: "send_email",
    description: "Send one email",
    input: z.object({ to: z.string().email(), body: z.string() }),
    replay: "unsafe",
    approval,
    confirm: (operationId) => (mail.lookup(operationId) ? { sent: true } : undefined),
    execute: ({ to, body }, { operationId }) => {
      const receipt = mail.send({ to, body, idempotencyKey: operationId });
      return { messageId: receipt.messageId, to };
    },
  });
}

const model = () =>
  scriptedModel([
    { text: "Sending.", toolCalls: [{ name: "send_email", args: { to: "ana@example.com", body: "hello" } }] },
    { text: "Done." },
  ]);

async function open(storage: MemoryStorage, mail: MailService, approval?: Parameters<typeof sendTool>[1]) {
  const clock = new ManualClock(1_000);
  const agent = createAgent({ model: model(), tools: [sendTool(mail, approval)] });
  const session = await openSession({
    id: "approval",
    storage,
    registry: createRegistry({ ...agent }),
    clock,
    timers: new ManualTimers(clock),
    ids: sequentialIds(),
  });
  await session.resume();
  return session;
}

async function pendingApproval(storage: MemoryStorage, mail: MailService) {
  const session = await open(storage, mail);
  const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "mail Ana" });
  await session.whenIdle();
  const [pending] = session.view().pending;
  if (!pending) throw new Error("no pending approval");
  return { session, submission, pending };
}

const toolResults = (entries: readonly Entry[]) =>
  entries.flatMap((e) => (e.content.kind === "tool-result" ? [e.content] : []));

describe("tool approval", () => {
  it("waits before the tool runs, listing the call with its arguments, and runs it once approved", async () => {
    const mail = new MailService();
    const { session, submission, pending } = await pendingApproval(memoryStorage(), mail);
    expect(pending).toMatchObject({
      key: `approval:${pending.taskId}`,
      kind: TOOL_TASK,
      about: { tool: "send_email", arguments: { to: "ana@example.com", body: "hello" } },
    });
    expect(mail.deliveries).toEqual([]);
    expect(session.view().submissions[0]?.status).toBe("running");
    await session.signal(pending.key, { approved: true }, { requestId: "a1" });
    const done = await session.wait(submission.id);
    expect(done.status).toBe("succeeded");
    expect(mail.deliveries.map((d) => d.to)).toEqual(["ana@example.com"]);
    const entries = session.view().conversations[0]?.entries ?? [];
    expect(toolResults(entries).map((r) => r.outcome)).toEqual(["ok"]);
  });

  it("begins an approval's wait without reading its key's signal: the key names a new call", async () => {
    const storage = memoryStorage();
    const reads: string[] = [];
    const readSignals = storage.readSignals.bind(storage);
    const readWaiting = storage.readWaiting.bind(storage);
    storage.readSignals = (sessionId, keys) => {
      reads.push(...keys);
      return readSignals(sessionId, keys);
    };
    storage.readWaiting = (sessionId, keys) => {
      reads.push(...keys);
      return readWaiting(sessionId, keys);
    };
    const { session, pending } = await pendingApproval(storage, new MailService());
    expect(pending.key).toMatch(/^approval:/);
    expect(reads).toEqual([]);
    await session.close();
  });

  it("turns a rejection into a result the model sees, and never runs the tool", async () => {
    const mail = new MailService();
    const { session, submission, pending } = await pendingApproval(memoryStorage(), mail);
    await session.signal(pending.key, { approved: false, reason: "wrong person" }, { requestId: "a1" });
    expect((await session.wait(submission.id)).status).toBe("succeeded");
    expect(mail.deliveries).toEqual([]);
    const [result] = toolResults(session.view().conversations[0]?.entries ?? []);
    expect(result).toMatchObject({
      outcome: "rejected",
      output: { error: expect.stringContaining("wrong person") },
    });
    const tool = session.task(pending.taskId);
    expect(tool?.state).toMatchObject({
      status: "succeeded",
      result: { outcome: "rejected", via: "approval" },
    });
  });

  it("runs edited arguments when they are valid, and refuses invalid ones at once, storing nothing", async () => {
    const mail = new MailService();
    const { session, submission, pending } = await pendingApproval(memoryStorage(), mail);
    const version = session.version;
    const bad = session.signal(
      pending.key,
      { approved: true, arguments: { to: "not an address", body: "hello" } },
      { requestId: "a1" },
    );
    await expect(bad).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(bad).rejects.toMatchObject({ issues: [{ path: "payload.arguments.to" }] });
    expect(session.version).toBe(version);
    expect(session.view().pending.map((p) => p.key)).toEqual([pending.key]);
    const edited = { to: "bo@example.com", body: "hello, edited" };
    await session.signal(pending.key, { approved: true, arguments: edited }, { requestId: "a2" });
    expect((await session.wait(submission.id)).status).toBe("succeeded");
    expect(mail.deliveries.map((d) => d.to)).toEqual(["bo@example.com"]);
  });

  it("answers a second identical approval with the first outcome, and refuses a different one", async () => {
    const mail = new MailService();
    const { session, submission, pending } = await pendingApproval(memoryStorage(), mail);
    await session.signal(pending.key, { approved: true }, { requestId: "a1" });
    await session.wait(submission.id);
    const again = await session.signal(pending.key, { approved: true }, { requestId: "a1" });
    expect(again.duplicate).toBe(true);
    await expect(session.signal(pending.key, { approved: false }, { requestId: "a2" })).rejects.toMatchObject(
      {
        code: "signal-conflict",
      },
    );
    expect(mail.deliveries).toHaveLength(1);
  });

  it("refuses an approval after the call was cancelled, and the mail is never sent", async () => {
    const mail = new MailService();
    const { session, submission, pending } = await pendingApproval(memoryStorage(), mail);
    await session.cancelSubmission(submission.id, "changed my mind");
    expect((await session.wait(submission.id)).status).toBe("cancelled");
    const late = session.signal(pending.key, { approved: true }, { requestId: "a1" });
    await expect(late).rejects.toBeInstanceOf(SignalRefusedError);
    await expect(late).rejects.toMatchObject({ code: "signal-not-awaited" });
    // A call that never was is not found (404 at the edge), where a call that ended no longer waits (409).
    await expect(
      session.signal("approval:no-such-call", { approved: true }, { requestId: "a2" }),
    ).rejects.toMatchObject({ code: "wait-not-found", key: "approval:no-such-call" });
    expect(session.view().pending).toEqual([]);
    expect(mail.deliveries).toEqual([]);
    expect(session.task(pending.taskId)?.state).toEqual({ status: "cancelled", reason: "changed my mind" });
  });

  it("keeps a pending approval across the process dying, and continues when it comes to the next one", async () => {
    const mail = new MailService();
    const storage = memoryStorage();
    const first = await pendingApproval(storage, mail);
    await first.session.close(); // the tab closed while it waited
    const second = await open(storage, mail);
    await second.whenIdle();
    expect(second.view().pending.map((p) => p.key)).toEqual([first.pending.key]);
    expect(second.previewRecovery().awaiting.map((a) => a.keys)).toEqual([[first.pending.key]]);
    expect(mail.deliveries).toEqual([]);
    await second.signal(first.pending.key, { approved: true }, { requestId: "a1" });
    expect((await second.wait(first.submission.id)).status).toBe("succeeded");
    expect(mail.deliveries).toHaveLength(1);
  });

  it("asks only when the tool's approval function says so for these arguments", async () => {
    const mail = new MailService();
    const session = await open(memoryStorage(), mail, ({ to }) => !to.endsWith("@example.com"));
    const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "mail Ana" });
    expect((await session.wait(submission.id)).status).toBe("succeeded");
    expect(mail.deliveries).toHaveLength(1);
    expect(session.view().pending).toEqual([]);
  });

  it("delivers the approved mail exactly once when the process dies at any commit around the approval", async () => {
    for (const when of ["before", "after"] as const) {
      for (let dieAt = 0; ; dieAt++) {
        const mail = new MailService();
        const disk = memoryStorage();
        const first = await pendingApproval(disk, mail);
        const key = first.pending.key;
        await first.session.close();
        // The process that gets the approval dies at its commit number `dieAt`: before the write, or
        // right after it is durable but before the process hears back.
        const dying = new DyingAt(disk.reopen(), dieAt, when);
        let session = await openFor(dying, mail);
        const answer = () => session.signal(key, { approved: true }, { requestId: "approve-1" });
        let died = false;
        try {
          await answer();
          await session.wait(first.submission.id);
        } catch {
          died = true;
        }
        if (!dying.died) {
          // The whole run fit before the planned death: every boundary has been tried.
          expect(died).toBe(false);
          expect(dieAt).toBeGreaterThan(3);
          break;
        }
        await session.close();
        session = await openFor(disk.reopen(), mail);
        await answer(); // the client retries with the same requestId: the first outcome, or delivered now
        const done = await session.wait(first.submission.id);
        const where = `${when} commit ${dieAt}`;
        expect(done.status, where).toBe("succeeded");
        expect(mail.deliveries.length, where).toBe(1);
        const [stored] = await disk.readSignals("approval", [key]);
        expect((stored?.value as { consumedBy?: string } | undefined)?.consumedBy, where).toBe(
          first.pending.taskId,
        );
        await session.close();
      }
    }
  });
});

/** A store handle whose commit number `at` kills the process (before writing, or right after). */
class DyingAt extends ForwardingStorage {
  died = false;
  private commits = 0;
  constructor(
    inner: Storage,
    private readonly at: number,
    private readonly when: "before" | "after",
  ) {
    super(inner);
  }
  protected override target(): Storage {
    if (this.died) throw new Error("process killed");
    return this.inner;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    const inner = this.target();
    if (this.commits++ !== this.at) return inner.commit(guard, commits);
    if (this.when === "after") await inner.commit(guard, commits);
    this.died = true;
    throw new Error("process killed");
  }
}

async function openFor(storage: Storage, mail: MailService) {
  const clock = new ManualClock(1_000);
  const agent = createAgent({ model: model(), tools: [sendTool(mail)] });
  const session = await openSession({
    id: "approval",
    storage,
    registry: createRegistry({ ...agent }),
    clock,
    timers: new ManualTimers(clock),
    ids: sequentialIds(5_000),
  });
  await session.resume();
  return session;
}
