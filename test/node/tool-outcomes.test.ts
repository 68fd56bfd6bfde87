/**
 * What the model is told about a tool call that ran: never `error` when it may have taken effect. Outputs
 * JSON can stand for are stored as that JSON; outputs it cannot hold make an unsafe call `unknown`; a call
 * whose turn was cancelled (the cancel committed) and then cut off by a crash is only confirmed, never
 * started again.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type AgentOptions,
  createAgent,
  createRegistry,
  defineTool,
  type Json,
  ManualClock,
  ManualTimers,
  type Model,
  type ModelRequest,
  memoryStorage,
  openSession,
  type Session,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { deferred, KillableStorage } from "../support/storage-wrappers.ts";

async function open(
  storage: ReturnType<typeof memoryStorage> | KillableStorage,
  model: Model,
  tools: NonNullable<AgentOptions["tools"]>,
) {
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const agent = createAgent({ model, tools, backoffMs: 1_000 });
  const registry = createRegistry({ ...agent });
  return openSession({ id: "agent", storage, registry, clock, timers, ids: sequentialIds() });
}

/** One `send_email` call, then a final answer; `seen` collects the tool messages the model read. */
function sendOnce(seen: string[] = []) {
  return scriptedModel([
    { toolCalls: [{ name: "send_email", args: { to: "ceo@example.com" } }] },
    (request: ModelRequest) => {
      for (const m of request.messages) if (m.role === "tool") seen.push(m.content);
      return { text: "done" };
    },
  ]);
}

/** The tool results stored in the conversation: outcome and output. */
function results(session: Session) {
  const entries = session.view().conversations[0]?.entries ?? [];
  return entries.flatMap((e) =>
    e.content.kind === "tool-result" ? [{ outcome: e.content.outcome, output: e.content.output }] : [],
  );
}

/** The error text of the conversation's only tool result. */
function errorOf(session: Session): string {
  const [answer] = results(session);
  return String((answer?.output as { error?: string } | undefined)?.error);
}

/** A `send_email` tool that counts its runs and returns `output` (whatever a JavaScript tool may return). */
function mailer(output: unknown, replay: "safe" | "unsafe" = "unsafe") {
  const sent = { count: 0 };
  const tool = defineTool({
    name: "send_email",
    description: "Sends one email",
    input: z.object({ to: z.string() }),
    replay,
    execute: () => {
      sent.count++;
      return output as Json;
    },
  });
  return { sent, tool };
}

async function runOnce(tool: NonNullable<AgentOptions["tools"]>[number], seen: string[] = []) {
  const session = await open(memoryStorage(), sendOnce(seen), [tool]);
  await session.resume();
  const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "send it" });
  const ended = await session.wait(sub.id);
  return { session, ended };
}

describe("a tool call that ran", () => {
  it.each([
    ["an object with an undefined field", { id: "m1", warning: undefined }, { id: "m1" }],
    ["a Date", { at: new Date(0) }, { at: "1970-01-01T00:00:00.000Z" }],
    ["NaN", { n: Number.NaN }, { n: null }],
    ["nothing (undefined)", undefined, null],
  ])("returning %s is ok, stored as the JSON it stands for", async (_what, output, stored) => {
    const { sent, tool } = mailer(output);
    const seen: string[] = [];
    const { session, ended } = await runOnce(tool, seen);
    expect(ended.status).toBe("succeeded");
    expect(results(session)).toEqual([{ outcome: "ok", output: stored }]);
    expect(seen.map((m) => (JSON.parse(m) as { outcome: string }).outcome)).toEqual(["ok"]);
    expect(sent.count).toBe(1);
  });

  it.each([
    ["a BigInt", { id: 1n }, "BigInt"],
    ["a lone surrogate", { subject: "broken \ud800" }, "lone surrogate"],
  ])(
    "unsafe, returning %s that JSON cannot hold, is unknown: it ran and may have taken effect",
    async (_what, output, why) => {
      const { sent, tool } = mailer(output);
      const seen: string[] = [];
      const { session, ended } = await runOnce(tool, seen);
      expect(ended.status).toBe("succeeded");
      const [answer] = results(session);
      expect(answer?.outcome).toBe("unknown");
      const error = errorOf(session);
      expect(error).toContain("send_email ran, but its output could not be stored");
      expect(error).toContain(why);
      expect(error).toContain("do not call it again without checking");
      expect(seen.map((m) => (JSON.parse(m) as { outcome: string }).outcome)).toEqual(["unknown"]);
      expect(sent.count).toBe(1);
    },
  );

  it("replay-safe, returning what JSON cannot hold, is an error that says it is safe to call again", async () => {
    const { tool } = mailer({ id: 1n }, "safe");
    const { session } = await runOnce(tool);
    const [answer] = results(session);
    expect(answer?.outcome).toBe("error");
    expect(errorOf(session)).toMatch(/could not be stored \(.*BigInt.*\); it is safe to call again/);
  });
});

