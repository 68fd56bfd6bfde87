import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type AgentOptions,
  buildMessages,
  createAgent,
  createRegistry,
  defineTool,
  type Entry,
  type Json,
  ManualClock,
  ManualTimers,
  type Model,
  ModelError,
  type ModelRequest,
  memoryStorage,
  openSession,
  type ScriptedTurn,
  type Session,
  scriptedModel,
  sequentialIds,
  TOOL_TASK,
  type TurnResult,
} from "../../src/index.ts";
import { deferred, KillableStorage } from "../support/storage-wrappers.ts";

/** A stand-in service with its own log, which survives the kernel's crashes. */
class Service {
  readonly log = new Map<string, Json>();
  calls = 0;
  run(operationId: string, value: Json): Json {
    this.calls++;
    if (!this.log.has(operationId)) this.log.set(operationId, value);
    return this.log.get(operationId) as Json;
  }
}

function tools(
  service: Service,
  options: { gate?: Promise<void>; confirm?: boolean; replay?: "safe" | "unsafe" } = {},
) {
  const lookup = defineTool({
    name: "lookup_customer",
    description: "Find a customer by email",
    input: z.object({ email: z.string().email() }),
    replay: "safe",
    execute: ({ email }) => ({ email, name: email.split("@")[0] ?? "" }),
  });
  const charge = defineTool({
    name: "charge_card",
    description: "Charge a card once",
    input: z.object({ amount: z.number().positive() }),
    replay: options.replay ?? "unsafe",
    ...(options.confirm && { confirm: (operationId: string) => service.log.get(operationId) }),
    execute: async ({ amount }, { operationId, reportProgress }) => {
      reportProgress({ stage: "authorising" });
      const receipt = service.run(operationId, { charged: amount });
      await options.gate;
      return receipt;
    },
  });
  return [lookup, charge];
}

const script: ScriptedTurn[] = [
  {
    text: "Let me look that up and charge.",
    toolCalls: [
      { name: "lookup_customer", args: { email: "ana@example.com" } },
      { name: "charge_card", args: { amount: 42 } },
    ],
  },
  { text: "Done: Ana was charged 42." },
];

async function open(
  storage: ReturnType<typeof memoryStorage> | KillableStorage,
  model: Model,
  toolList: AgentOptions["tools"] = [],
) {
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const agent = createAgent({ model, tools: toolList, backoffMs: 1_000 });
  const session = await openSession({
    id: "agent",
    storage,
    registry: createRegistry({ ...agent }),
    clock,
    timers,
    ids: sequentialIds(),
  });
  return { session, clock, timers };
}

/** A tool that returns a page of `chars` characters of HTML. */
function fetchPageTool(chars: number) {
  return defineTool({
    name: "fetch_page",
    description: "Fetch a web page",
    input: z.object({ url: z.string() }),
    replay: "safe",
    execute: ({ url }) => ({ url, html: "<p>".padEnd(chars, "x") }),
  });
}

const kinds = (entries: readonly Entry[]) => entries.map((e) => e.content.kind);

/** Each tool's call result, as its tool task ended (outcome, how it was obtained, output). */
function toolRuns(session: Session): Map<string, unknown> {
  const runs = new Map<string, unknown>();
  for (const task of session.view().tasks) {
    if (task.kind !== TOOL_TASK || task.state.status !== "succeeded") continue;
    runs.set((task.input as { name: string }).name, task.state.result);
  }
  return runs;
}

