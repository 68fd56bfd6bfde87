/**
 * Tool calls that must not overlap: an exclusive tool's (or group's) calls of one model response run one
 * after another, in the model's order, while other calls run alongside; a sequential agent runs every call
 * one at a time. The calls still to start live in the turn's checkpoint: a process killed after or before
 * any commit (`simulateCrashes`, from `durable-agent/testing`) leaves a run that finishes with each call
 * answered once, in order, never two of a group at once.
 */

import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createAgent,
  createRegistry,
  defineTool,
  memoryStorage,
  openSession,
  scriptedModel,
  type ToolDefinition,
} from "../../src/index.ts";
import { simulateCrashes } from "../../src/testing/index.ts";
import { KillableStorage } from "../support/storage-wrappers.ts";

/** Tools that log when each call starts and ends, and take a few macrotasks to finish. */
function loggingTools(exclusive: Record<string, boolean | string | undefined>, log: string[] = []) {
  const tools = Object.entries(exclusive).map(([name, group]) =>
    defineTool({
      name,
      description: name,
      input: z.object({ n: z.number() }),
      replay: "safe",
      ...(group !== undefined && { exclusive: group }),
      execute: async ({ n }) => {
        log.push(`start ${name}${n}`);
        for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
        log.push(`end ${name}${n}`);
        return { n };
      },
    }),
  );
  return { log, tools: tools as ToolDefinition<unknown>[] };
}

const calls = (...names: string[]) =>
  scriptedModel([
    { toolCalls: names.map((name, n) => ({ name: name.replace(/\d+$/, ""), args: { n } })) },
    // An async turn: the final answer lists the results in the order the model received them.
    async (request) => ({
      text: request.messages
        .filter((m) => m.role === "tool")
        .map((m) => (m.role === "tool" ? m.toolName : ""))
        .join(","),
    }),
  ]);

async function run(options: {
  exclusive: Record<string, boolean | string | undefined>;
  names: string[];
  sequential?: boolean;
}) {
  const { log, tools } = loggingTools(options.exclusive);
  const registry = () =>
    createRegistry({
      ...createAgent({
        model: calls(...options.names),
        tools,
        ...(options.sequential && { toolCalls: "sequential" as const }),
      }),
    });
  const session = await openSession({ id: "q", storage: memoryStorage(), registry: registry() });
  await session.resume();
  const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
  const done = await session.wait(sub.id);
  const text = (done.result as { text?: string } | undefined)?.text ?? "";
  const results =
    session.view().conversations[0]?.entries.filter((e) => e.content.kind === "tool-result") ?? [];
  await session.close();
  return { log, status: done.status, text, results };
}

/** The calls running at once, at their busiest, among those named. */
function overlap(log: readonly string[], names: readonly string[]): number {
  let running = 0;
  let most = 0;
  for (const line of log) {
    const [what, call] = line.split(" ");
    if (!names.some((name) => call?.startsWith(name))) continue;
    running += what === "start" ? 1 : -1;
    most = Math.max(most, running);
  }
  return most;
}