describe("an unsafe call cut off by a crash", () => {
  /** A mail provider that outlives the kernel's crashes, and a `send_email` that may hang in it. */
  function provider() {
    const world = { runs: 0, sent: [] as string[], lookups: 0 };
    const started = deferred();
    const tool = (options: { hang?: boolean; confirmFails?: boolean } = {}) =>
      defineTool({
        name: "send_email",
        description: "Sends one email",
        input: z.object({ to: z.string() }),
        replay: "unsafe",
        confirm: (operationId) => {
          world.lookups++;
          if (options.confirmFails) throw new Error("the provider's lookup is down");
          return world.sent.includes(operationId) ? { sent: true } : undefined;
        },
        // It ignores its signal, as a slow SMTP call may.
        execute: async ({ to }, { operationId }) => {
          world.runs++;
          started.resolve();
          if (options.hang) await new Promise(() => undefined);
          world.sent.push(operationId);
          return { sent: to };
        },
      });
    return { world, started, tool };
  }

  /** A process whose send hangs once it started, over `disk`: the submission, and the store to kill. */
  async function sendInFlight(tool: ReturnType<typeof provider>["tool"], started: Promise<void>) {
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    const a = await open(first, sendOnce(), [tool({ hang: true })]);
    await a.resume();
    const sub = await a.submit({ requestId: "r1", conversationId: "main", input: "email the ceo" });
    await started;
    return { disk, first, a, sub };
  }

  it("after its turn was cancelled, is only confirmed: not found, it ends not-run and never runs again", async () => {
    const { world, started, tool } = provider();
    const { disk, first, a, sub } = await sendInFlight(tool, started.promise);
    // The user presses stop: the cancel is committed while the send is still in flight; then a crash.
    await a.cancelSubmission(sub.id, "user pressed stop");
    expect(a.view().tasks.every((t) => t.cancelRequested === "user pressed stop")).toBe(true);
    first.kill();

    const b = await open(disk.reopen(), sendOnce(), [tool()]);
    await b.resume();
    expect((await b.wait(sub.id)).status).toBe("cancelled");
    expect(world.lookups).toBe(1);
    expect(world.runs).toBe(1); // the send the user stopped never starts again
    expect(world.sent).toEqual([]);
    const [answer] = results(b);
    expect(answer?.outcome).toBe("not-run");
    expect(errorOf(b)).toContain(
      "confirmed by operation id not to have happened, and stopped before it ran again",
    );
  });

  it("whose confirm then fails is unknown, never an error the model would retry", async () => {
    const { world, started, tool } = provider();
    const { disk, first, sub } = await sendInFlight(tool, started.promise);
    first.kill();

    const seen: string[] = [];
    const b = await open(disk.reopen(), sendOnce(seen), [tool({ confirmFails: true })]);
    await b.resume();
    expect((await b.wait(sub.id)).status).toBe("succeeded");
    expect(world.lookups).toBe(1);
    expect(world.runs).toBe(1);
    const [answer] = results(b);
    expect(answer?.outcome).toBe("unknown");
    expect(errorOf(b)).toContain("the provider's lookup is down");
    expect(errorOf(b)).toContain("do not call it again without checking");
    expect(seen.map((m) => (JSON.parse(m) as { outcome: string }).outcome)).toEqual(["unknown"]);
  });

  it("whose arguments the tool no longer accepts after an upgrade is unknown, never an error the model would retry", async () => {
    const { world, started, tool } = provider();
    const { disk, first, sub } = await sendInFlight(tool, started.promise);
    first.kill();

    // The next version of the app asks for a subject too: the stored intent's arguments no longer parse.
    const upgraded = defineTool({
      name: "send_email",
      description: "Sends one email",
      input: z.object({ to: z.string(), subject: z.string() }),
      replay: "unsafe",
      execute: ({ to }) => {
        world.runs++;
        return { sent: to };
      },
    });
    const seen: string[] = [];
    const b = await open(disk.reopen(), sendOnce(seen), [upgraded]);
    await b.resume();
    expect((await b.wait(sub.id)).status).toBe("succeeded");
    expect(world.runs).toBe(1);
    const [answer] = results(b);
    expect(answer?.outcome).toBe("unknown");
    expect(errorOf(b)).toContain("do not call it again without checking");
    expect(seen.map((m) => (JSON.parse(m) as { outcome: string }).outcome)).toEqual(["unknown"]);
  });
});