describe("agent loop", () => {
  it("runs a turn with parallel tool calls to a final answer, recording usage per call and in total", async () => {
    const service = new Service();
    const { session } = await open(memoryStorage(), scriptedModel(script), tools(service));
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "Charge Ana 42" });
    const done = await session.wait(sub.id);
    expect(done).toMatchObject({
      status: "succeeded",
      result: { text: "Done: Ana was charged 42.", round: 2 },
    });
    const entries = session.view().conversations[0]?.entries ?? [];
    expect(kinds(entries)).toEqual(["user", "model", "tool-result", "tool-result", "model"]);
    const results = entries.filter((e) => e.content.kind === "tool-result").map((e) => e.content);
    expect(results).toContainEqual(
      expect.objectContaining({ toolName: "charge_card", outcome: "ok", output: { charged: 42 } }),
    );
    // The turn's totals are in its result (no per-turn document outlives the turn).
    const usage = (done.result as unknown as TurnResult).usage;
    expect(usage).toMatchObject({ calls: 2, rounds: 2 });
    expect(session.view().documents).toEqual([]);
    // Per call on each model entry; the turn's totals are their sums.
    const perCall = entries.flatMap((e) =>
      e.content.kind === "model" && e.content.usage ? [e.content.usage] : [],
    );
    expect(perCall).toHaveLength(2);
    expect(usage.total.outputTokens).toBe(perCall.reduce((sum, u) => sum + u.outputTokens, 0));
    expect(usage.total.inputTokens).toBe(perCall.reduce((sum, u) => sum + u.inputTokens, 0));
    expect(usage.total.outputTokens).toBeGreaterThan(0);
    expect(service.calls).toBe(1);
  });

  it("turns invalid or unparsable arguments and unknown tools into error results the model sees", async () => {
    const service = new Service();
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "charge_card", args: { amount: -5 } },
          { name: "charge_card", args: "{not json" },
          { name: "delete_everything", args: {} },
        ],
      },
      (request) => ({ text: `saw ${request.messages.filter((m) => m.role === "tool").length} tool errors` }),
    ]);
    const { session } = await open(memoryStorage(), model, tools(service));
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "go" });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "saw 3 tool errors" },
    });
    const errors = (session.view().conversations[0]?.entries ?? [])
      .filter((e) => e.content.kind === "tool-result")
      .map((e) => (e.content.kind === "tool-result" ? (e.content.output as { error: string }).error : ""));
    expect(errors).toEqual([
      expect.stringContaining("amount: Too small"),
      expect.stringContaining("not valid JSON"),
      'unknown tool "delete_everything"',
    ]);
    expect(service.calls).toBe(0);
  });

  it("answers arguments holding a lone surrogate (an escaped half of an emoji) as an error the model sees, not a failed turn", async () => {
    const service = new Service();
    const ran: unknown[] = [];
    const note = defineTool({
      name: "note",
      description: "Keep a note",
      input: z.object({ text: z.string() }),
      replay: "unsafe",
      execute: (args) => {
        ran.push(args);
        return { kept: true };
      },
    });
    const model = scriptedModel([
      // Valid JSON: JSON.parse gives a string no store can hold (half of a surrogate pair).
      { toolCalls: [{ name: "note", args: '{"text":"smile \\ud83d"}' }] },
      (request) => ({ text: `saw ${request.messages.filter((m) => m.role === "tool").length} tool error` }),
    ]);
    const { session } = await open(memoryStorage(), model, [...tools(service), note]);
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "go" });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "saw 1 tool error" },
    });
    const [answer] = (session.view().conversations[0]?.entries ?? []).flatMap((e) =>
      e.content.kind === "tool-result" ? [e.content] : [],
    );
    expect(answer).toMatchObject({
      outcome: "error",
      toolName: "note",
      output: { error: expect.stringContaining("text: not well-formed Unicode") },
    });
    expect(ran).toEqual([]);
  });

  it("keeps a model's text and raw call arguments holding a lone surrogate as U+FFFD, not a failed turn", async () => {
    const service = new Service();
    const ran: unknown[] = [];
    const note = defineTool({
      name: "note",
      description: "Keep a note",
      input: z.object({ text: z.string() }),
      replay: "unsafe",
      execute: (args) => {
        ran.push(args);
        return { kept: true };
      },
    });
    // A custom model whose own output (not escaped JSON) holds half of an emoji, in its text and in a call.
    const model = scriptedModel([
      { text: "cut \ud83d here", toolCalls: [{ name: "note", args: '{"text":"smile \ud83d"}' }] },
      () => ({ text: "done \udc00" }),
    ]);
    const { session } = await open(memoryStorage(), model, [...tools(service), note]);
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "go" });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "done \ufffd" },
    });
    const said = (session.view().conversations[0]?.entries ?? []).flatMap((e) =>
      e.content.kind === "model" ? [e.content.text] : [],
    );
    expect(said).toEqual(["cut \ufffd here", "done \ufffd"]);
    expect(ran).toEqual([{ text: "smile \ufffd" }]);
  });

  it("answers a call whose precheck throws as rejected and not run; the model is asked once per response, all counted", async () => {
    const ran: string[] = [];
    let prechecks = 0;
    const transfer = defineTool({
      name: "transfer",
      description: "Move money",
      input: z.object({ amount: z.number() }),
      replay: "unsafe",
      // The limits database is unreachable for the first check only.
      precheck: async () => {
        prechecks += 1;
        if (prechecks === 1) throw new Error("limits DB unreachable");
        return undefined;
      },
      execute: ({ amount }) => {
        ran.push(`transfer ${amount}`);
        return { moved: amount };
      },
    });
    const notify = defineTool({
      name: "notify",
      description: "Tell the owner",
      input: z.object({}),
      replay: "safe",
      execute: () => {
        ran.push("notify");
        return { sent: true };
      },
    });
    const requests: ModelRequest[] = [];
    const model = scriptedModel([
      (request) => {
        requests.push(request);
        return {
          toolCalls: [
            { name: "transfer", args: { amount: 5 } },
            { name: "notify", args: {} },
          ],
        };
      },
      (request) => {
        requests.push(request);
        return { toolCalls: [{ name: "transfer", args: { amount: 5 } }] };
      },
      (request) => {
        requests.push(request);
        return { text: "Moved 5." };
      },
    ]);
    const session = await openSession({
      id: "precheck",
      storage: memoryStorage(),
      // No backoff: a model retry, were there one, would show here at once.
      registry: createRegistry({ ...createAgent({ model, tools: [transfer, notify], backoffMs: 0 }) }),
      ids: sequentialIds(),
    });
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "move 5" });
    const done = await session.wait(sub.id);
    expect(done).toMatchObject({ status: "succeeded", result: { text: "Moved 5." } });
    // The model was asked once for each of its three responses, and told the first transfer never ran.
    expect(requests).toHaveLength(3);
    const told = requests[1]?.messages.filter((m) => m.role === "tool").map((m) => JSON.parse(m.content));
    expect(told).toEqual([
      {
        outcome: "error",
        output: { error: "precheck failed: limits DB unreachable. transfer did not run." },
      },
      { outcome: "ok", output: { sent: true } },
    ]);
    expect(ran).toEqual(["notify", "transfer 5"]);
    const entries = session.view().conversations[0]?.entries ?? [];
    expect(kinds(entries)).toEqual([
      "user",
      "model",
      "tool-result",
      "tool-result",
      "model",
      "tool-result",
      "model",
    ]);
    const usage = (done.result as unknown as TurnResult).usage;
    expect(usage).toMatchObject({ calls: 3, rounds: 3 });
    const perCall = entries.flatMap((e) =>
      e.content.kind === "model" && e.content.usage ? [e.content.usage] : [],
    );
    expect(usage.total.inputTokens).toBe(perCall.reduce((sum, u) => sum + u.inputTokens, 0));
  });

  it("a queued sequential call whose precheck throws is answered so, and the calls after it still run", async () => {
    const ran: string[] = [];
    const step = (name: string, precheck?: () => Promise<string | undefined>) =>
      defineTool({
        name,
        description: name,
        input: z.object({}),
        replay: "safe",
        ...(precheck && { precheck }),
        execute: () => {
          ran.push(name);
          return { done: name };
        },
      });
    const check = step("check", async () => {
      throw new Error("balance service unavailable");
    });
    const requests: ModelRequest[] = [];
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "first", args: {} },
          { name: "check", args: {} },
          { name: "last", args: {} },
        ],
      },
      (request) => {
        requests.push(request);
        return { text: "two of three ran" };
      },
    ]);
    const session = await openSession({
      id: "sequential",
      storage: memoryStorage(),
      registry: createRegistry({
        ...createAgent({ model, tools: [step("first"), check, step("last")], toolCalls: "sequential" }),
      }),
      ids: sequentialIds(),
    });
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "go" });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "two of three ran" },
    });
    expect(ran).toEqual(["first", "last"]);
    const told = requests[0]?.messages.filter((m) => m.role === "tool").map((m) => JSON.parse(m.content));
    expect(told).toEqual([
      { outcome: "ok", output: { done: "first" } },
      {
        outcome: "error",
        output: { error: "precheck failed: balance service unavailable. check did not run." },
      },
      { outcome: "ok", output: { done: "last" } },
    ]);
  });

  it("answers a tool that throws something not an Error (undefined, null, a string) with an error result the model sees", async () => {
    const thrown = [undefined, null, "quota gone"];
    const throwing = (n: number) =>
      defineTool({
        name: `throws_${n}`,
        description: "fails oddly",
        input: z.object({}),
        replay: "safe",
        execute: () => {
          throw thrown[n];
        },
      });
    const requests: ModelRequest[] = [];
    const model = scriptedModel([
      { toolCalls: thrown.map((_, n) => ({ name: `throws_${n}`, args: {} })) },
      (request) => {
        requests.push(request);
        return { text: "all three failed" };
      },
    ]);
    const session = await openSession({
      id: "odd-throws",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: thrown.map((_, n) => throwing(n)) }) }),
      ids: sequentialIds(),
    });
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "go" });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "all three failed" },
    });
    const told = requests[0]?.messages.filter((m) => m.role === "tool").map((m) => JSON.parse(m.content));
    expect(told?.map((t: { outcome: string }) => t.outcome)).toEqual(["error", "error", "error"]);
    expect(JSON.stringify(told?.[2])).toContain("quota gone");
    const tasks = session
      .view()
      .tasks.filter((t) => (t.input as { name?: string }).name?.startsWith("throws_"));
    // Each stored as the run's error outcome (the task itself ended), each saying what was thrown.
    expect(tasks.map((t) => t.state.status === "succeeded" && t.state.result)).toMatchObject(
      ["undefined", "null", "quota gone"].map((error) => ({ outcome: "error", output: { error } })),
    );
  });

  it("keeps a large tool output once, in its result entry: the tool task's result records its size", async () => {
    const readFile = defineTool({
      name: "read_file",
      description: "Read a file",
      input: z.object({ path: z.string() }),
      replay: "safe",
      execute: ({ path }) => ({ path, text: "line\n".repeat(2_000) }),
    });
    const model = scriptedModel([
      { toolCalls: [{ name: "read_file", args: { path: "notes.txt" } }] },
      (request) => ({
        text: `read ${request.messages.find((m) => m.role === "tool")?.content.length ?? 0} chars`,
      }),
    ]);
    const { session } = await open(memoryStorage(), model, [readFile]);
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "read it" });
    const done = await session.wait(sub.id);
    const result = (session.view().conversations[0]?.entries ?? []).find(
      (e) => e.content.kind === "tool-result",
    );
    expect(result?.content).toMatchObject({
      outcome: "ok",
      output: { path: "notes.txt", text: "line\n".repeat(2_000) },
    });
    expect(done.result).toMatchObject({ text: expect.stringMatching(/^read 1\d{4} chars$/) });
    const tool = session.view().tasks.find((t) => t.kind === TOOL_TASK);
    const run = tool?.state.status === "succeeded" ? (tool.state.result as Record<string, unknown>) : {};
    expect(run).toMatchObject({
      outcome: "ok",
      via: "run",
      outputBytes: JSON.stringify(result?.content.kind === "tool-result" ? result.content.output : null)
        .length,
    });
    expect(run).not.toHaveProperty("output");
  });

  it("answers a tool call whose result is too large to store with an error the model sees; the session goes on", async () => {
    const service = new Service();
    const fetchPage = fetchPageTool(50_000);
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "fetch_page", args: { url: "https://example.com" } },
          { name: "lookup_customer", args: { email: "ana@example.com" } },
        ],
      },
      (request) => ({
        text: request.messages
          .filter((m) => m.role === "tool")
          .map((m) => `${m.toolName}: ${(JSON.parse(m.content) as { outcome: string }).outcome}`)
          .join(", "),
      }),
    ]);
    // A store that holds 20 kB a row, as a Durable Object's SQLite holds 2 MB.
    const { session } = await open(memoryStorage({ maxRowBytes: 20_000 }), model, [
      fetchPage,
      ...tools(service),
    ]);
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "read the page" });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "fetch_page: error, lookup_customer: ok" }, // each result right after its call, in call order
    });
    const results = (session.view().conversations[0]?.entries ?? []).flatMap((e) =>
      e.content.kind === "tool-result" ? [e.content] : [],
    );
    expect(results).toContainEqual(
      expect.objectContaining({
        toolName: "fetch_page",
        outcome: "error",
        output: {
          error: expect.stringMatching(
            /it ran, but what it returned is too large .*one row holds at most 20000/,
          ),
        },
      }),
    );
    const failed = session.view().tasks.find((t) => t.state.status === "failed");
    expect(failed?.state).toMatchObject({ error: { code: "record-too-large" } });
    expect(session.status).toBe("open");
    const next = await session.submit({ requestId: "r2", conversationId: "other", input: "again" });
    expect((await session.wait(next.id)).status).toBe("succeeded");
  });

  it("stores a tool result close to the store's row limit once: its entry's row, which the task and the change log name", async () => {
    const fetchPage = fetchPageTool(18_000);
    const model = scriptedModel([
      { toolCalls: [{ name: "fetch_page", args: { url: "https://example.com" } }] },
      { text: "read it" },
    ]);
    // 18 kB of output in a store that holds 20 kB a row: it fits only if no row holds it twice.
    const html = "<p>".padEnd(18_000, "x");
    const holding: string[] = [];
    const disk = memoryStorage({
      maxRowBytes: 20_000,
      onWrite: (row) => {
        if (row.op !== "delete" && JSON.stringify(row.value).includes(html)) holding.push(row.table);
      },
    });
    const { session } = await open(disk, model, [fetchPage]);
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "read the page" });
    expect(await session.wait(sub.id)).toMatchObject({ status: "succeeded", result: { text: "read it" } });
    const { session: reopened } = await open(disk.reopen(), model, [fetchPage]);
    const results = (reopened.view().conversations[0]?.entries ?? []).flatMap((e) =>
      e.content.kind === "tool-result" ? [e.content] : [],
    );
    expect(results).toEqual([
      expect.objectContaining({
        toolName: "fetch_page",
        outcome: "ok",
        output: { url: "https://example.com", html },
      }),
    ]);
    // Written once, in the entry's own row: not again in the task's row or the change log.
    expect(holding).toEqual(["entries"]);
  });

  it("after a crash mid-tool, never re-runs an unsafe tool blindly: the result is interrupted, with its progress", async () => {
    const service = new Service();
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    const gate = deferred();
    const a = await open(first, scriptedModel(script), tools(service, { gate: gate.promise }));
    await a.session.resume();
    const sub = await a.session.submit({ requestId: "r1", conversationId: "main", input: "Charge Ana 42" });
    await waitUntil(() => service.calls === 1);
    await new Promise((resolve) => setTimeout(resolve, 5)); // let the progress commit land
    first.kill();
    gate.resolve();

    const b = await open(disk.reopen(), scriptedModel(script), tools(service));
    await b.session.resume();
    expect(await b.session.wait(sub.id)).toMatchObject({ status: "succeeded" });
    const charge = b.session
      .view()
      .conversations[0]?.entries.find(
        (e) => e.content.kind === "tool-result" && e.content.toolName === "charge_card",
      );
    expect(charge?.content).toMatchObject({
      outcome: "interrupted",
      output: { partialOutput: { stage: "authorising" } },
    });
    expect(service.calls).toBe(1);
  });

  it("after a crash mid-tool, confirms an unsafe tool by operation id instead of re-running it", async () => {
    const service = new Service();
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    const gate = deferred();
    const a = await open(first, scriptedModel(script), tools(service, { gate: gate.promise, confirm: true }));
    await a.session.resume();
    const sub = await a.session.submit({ requestId: "r1", conversationId: "main", input: "Charge Ana 42" });
    await waitUntil(() => service.calls === 1);
    first.kill();
    gate.resolve();
    const b = await open(disk.reopen(), scriptedModel(script), tools(service, { confirm: true }));
    await b.session.resume();
    await b.session.wait(sub.id);
    expect(toolRuns(b.session).get("charge_card")).toMatchObject({
      outcome: "ok",
      via: "confirm",
      output: { charged: 42 },
    });
    expect(service.calls).toBe(1);
  });

  it("re-runs a safe tool after a crash", async () => {
    const service = new Service();
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    const gate = deferred();
    const a = await open(
      first,
      scriptedModel(script),
      tools(service, { gate: gate.promise, replay: "safe" }),
    );
    await a.session.resume();
    const sub = await a.session.submit({ requestId: "r1", conversationId: "main", input: "x" });
    await waitUntil(() => service.calls === 1);
    first.kill();
    gate.resolve();
    const b = await open(disk.reopen(), scriptedModel(script), tools(service, { replay: "safe" }));
    await b.session.resume();
    await b.session.wait(sub.id);
    const vias = b.session
      .view()
      .tasks.filter((t) => t.kind === TOOL_TASK && t.state.status === "succeeded")
      .map((t) => (t.state.status === "succeeded" ? (t.state.result as { via: string }).via : ""));
    expect(vias.sort()).toEqual(["replay", "run"]);
    expect(service.calls).toBe(2);
  });

  it("keeps text streamed before a crash as an interrupted entry that drives no tool call", async () => {
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    const stall = deferred();
    const streaming: Model = {
      id: "streaming",
      async generate(_request, { onText }) {
        onText?.("I will charge the ca");
        await stall.promise;
        return { text: "never", toolCalls: [{ id: "x", name: "charge_card", args: '{"amount":1}' }] };
      },
    };
    const service = new Service();
    const a = await open(first, streaming, tools(service));
    await a.session.resume();
    const sub = await a.session.submit({ requestId: "r1", conversationId: "main", input: "x" });
    await waitUntil(() => a.timers.size > 0); // the streamed text waits as deferred progress…
    a.timers.advance(50); // …until its flush timer fires
    await waitUntil(() => a.session.view().documents.some((d) => d.type === "model-stream"));
    first.kill();
    const b = await open(disk.reopen(), scriptedModel([{ text: "Recovered answer." }]), tools(service));
    await b.session.resume();
    expect(await b.session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "Recovered answer." },
    });
    const entries = b.session.view().conversations[0]?.entries ?? [];
    // The interruption is recorded with the re-asked attempt, before the answer that followed it.
    expect(kinds(entries)).toEqual(["user", "interrupted", "model"]);
    expect(entries[1]?.content).toMatchObject({
      kind: "interrupted",
      of: "model",
      partialText: "I will charge the ca",
    });
    expect(service.calls).toBe(0);
    stall.resolve();
  });

  it("retries retryable model errors with backoff kept in task state, honouring retry-after", async () => {
    let calls = 0;
    const flaky: Model = {
      id: "flaky",
      async generate() {
        calls++;
        if (calls === 1)
          throw new ModelError("rate limited", { retryable: true, retryAfterMs: 5_000, status: 429 });
        if (calls === 2) throw new ModelError("server error", { retryable: true, status: 500 });
        return { text: "finally", toolCalls: [] };
      },
    };
    const { session, timers } = await open(memoryStorage(), flaky, []);
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "x" });
    await session.whenIdle();
    expect(session.wakeInfo().nextWakeAt).toBe(5_000);
    timers.advance(5_000);
    await session.whenIdle();
    expect(session.wakeInfo().nextWakeAt).toBe(7_000); // 1 s base backoff doubled for the third attempt
    timers.advance(2_000);
    expect(await session.wait(sub.id)).toMatchObject({ status: "succeeded", result: { text: "finally" } });
    expect(calls).toBe(3);
  });

  it("keeps a conversation going on a provider that refuses system messages after the start, after a cut answer", async () => {
    let calls = 0;
    // Like @ai-sdk/google or Bedrock: a system message after the first other message is refused, for good.
    const strict: Model = {
      id: "strict",
      async generate({ messages }) {
        calls++;
        const opened = messages.findIndex((m) => m.role !== "system");
        if (opened >= 0 && messages.slice(opened).some((m) => m.role === "system"))
          throw new ModelError("system messages are only supported at the beginning", { retryable: false });
        if (calls === 1)
          throw new ModelError("the stream broke", {
            retryable: true,
            partialText: "Durable execution means",
          });
        return { text: `answer ${calls}`, toolCalls: [] };
      },
    };
    const { session, timers } = await open(memoryStorage(), strict, []);
    await session.resume();
    const first = await session.submit({ requestId: "r1", conversationId: "main", input: "What is it?" });
    await session.whenIdle();
    timers.advance(1_000); // the backoff before the second attempt
    expect(await session.wait(first.id)).toMatchObject({ status: "succeeded", result: { text: "answer 2" } });
    const next = await session.submit({ requestId: "r2", conversationId: "main", input: "One more?" });
    expect(await session.wait(next.id)).toMatchObject({ status: "succeeded", result: { text: "answer 3" } });
    const entries = session.view().conversations[0]?.entries ?? [];
    expect(kinds(entries)).toEqual(["user", "interrupted", "model", "user", "model"]);
  });

  it("rebuilds the same model context after reopening as the live run had", async () => {
    const service = new Service();
    const disk = memoryStorage();
    const seen: string[] = [];
    const recording = scriptedModel([
      (request) => {
        seen.push(JSON.stringify(request.messages));
        return script[0] as ScriptedTurn;
      },
      (request) => {
        seen.push(JSON.stringify(request.messages));
        return { text: "done" };
      },
    ]);
    const { session } = await open(disk, recording, tools(service));
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "Charge Ana 42" });
    await session.wait(sub.id);
    await session.close();
    const reopened = await openSession({ id: "agent", storage: disk.reopen(), mode: "read" });
    const entries = await reopened.readEntries("main", 0);
    const modelEntry = entries.findLastIndex((e) => e.content.kind === "model");
    expect(JSON.stringify(buildMessages(entries.slice(0, modelEntry)))).toBe(seen[1]);
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000 && !condition(); i++) await new Promise((resolve) => setImmediate(resolve));
  expect(condition()).toBe(true);
}

