/**
 * A cancelled tool call answers the model with what is known, once, in the commit that ends it: `not-run`
 * only when its work cannot have begun. The hard cases are a phase that returns after the cancel (what it
 * staged is committed: a refusal, a spawned run) and calls still queued for an exclusive key.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitGuard,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTask,
  defineTool,
  type Json,
  ManualClock,
  ManualTimers,
  type Model,
  type ModelRequest,
  memoryStorage,
  openSession,
  type Registry,
  type Session,
  scriptedModel,
  type ToolContext,
} from "../../src/index.ts";
import { ForwardingStorage } from "../../src/testing/index.ts";

/** The tool results stored in a conversation: call id, outcome, error text. */
function answers(session: Session, conversationId = "c") {
  const entries = session.view().conversations.find((c) => c.id === conversationId)?.entries ?? [];
  return entries.flatMap((e) =>
    e.content.kind === "tool-result"
      ? [[e.content.toolCallId, e.content.outcome, (e.content.output as { error?: string }).error]]
      : [],
  );
}

const settle = async (rounds = 30) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A promise and the function that settles it. */
function latch<T = void>() {
  let open: (value: T) => void = () => undefined;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/**
 * An unsafe exclusive tool `charge`, and an agent whose model charges the number each message says: the
 * charge of 1 holds the key until `held` opens.
 */
function exclusiveCharges() {
  const ran: number[] = [];
  const held = latch();
  const charge = defineTool({
    name: "charge",
    description: "Charges a card",
    input: z.object({ n: z.number() }),
    replay: "unsafe",
    exclusive: true,
    execute: async ({ n }) => {
      ran.push(n);
      if (n === 1) await held.promise;
      return { n };
    },
  });
  const model = scriptedModel([
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "charged" }
        : { toolCalls: [{ name: "charge", args: { n: Number(request.messages.at(-1)?.content) } }] },
  ]);
  return { ran, held, agent: createAgent({ model, tools: [charge] }) };
}

/** `sign`: an unsafe tool of no arguments that runs only in browsers (in the exclusive group, when given). */
function signTool(
  execute: (args: unknown, context: ToolContext) => Json | Promise<Json>,
  exclusive?: string,
) {
  return defineTool({
    name: "sign",
    description: "sign",
    input: z.object({}),
    replay: "unsafe",
    runsOn: "browser",
    ...(exclusive !== undefined && { exclusive }),
    execute,
  });
}

/** The registry of an agent whose model asks once for `sign`, an unsafe tool for browsers, then answers. */
function browserSign(execute: () => Json | Promise<Json>) {
  const model = scriptedModel([{ toolCalls: [{ name: "sign", args: {} }] }, { text: "done" }]);
  return createRegistry(createAgent({ model, tools: [signTool(execute)] }));
}

/** Cancels the Submission `id()` names ("stop"), once, at the first change after `from` that `when` accepts. */
function cancelOnce(
  session: Session,
  from: number,
  when: (change: CommitRecord) => boolean,
  id: () => string | undefined,
): () => boolean {
  let asked = false;
  session.subscribe(from, (change) => {
    const submissionId = id();
    if (asked || submissionId === undefined || !when(change)) return;
    asked = true;
    void session.cancelSubmission(submissionId, "stop");
  });
  return () => asked;
}

type Precheck = () => Promise<string | undefined>;

/**
 * A tool of no arguments whose argument check throws (a bug in the app's schema): checked when the call's
 * turn comes, it fails that turn. (A `precheck` that throws only rejects its call.)
 */
function brokenTool(name: string, message: string) {
  const input = z.object({}).refine(() => {
    throw new Error(message);
  });
  return defineTool({ name, description: name, input, replay: "unsafe", execute: () => ({ ok: true }) });
}

/** A tool of no arguments; its `precheck`, if any, runs when the call's turn comes. */
function bareTool(name: string, replay: "safe" | "unsafe", execute: () => Json, precheck?: Precheck) {
  return defineTool({
    name,
    description: name,
    input: z.object({}),
    replay,
    ...(precheck && { precheck }),
    execute,
  });
}

async function openWith(
  agent: ReturnType<typeof createAgent>,
  tasks: Parameters<Registry["registerTask"]>[0][] = [],
) {
  const registry = createRegistry({ ...agent, tasks: [...agent.tasks, ...tasks] });
  const session = await openSession({ id: "cancel", storage: memoryStorage(), registry });
  await session.resume();
  return session;
}