describe("exclusive and sequential tool calls", () => {
  it("runs a response's calls in parallel by default", async () => {
    const { log, status } = await run({ exclusive: { a: undefined }, names: ["a", "a", "a"] });
    expect(status).toBe("succeeded");
    expect(overlap(log, ["a"])).toBe(3);
  });

  it("runs an exclusive group's calls one after another, in order, alongside the others", async () => {
    const { log, status, text } = await run({
      exclusive: { read: "files", write: "files", fetch: undefined },
      names: ["write", "fetch", "read", "write"],
    });
    expect(status).toBe("succeeded");
    expect(overlap(log, ["read", "write"])).toBe(1);
    const files = log.filter((line) => /(read|write)/.test(line));
    expect(files).toEqual([
      "start write0",
      "end write0",
      "start read2",
      "end read2",
      "start write3",
      "end write3",
    ]);
    // The unrelated call ran while the group's first did.
    expect(log.indexOf("start fetch1")).toBeLessThan(log.indexOf("end write0"));
    expect(text.split(",").sort()).toEqual(["fetch", "read", "write", "write"]);
  });

  it("runs every call one at a time in a sequential agent", async () => {
    const { log, status } = await run({
      exclusive: { a: undefined, b: undefined },
      names: ["a", "b", "a"],
      sequential: true,
    });
    expect(status).toBe("succeeded");
    expect(log).toEqual(["start a0", "end a0", "start b1", "end b1", "start a2", "end a2"]);
  });

  it("killed after or before any commit (durable-agent/testing), still answers each call once, in order, one at a time", async () => {
    const report = await simulateCrashes(
      {
        world: () => ({ log: [] as string[] }),
        registry: (world) =>
          createRegistry({
            ...createAgent({
              model: calls("a", "a", "a"),
              tools: loggingTools({ a: true }, world.log).tools,
            }),
          }),
        drive: async (session) => [
          await session.submit({ requestId: "r", conversationId: "c", input: "go" }),
        ],
        check: (world, session) => {
          // Never two at once, whatever the dead processes had started (each winds down before the next).
          expect(overlap(world.log, ["a"])).toBe(1);
          // One result per call, in the model's order.
          const results = session.view().conversations[0]?.entries ?? [];
          expect(
            results.flatMap((e) => (e.content.kind === "tool-result" ? [e.content.toolCallId] : [])),
          ).toEqual(["call_0_0", "call_0_1", "call_0_2"]);
        },
      },
      { seeds: 10 },
    );
    expect(report.commits).toBeGreaterThan(5);
    expect(report.runs).toBe(2 * report.commits + 10);
    expect(report.failures).toEqual([]);
  });

  it("a turn cancelled while a sequential agent's first call runs answers the calls still queued as never run", async () => {
    let release: () => void = () => undefined;
    const ran: number[] = [];
    const slow = defineTool({
      name: "slow",
      description: "slow",
      input: z.object({ n: z.number() }),
      replay: "unsafe",
      execute: async ({ n }, { signal }) => {
        ran.push(n);
        await new Promise<void>((resolve, reject) => {
          release = resolve;
          signal.addEventListener("abort", () => reject(signal.reason));
        });
        return { n };
      },
    });
    const agent = createAgent({
      model: calls("slow0", "slow1", "slow2"),
      tools: [slow],
      toolCalls: "sequential",
    });
    const session = await openSession({
      id: "q",
      storage: memoryStorage(),
      registry: createRegistry({ ...agent }),
    });
    await session.resume();
    const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
    await expect.poll(() => ran).toEqual([0]);
    await session.cancelSubmission(sub.id, "stop");
    expect((await session.wait(sub.id)).status).toBe("cancelled");
    release();
    const answers = (session.view().conversations[0]?.entries ?? [])
      .filter((e) => e.content.kind === "tool-result")
      .map((e) =>
        e.content.kind === "tool-result"
          ? [e.content.outcome, (e.content.output as { error: string }).error]
          : [],
      );
    expect(answers).toEqual([
      // The running call may have acted (unsafe): unknown. The two behind it never started.
      ["unknown", expect.stringContaining("cancelled while it ran (stop); it may have taken effect")],
      ["not-run", "the tool call ended without a result: cancelled before it ran (stop)"],
      ["not-run", "the tool call ended without a result: cancelled before it ran (stop)"],
    ]);
    expect(ran).toEqual([0]);
    await session.close();
  });

  it("a call cancelled while it waits for its exclusive key ends cancelled, and its tool never runs", async () => {
    const ran: number[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const charge = defineTool({
      name: "charge",
      description: "Charges a card",
      input: z.object({ n: z.number() }),
      replay: "safe",
      exclusive: true,
      execute: async ({ n }) => {
        if (n === 1) await held;
        ran.push(n);
        return { n };
      },
    });
    const model = scriptedModel([
      (request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: "charged" }
          : { toolCalls: [{ name: "charge", args: { n: Number(request.messages.at(-1)?.content) } }] },
    ]);
    const session = await openSession({
      id: "cancel-queued",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: [charge] }) }),
    });
    await session.resume();
    const first = await session.submit({ requestId: "r1", conversationId: "c1", input: "1" });
    const second = await session.submit({ requestId: "r2", conversationId: "c2", input: "2" });
    const call = (n: number) =>
      session
        .view()
        .tasks.find((t) => t.kind === "agent.tool" && (t.input as { args?: string }).args === `{"n":${n}}`);
    await expect.poll(() => call(2)?.state.status).toBe("pending");
    await session.cancelSubmission(second.id, "not needed");
    expect((await session.wait(second.id)).status).toBe("cancelled");
    expect(call(2)?.state.status).toBe("cancelled");
    release();
    expect((await session.wait(first.id)).status).toBe("succeeded");
    await session.whenIdle();
    expect(ran).toEqual([1]);
    await session.close();
  });

  it("a call queued behind another conversation's exclusive call is stored as not started: after a crash it runs plainly, not as cut off", async () => {
    const disk = memoryStorage();
    const world = { charged: [] as number[], confirmed: [] as number[], release: () => {} };
    const held = new Promise<void>((resolve) => {
      world.release = resolve;
    });
    const registry = (holdFirst: boolean) => {
      const charge = defineTool({
        name: "charge",
        description: "Charges a card",
        input: z.object({ n: z.number() }),
        replay: "unsafe",
        exclusive: true,
        confirm: (_id, { n }) => {
          world.confirmed.push(n);
          return world.charged.includes(n) ? { n } : undefined;
        },
        execute: async ({ n }) => {
          if (holdFirst) await held; // the first process dies while this call runs
          world.charged.push(n);
          return { n };
        },
      });
      const model = scriptedModel([
        (request) =>
          request.messages.at(-1)?.role === "tool"
            ? { text: "charged" }
            : { toolCalls: [{ name: "charge", args: { n: Number(request.messages.at(-1)?.content) } }] },
      ]);
      return createRegistry({ ...createAgent({ model, tools: [charge] }) });
    };
    const first = new KillableStorage(disk.reopen());
    const a = await openSession({ id: "queued", storage: first, registry: registry(true) });
    await a.resume();
    await a.submit({ requestId: "r1", conversationId: "c1", input: "1" });
    await a.submit({ requestId: "r2", conversationId: "c2", input: "2" });
    // One call runs (holding the key); the other is stored as queued, its phase never started.
    const callOf = (session: typeof a, n: number) =>
      session
        .view()
        .tasks.find((t) => t.kind === "agent.tool" && (t.input as { args?: string }).args === `{"n":${n}}`);
    await expect
      .poll(() => [callOf(a, 1)?.state.status, callOf(a, 2)?.state.status].sort())
      .toEqual(["pending", "running"]);
    const runningFirst = callOf(a, 1)?.state.status === "running" ? 1 : 2;
    const queuedCall = 3 - runningFirst;
    first.kill(); // the process dies: the running call was cut off, the queued one never started
    world.release();
    await a.whenIdle().catch(() => undefined);
    await a.close().catch(() => undefined);

    const b = await openSession({ id: "queued", storage: disk.reopen(), registry: registry(false) });
    await b.resume();
    for (const s of b.view().submissions) expect((await b.wait(s.id)).status).toBe("succeeded");
    const queued = callOf(b, queuedCall);
    expect(queued?.restarts).toBe(0);
    expect((queued?.state as { result?: { via?: string } } | undefined)?.result?.via).toBe("run");
    const cut = callOf(b, runningFirst);
    expect((cut?.state as { result?: { via?: string } } | undefined)?.result?.via).toMatch(/confirm/);
    // Only the call that had started is asked about; each charge happened once.
    expect(world.confirmed).toEqual([runningFirst]);
    expect([...world.charged].sort()).toEqual([1, 2]);
    await b.close();
  });

  it("a call cut off by a crash and then queued behind an older call still counts as cut off: it is confirmed, not run plainly", async () => {
    const disk = memoryStorage();
    const world = { charged: [] as string[], confirmed: [] as string[], release: () => {} };
    const held = new Promise<void>((resolve) => {
      world.release = resolve;
    });
    const registry = (holdCharge: boolean) => {
      const tools = [
        // An older call that first waits for a person, then needs the same card as the other one.
        defineTool({
          name: "refund",
          description: "Refunds the card",
          input: z.object({}),
          replay: "unsafe",
          exclusive: "card",
          approval: true,
          confirm: () => undefined,
          execute: () => {
            world.charged.push("refund");
            return { refunded: true };
          },
        }),
        defineTool({
          name: "charge",
          description: "Charges the card",
          input: z.object({}),
          replay: "unsafe",
          exclusive: "card",
          confirm: () => {
            world.confirmed.push("charge");
            return world.charged.includes("charge") ? { charged: true } : undefined;
          },
          execute: async () => {
            if (holdCharge) await held; // the first process dies while this call runs
            world.charged.push("charge");
            return { charged: true };
          },
        }),
      ];
      const model = scriptedModel([
        (request) =>
          request.messages.at(-1)?.role === "tool"
            ? { text: "done" }
            : { toolCalls: [{ name: String(request.messages.at(-1)?.content), args: {} }] },
      ]);
      return createRegistry({ ...createAgent({ model, tools }) });
    };
    const first = new KillableStorage(disk.reopen());
    const a = await openSession({ id: "order", storage: first, registry: registry(true) });
    await a.resume();
    await a.submit({ requestId: "r1", conversationId: "c1", input: "refund" });
    await expect.poll(() => a.pending().length).toBe(1); // the refund waits for its approval
    await a.submit({ requestId: "r2", conversationId: "c2", input: "charge" });
    const task = (session: typeof a, name: string) =>
      session.view().tasks.find((t) => (t.input as { name?: string }).name === name);
    await expect.poll(() => task(a, "charge")?.state.status).toBe("running");
    await a.signal(a.pending()[0]?.key as string, { approved: true }, { requestId: "ok" });
    await expect.poll(() => task(a, "refund")?.state.status).toBe("pending"); // queued behind the charge
    first.kill(); // dies while the charge runs
    world.release();
    await a.whenIdle().catch(() => undefined);
    await a.close().catch(() => undefined);

    const b = await openSession({ id: "order", storage: disk.reopen(), registry: registry(false) });
    await b.resume();
    for (const s of b.view().submissions) expect((await b.wait(s.id)).status).toBe("succeeded");
    // The older refund took the key first; the charge, cut off before, waited and was confirmed first.
    expect(world.confirmed).toEqual(["charge"]);
    const charge = task(b, "charge");
    expect((charge?.state as { result?: { via?: string } } | undefined)?.result?.via).toBe("confirm");
    expect(world.charged.sort()).toEqual(["charge", "refund"]);
    await b.close();
  });

  it("never runs an exclusive tool's calls at once across conversations running at the same time", async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    const write = defineTool({
      name: "write_file",
      description: "Writes the shared file",
      input: z.object({ n: z.number() }),
      replay: "safe",
      exclusive: true,
      execute: async ({ n }) => {
        running += 1;
        most = Math.max(most, running);
        for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
        running -= 1;
        done.push(n);
        return { n };
      },
    });
    const model = scriptedModel([
      (request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: "written" }
          : {
              toolCalls: [{ name: "write_file", args: { n: Number(request.messages.at(-1)?.content ?? 0) } }],
            },
    ]);
    const session = await openSession({
      id: "exclusive-across",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: [write] }) }),
    });
    await session.resume();
    // Three conversations at once: their turns run concurrently, each calling the tool once.
    const subs = await Promise.all(
      [1, 2, 3].map((n) => session.submit({ requestId: `r${n}`, conversationId: `c${n}`, input: String(n) })),
    );
    const ended = await Promise.all(subs.map((sub) => session.wait(sub.id)));
    expect(ended.map((s) => s.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    expect([...done].sort()).toEqual([1, 2, 3]);
    expect(most).toBe(1);
    await session.close();
  });
});