describe("agent loop: async handles and context", () => {
  it("stores an async response handle and polls it after a restart instead of asking again", async () => {
    const disk = memoryStorage();
    const first = new KillableStorage(disk.reopen());
    let starts = 0;
    let polls = 0;
    const background = (ready: boolean): Model => ({
      id: "background",
      generate: () => Promise.reject(new Error("use start/poll")),
      start: async () => {
        starts++;
        return { job: `job-${starts}` };
      },
      poll: async (handle) => {
        polls++;
        return ready ? { text: `answer from ${(handle as { job: string }).job}`, toolCalls: [] } : undefined;
      },
    });
    const a = await open(first, background(false), []);
    await a.session.resume();
    const sub = await a.session.submit({ requestId: "r1", conversationId: "main", input: "slow question" });
    await a.session.whenIdle();
    const generation = a.session.view().tasks[0];
    expect(generation?.state).toMatchObject({ status: "sleeping" });
    expect(generation?.checkpoint).toMatchObject({ phase: "poll", data: { handle: { job: "job-1" } } });
    first.kill();

    const b = await open(disk.reopen(), background(true), []);
    await b.session.resume();
    b.timers.advance(2_000);
    expect(await b.session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "answer from job-1" },
    });
    expect(starts).toBe(1);
    expect(polls).toBe(2);
  });

  it("starts the context at the latest summary marker and shows interrupted records as notes", () => {
    const entry = (seq: number, content: Entry["content"]): Entry => ({
      conversationId: "c",
      seq,
      version: seq + 1,
      at: 0,
      content,
    });
    const entries = [
      entry(0, { kind: "user", text: "old question" }),
      entry(1, { kind: "model", text: "old answer", toolCalls: [] }),
      entry(2, { kind: "summary", text: "they asked and we answered", coversThroughSeq: 1 }),
      entry(3, { kind: "user", text: "new question" }),
      entry(4, { kind: "interrupted", of: "model", partialText: "I was say", reason: "crash" }),
    ];
    const messages = buildMessages(entries, "be brief");
    // The note is a user-role message: a provider may refuse a system message after the start.
    expect(messages.map((m) => m.role)).toEqual(["system", "system", "user", "user"]);
    expect(JSON.stringify(messages)).not.toContain("old question");
    expect(messages[3]).toMatchObject({ content: expect.stringContaining('"I was say"') });
  });
});