describe("a cancelled tool call's answer", () => {
  it("a queued call the returning phase refused is answered once, with the refusal", async () => {
    const first = latch<{ ok: boolean }>();
    const checking = latch();
    const verdict = latch<string>();
    const tool = (name: string, precheck?: () => Promise<string>) =>
      defineTool({
        name,
        description: name,
        input: z.object({}),
        replay: "safe",
        ...(precheck && { precheck }),
        execute: () => (name === "first" ? first.promise : { ok: true }),
      });
    const second = tool("second", () => {
      checking.open(); // validated when its turn comes
      return verdict.promise;
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "first", args: {} },
          { name: "second", args: {} },
        ],
      },
      { text: "done" },
    ]);
    const session = await openWith(
      createAgent({ model, tools: [tool("first"), second], toolCalls: "sequential" }),
    );
    const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
    await expect.poll(() => session.view().tasks.length).toBe(2);
    first.open({ ok: true });
    await checking.promise; // the turn is starting `second`
    await session.cancelSubmission(sub.id, "stop");
    verdict.open("the account is locked");
    expect((await session.wait(sub.id)).status).toBe("cancelled");
    expect(answers(session)).toEqual([
      ["call_0_0", "ok", undefined],
      ["call_0_1", "error", expect.stringContaining("the account is locked")],
    ]);
  });

  it("a task-backed call whose run was spawned by the phase that returned after the cancel never runs it: not-run", async () => {
    const effects: string[] = [];
    const sendAll = defineTask({
      kind: "send-all",
      version: 1,
      input: z.object({ to: z.string() }),
      phases: {
        // The work happens whatever the signal says: it must never start once the call is cancelled.
        start: (ctx) => {
          effects.push(`sent to ${ctx.input.to}`);
          return ctx.complete({ sent: 1 });
        },
      },
    });
    const checking = latch();
    const verdict = latch<undefined>();
    let checks = 0;
    const send = defineTool({
      name: "send",
      description: "send",
      input: z.object({ to: z.string() }),
      replay: "unsafe",
      task: "send-all",
      // Checked when the model asks (at once), then in the tool task's own call phase (held there).
      precheck: () => {
        checks += 1;
        if (checks === 1) return undefined;
        checking.open();
        return verdict.promise;
      },
    });
    const model = scriptedModel([{ toolCalls: [{ name: "send", args: { to: "ana" } }] }, { text: "done" }]);
    const session = await openWith(createAgent({ model, tools: [send] }), [sendAll]);
    const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
    await checking.promise;
    await session.cancelSubmission(sub.id, "stop");
    verdict.open(undefined); // the check passes: the phase spawns the run and returns
    expect((await session.wait(sub.id)).status).toBe("cancelled");
    const run = session.view().tasks.find((t) => t.kind === "send-all");
    expect(run?.state).toEqual({ status: "cancelled", reason: "stop" });
    expect(effects).toEqual([]);
    expect(answers(session)).toEqual([
      ["call_0_0", "not-run", "the tool call ended without a result: cancelled before it ran (stop)"],
    ]);
  });

  it("a call still waiting for its exclusive key (never cut off) is not-run; the one holding the key runs on", async () => {
    const { ran, held, agent } = exclusiveCharges();
    const session = await openWith(agent);
    const first = await session.submit({ requestId: "r1", conversationId: "c1", input: "1" });
    const second = await session.submit({ requestId: "r2", conversationId: "c2", input: "2" });
    const call = (n: number) =>
      session
        .view()
        .tasks.find((t) => t.kind === "agent.tool" && (t.input as { args: string }).args === `{"n":${n}}`);
    await expect.poll(() => call(2)?.state.status).toBe("pending");
    await session.cancelSubmission(second.id, "not needed");
    expect((await session.wait(second.id)).status).toBe("cancelled");
    held.open();
    expect((await session.wait(first.id)).status).toBe("succeeded");
    expect(ran).toEqual([1]);
    expect(answers(session, "c2")).toEqual([
      [
        expect.any(String),
        "not-run",
        "the tool call ended without a result: cancelled before it ran (not needed)",
      ],
    ]);
    expect(answers(session, "c1")).toEqual([[expect.any(String), "ok", undefined]]);
  });

  it("a response the model gave after its turn was cancelled is recorded, and none of its calls starts: each is not-run", async () => {
    const asked = latch();
    const reply = latch();
    const ran: number[] = [];
    const step = defineTool({
      name: "step",
      description: "step",
      input: z.object({ n: z.number() }),
      replay: "unsafe",
      execute: ({ n }) => {
        ran.push(n);
        return { n };
      },
    });
    // A provider that finishes the response whatever the signal says.
    const model: Model = {
      id: "stubborn",
      generate: async () => {
        asked.open();
        await reply.promise;
        const call = (n: number) => ({ id: `c${n}`, name: "step", args: JSON.stringify({ n }) });
        return { text: "", toolCalls: [call(1), call(2)] };
      },
    };
    const session = await openWith(createAgent({ model, tools: [step], toolCalls: "sequential" }));
    const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
    await asked.promise;
    await session.cancelSubmission(sub.id, "stop");
    reply.open();
    expect((await session.wait(sub.id)).status).toBe("cancelled");
    expect(ran).toEqual([]);
    const notRun = "the tool call ended without a result: cancelled before it ran (stop)";
    expect(answers(session)).toEqual([
      ["c1", "not-run", notRun], // spawned in the commit that ended the turn, and ended with it
      ["c2", "not-run", notRun], // queued behind it, never spawned
    ]);
  });

  it("a call for another kind of host cancelled while its execute phase handed it over (nothing ran here) is not-run", async () => {
    const signed: string[] = [];
    const registry = browserSign(() => {
      signed.push("ran");
      return { signed: true };
    });
    const edge = await openSession({ id: "handed", storage: memoryStorage(), registry, host: "edge" });
    let submissionId: string | undefined;
    // The cancel comes the moment the call's intent is fixed: its execute phase runs after it was asked.
    const asked = cancelOnce(
      edge,
      0,
      (change) => change.tasks.some((t) => t.kind === "agent.tool" && t.checkpoint.phase === "execute"),
      () => submissionId,
    );
    await edge.resume();
    submissionId = (await edge.submit({ requestId: "r1", conversationId: "h", input: "sign" })).id;
    expect((await edge.wait(submissionId)).status).toBe("cancelled");
    expect(asked()).toBe(true);
    expect(signed).toEqual([]);
    expect(edge.pending()).toEqual([]); // no host is offered the call
    expect(answers(edge, "h")).toEqual([
      ["call_0_0", "not-run", "the tool call ended without a result: cancelled before it ran (stop)"],
    ]);
    await edge.close();
  });

  it("a call whose earlier attempt ran the tool before a move to another kind of host, cancelled as it is handed over, is unknown", async () => {
    const started = latch();
    const registry = browserSign(async () => {
      started.open();
      await new Promise(() => undefined); // the tab dies while it signs
      return { signed: true };
    });
    const storage = memoryStorage();
    const tab = await openSession({ id: "moved", storage, registry, host: "browser" });
    await tab.resume();
    const submission = await tab.submit({ requestId: "r1", conversationId: "m", input: "sign" });
    await started.promise;
    await tab.close(); // cut off mid-run: the call stays stored as running in `execute`
    // Its edge reopens it: the phase is re-entered (a restart) and only hands the call to a browser.
    const edge = await openSession({ id: "moved", storage, registry, host: "edge" });
    const asked = cancelOnce(
      edge,
      edge.version,
      (change) => change.tasks.some((t) => t.kind === "agent.tool" && t.restarts > 0),
      () => submission.id,
    );
    await edge.resume();
    expect((await edge.wait(submission.id)).status).toBe("cancelled");
    expect(asked()).toBe(true);
    const [answer] = answers(edge, "m");
    expect(answer?.[1]).toBe("unknown");
    await edge.close();
  });

  it("a call an executor took (its lease ended, then queued for its exclusive key) is unknown, never not-run", async () => {
    const signed: string[] = [];
    const held = latch();
    const sign = signTool((_a, { operationId }) => {
      signed.push(operationId);
      return { signed: true };
    }, "docs");
    const archive = defineTool({
      name: "archive",
      description: "archive",
      input: z.object({}),
      replay: "unsafe",
      exclusive: "docs",
      execute: async () => {
        await held.promise;
        return { archived: true };
      },
    });
    const model = scriptedModel([
      (request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: "done" }
          : { toolCalls: [{ name: String(request.messages.at(-1)?.content), args: {} }] },
    ]);
    const clock = new ManualClock(1_000);
    const timers = new ManualTimers(clock);
    const registry = createRegistry(createAgent({ model, tools: [sign, archive] }));
    const edge = await openSession({
      id: "b",
      storage: memoryStorage(),
      registry,
      host: "edge",
      clock,
      timers,
    });
    await edge.resume();
    const sub = await edge.submit({ requestId: "r1", conversationId: "b", input: "sign" });
    await settle();
    const [offered] = edge.pending();
    expect(offered?.key).toMatch(/^run-on:/);
    await edge.signal(
      offered?.key as string,
      { host: "browser", executor: "tab-dead", leaseMs: 5_000 },
      { requestId: "acc" },
    );
    await settle();
    const [taken] = edge.pending();
    expect(taken?.key).toMatch(/^done:/);
    // The tab signs, then dies before it reports.
    signed.push(String((taken?.about as { operationId?: string } | undefined)?.operationId));
    // Another call of the same exclusive group runs here meanwhile.
    const other = await edge.submit({ requestId: "r2", conversationId: "x", input: "archive" });
    await settle();
    timers.advance(5_001); // the lease ends: the call goes back to execute, queued behind archive
    await settle();
    const call = edge
      .view()
      .tasks.find((t) => t.kind === "agent.tool" && (t.input as { name: string }).name === "sign");
    expect(call?.state.status).toBe("pending");
    await edge.cancelSubmission(sub.id, "stop");
    expect((await edge.wait(sub.id)).status).toBe("cancelled");
    held.open();
    await edge.wait(other.id);
    expect(signed).toHaveLength(1); // it did take effect
    expect(answers(edge, "b")).toEqual([
      [expect.any(String), "unknown", expect.stringContaining("may have taken effect")],
    ]);
    await edge.close();
  });

  it("a call cancelled before the commit that queued it for its exclusive key (it never ran) is not-run", async () => {
    const { ran, held, agent } = exclusiveCharges();
    const registry = createRegistry(agent);
    let onSpawn: (() => void) | undefined;
    class Spy extends ForwardingStorage {
      override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
        const spawned = commits.some((c) =>
          c.tasks.some(
            (t) =>
              t.kind === "agent.tool" &&
              t.createdVersion === c.version &&
              (t.input as { args: string }).args === '{"n":2}',
          ),
        );
        if (spawned && onSpawn) {
          const go = onSpawn;
          onSpawn = undefined;
          go(); // the person presses stop while the model's answer is being stored
          await settle(); // the cancel is queued behind this commit
        }
        await super.commit(guard, commits);
      }
    }
    const session = await openSession({ id: "a", storage: new Spy(memoryStorage()), registry });
    await session.resume();
    const first = await session.submit({ requestId: "r1", conversationId: "c1", input: "1" });
    await expect.poll(() => ran).toEqual([1]);
    let cancelled: Promise<unknown> | undefined;
    onSpawn = () => {
      cancelled = session.cancelSubmission(second.id, "not needed");
    };
    const second = await session.submit({ requestId: "r2", conversationId: "c2", input: "2" });
    expect((await session.wait(second.id)).status).toBe("cancelled");
    await cancelled;
    held.open();
    await session.wait(first.id);
    expect(ran).toEqual([1]);
    expect(answers(session, "c2")).toEqual([
      [
        expect.any(String),
        "not-run",
        "the tool call ended without a result: cancelled before it ran (not needed)",
      ],
    ]);
    await session.close();
  });

  it("an unsafe call cancelled while the effect gate held it (the tool never ran) is not-run, by the call itself", async () => {
    let executed = 0;
    let gated = 0;
    const send = defineTool({
      name: "send",
      description: "send",
      input: z.object({}),
      replay: "unsafe",
      execute: () => {
        executed++;
        return { sent: true };
      },
    });
    const model = scriptedModel([{ toolCalls: [{ name: "send", args: {} }] }, { text: "done" }]);
    const registry = createRegistry(createAgent({ model, tools: [send] }));
    const session = await openSession({
      id: "d",
      storage: memoryStorage(),
      registry,
      // A linked browser session's gate: waits for its edge's acknowledgement, rejects when the phase aborts.
      effectGate: (_version, signal) =>
        new Promise((_resolve, reject) => {
          gated++;
          signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        }),
    });
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "c", input: "send" });
    await expect.poll(() => gated).toBe(1);
    await session.cancelSubmission(sub.id, "stop");
    expect((await session.wait(sub.id)).status).toBe("cancelled");
    expect(executed).toBe(0);
    expect(answers(session, "c")).toEqual([
      [
        expect.any(String),
        "not-run",
        "the tool call was cancelled before it ran (it was waiting until it was safe to start)",
      ],
    ]);
    await session.close();
  });

  it("a turn that stops at maxRounds with calls in its last response answers them not-run; the next turn reads that", async () => {
    const ran: number[] = [];
    const step = defineTool({
      name: "step",
      description: "step",
      input: z.object({ n: z.number() }),
      replay: "unsafe",
      execute: ({ n }) => {
        ran.push(n);
        return { n };
      },
    });
    const requests: ModelRequest[] = [];
    const model = scriptedModel([
      (request) => {
        requests.push(request);
        return request.messages.at(-1)?.content === "again"
          ? { text: "stopped" }
          : { toolCalls: [{ name: "step", args: { n: requests.length } }] };
      },
    ]);
    const session = await openWith(createAgent({ model, tools: [step], maxRounds: 2 }));
    const first = await session.submit({ requestId: "r1", conversationId: "c", input: "go" });
    expect(await session.wait(first.id)).toMatchObject({
      status: "failed",
      error: { message: "stopped after 2 model rounds without a final answer" },
    });
    expect(ran).toEqual([1]); // round 1's call ran; round 2's never started
    const why = "not run: the turn stopped after 2 model rounds without a final answer";
    expect(answers(session)).toEqual([
      ["call_0_0", "ok", undefined],
      ["call_1_0", "not-run", why],
    ]);
    const next = await session.submit({ requestId: "r2", conversationId: "c", input: "again" });
    expect((await session.wait(next.id)).status).toBe("succeeded");
    const told = requests.at(-1)?.messages.find((m) => m.role === "tool" && m.toolCallId === "call_1_0");
    expect(told?.role === "tool" && JSON.parse(told.content)).toEqual({
      outcome: "not-run",
      output: { error: why },
    });
  });

  it("a turn that fails with calls still queued answers them not-run with its error; the next turn reads that", async () => {
    const ran: string[] = [];
    const tool = (name: string, precheck?: Precheck) =>
      bareTool(
        name,
        "unsafe",
        () => {
          ran.push(name);
          return { ok: true };
        },
        precheck,
      );
    // Its arguments are checked when its turn comes, after "first" ran, and the check throws.
    const second = brokenTool("second", "balance service unavailable");
    const requests: ModelRequest[] = [];
    const model = scriptedModel([
      (request) => {
        requests.push(request);
        return request.messages.at(-1)?.content === "again"
          ? { text: "done" }
          : {
              toolCalls: [
                { name: "first", args: {} },
                { name: "second", args: {} },
                { name: "first", args: {} },
              ],
            };
      },
    ]);
    const agent = createAgent({ model, tools: [tool("first"), second], toolCalls: "sequential" });
    const session = await openWith(agent);
    const turn = await session.submit({ requestId: "r1", conversationId: "c", input: "go" });
    expect(await session.wait(turn.id)).toMatchObject({
      status: "failed",
      error: { message: "balance service unavailable" },
    });
    expect(ran).toEqual(["first"]); // the calls after it never started
    const why = "not run: the turn failed first (balance service unavailable)";
    expect(answers(session)).toEqual([
      ["call_0_0", "ok", undefined],
      ["call_0_1", "not-run", why],
      ["call_0_2", "not-run", why],
    ]);
    const next = await session.submit({ requestId: "r2", conversationId: "c", input: "again" });
    expect((await session.wait(next.id)).status).toBe("succeeded");
    const told = requests
      .at(-1)
      ?.messages.filter((m) => m.role === "tool")
      .map((m) => JSON.parse(m.content));
    expect(told).toEqual([
      { outcome: "ok", output: { ok: true } },
      { outcome: "not-run", output: { error: why } },
      { outcome: "not-run", output: { error: why } },
    ]);
    await session.close();
  });

  it("a failed turn's answers carry its error cut to 500 characters, never inside a surrogate pair", async () => {
    // 499 characters, then an emoji across the cut (a surrogate pair), then more.
    const message = `${"x".repeat(499)}😀${"y".repeat(300)}`;
    const failing = brokenTool("second", message);
    const calls = [
      { name: "first", args: {} },
      ...Array.from({ length: 20 }, () => ({ name: "second", args: {} })),
    ];
    const model = scriptedModel([{ toolCalls: calls }]);
    const session = await openWith(
      createAgent({
        model,
        tools: [bareTool("first", "safe", () => ({})), failing],
        toolCalls: "sequential",
      }),
    );
    const turn = await session.submit({ requestId: "r1", conversationId: "c", input: "go" });
    expect(await session.wait(turn.id)).toMatchObject({ status: "failed", error: { message } });
    const why = `not run: the turn failed first (${"x".repeat(499)}…)`;
    const stored = answers(session);
    expect(stored).toHaveLength(21);
    expect(stored.slice(1)).toEqual(calls.slice(1).map((_, i) => [`call_0_${i + 1}`, "not-run", why]));
    await session.close();
  });
});
