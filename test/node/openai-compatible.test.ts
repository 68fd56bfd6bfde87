/** The OpenAI-compatible adapter over real HTTP against a local server speaking the real wire format. */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createAgent,
  createRegistry,
  defineTool,
  ManualClock,
  ManualTimers,
  ModelError,
  memoryStorage,
  openAiCompatibleModel,
  openSession,
  sequentialIds,
} from "../../src/index.ts";
import { type Fixture, type FixtureReply, startOpenAiFixture } from "../support/openai-fixture.ts";

let fixture: Fixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

async function modelFor(replies: FixtureReply[]) {
  fixture = await startOpenAiFixture(replies);
  return openAiCompatibleModel({ baseUrl: fixture.url, apiKey: "sk-test", model: "fixture-1" });
}

const request = { messages: [{ role: "user" as const, content: "hi" }], tools: [] };
const signal = new AbortController().signal;

describe("OpenAI-compatible model over HTTP", () => {
  it("streams text chunks as they arrive and reports usage", async () => {
    const model = await modelFor([{ kind: "text", chunks: ["Hel", "lo, ", "world"] }]);
    const deltas: string[] = [];
    const response = await model.generate(request, { signal, onText: (d) => deltas.push(d) });
    expect(deltas).toEqual(["Hel", "lo, ", "world"]);
    expect(response).toMatchObject({
      text: "Hello, world",
      toolCalls: [],
      usage: { inputTokens: 11, outputTokens: 7 },
      finishReason: "stop",
    });
    expect(fixture?.requests[0]?.headers.authorization).toBe("Bearer sk-test");
    expect(fixture?.requests[0]?.body).toMatchObject({
      model: "fixture-1",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
  });

  it("reads a stream with CRLF line endings and keep-alive comments the same way", async () => {
    const model = await modelFor([{ kind: "text", chunks: ["Hel", "lo, ", "world"], crlf: true }]);
    const deltas: string[] = [];
    const response = await model.generate(request, { signal, onText: (d) => deltas.push(d) });
    expect(deltas).toEqual(["Hel", "lo, ", "world"]);
    expect(response).toMatchObject({ text: "Hello, world", finishReason: "stop" });
  });

  it("assembles tool calls from argument deltas split across chunks", async () => {
    const model = await modelFor([
      {
        kind: "tools",
        calls: [
          { id: "call_a", name: "lookup", args: ['{"em', 'ail":"ana@', 'example.com"}'] },
          { id: "call_b", name: "charge", args: ['{"amount":', "42}"] },
        ],
      },
    ]);
    const response = await model.generate(request, { signal });
    expect(response.toolCalls).toEqual([
      { id: "call_a", name: "lookup", args: '{"email":"ana@example.com"}' },
      { id: "call_b", name: "charge", args: '{"amount":42}' },
    ]);
    expect(response.finishReason).toBe("tool_calls");
  });

  it("keeps tool calls sent whole without an index (Gemini's endpoint) apart", async () => {
    const model = await modelFor([
      {
        kind: "tools",
        whole: true,
        calls: [
          { id: "function-call-1", name: "get_weather", args: ['{"city":"Oslo"}'] },
          { id: "function-call-2", name: "get_weather", args: ['{"city":"Rome"}'] },
        ],
      },
    ]);
    const response = await model.generate(request, { signal });
    expect(response.toolCalls).toEqual([
      { id: "function-call-1", name: "get_weather", args: '{"city":"Oslo"}' },
      { id: "function-call-2", name: "get_weather", args: '{"city":"Rome"}' },
    ]);
  });

  it("answers each call with its own result when the server sends calls without ids, round after round", async () => {
    const model = await modelFor([
      { kind: "tools", calls: [{ name: "get_balance", args: ['{"account":"checking"}'] }] },
      { kind: "tools", calls: [{ name: "get_balance", args: ['{"account":"savings"}'] }] },
      { kind: "text", chunks: ["Checking 100, savings 99999."] },
    ]);
    const balance = defineTool({
      name: "get_balance",
      description: "An account's balance",
      input: z.object({ account: z.string() }),
      replay: "safe",
      execute: ({ account }) => ({ account, balance: account === "checking" ? 100 : 99_999 }),
    });
    const session = await openSession({
      id: "ids",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: [balance] }) }),
      clock: new ManualClock(0),
      ids: sequentialIds(),
    });
    await session.resume();
    const sub = await session.submit({ requestId: "r1", conversationId: "main", input: "Balances?" });
    expect(await session.wait(sub.id)).toMatchObject({ status: "succeeded" });
    // The last request: each call the model made is followed by the result of that very call.
    const messages = fixture?.requests[2]?.body.messages as {
      role: string;
      content: string | null;
      tool_call_id?: string;
      tool_calls?: { id: string; function: { arguments: string } }[];
    }[];
    const asked = messages.filter((m) => m.role === "assistant").map((m) => m.tool_calls?.[0]);
    const answers = messages.filter((m) => m.role === "tool");
    expect(asked.map((call) => call?.function.arguments)).toEqual([
      '{"account":"checking"}',
      '{"account":"savings"}',
    ]);
    expect(new Set(asked.map((call) => call?.id)).size).toBe(2);
    expect(answers.map((m) => m.tool_call_id)).toEqual(asked.map((call) => call?.id));
    expect(answers.map((m) => JSON.parse(m.content ?? "null"))).toEqual([
      { outcome: "ok", output: { account: "checking", balance: 100 } },
      { outcome: "ok", output: { account: "savings", balance: 99_999 } },
    ]);
  });

  it("keeps the text of a stream cut mid-way as partial text on a retryable error", async () => {
    const model = await modelFor([{ kind: "cut", chunks: ["I will char", "ge the card"] }]);
    const error = await model.generate(request, { signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true, partialText: "I will charge the card" });
  });

  it("turns 429 into a retryable error carrying retry-after, and 500 into a retryable error", async () => {
    const model = await modelFor([
      { kind: "status", status: 429, retryAfter: 3 },
      { kind: "status", status: 500 },
    ]);
    await expect(model.generate(request, { signal })).rejects.toMatchObject({
      retryable: true,
      status: 429,
      retryAfterMs: 3_000,
    });
    await expect(model.generate(request, { signal })).rejects.toMatchObject({ retryable: true, status: 500 });
  });

  it("does not retry a 401", async () => {
    const model = await modelFor([{ kind: "status", status: 401 }]);
    await expect(model.generate(request, { signal })).rejects.toMatchObject({
      retryable: false,
      status: 401,
    });
  });

  it("drives the agent loop: 429, a cut stream, then tool calls and an answer, over real HTTP", async () => {
    const model = await modelFor([
      { kind: "status", status: 429, retryAfter: 1 },
      { kind: "cut", chunks: ["Checking"] },
      { kind: "tools", calls: [{ id: "call_1", name: "lookup", args: ['{"email":"ana@example.com"}'] }] },
      { kind: "text", chunks: ["Ana ", "is a customer."] },
    ]);
    const lookup = defineTool({
      name: "lookup",
      description: "Find a customer",
      input: z.object({ email: z.string().email() }),
      replay: "safe",
      execute: ({ email }) => ({ email, customer: true }),
    });
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const agent = createAgent({ model, tools: [lookup], backoffMs: 500 });
    const session = await openSession({
      id: "http",
      storage: memoryStorage(),
      registry: createRegistry({ ...agent }),
      clock,
      timers,
      ids: sequentialIds(),
    });
    await session.resume();
    const sub = await session.submit({
      requestId: "r1",
      conversationId: "main",
      input: "Is ana@example.com a customer?",
    });
    for (let i = 0; i < 10 && session.view().submissions[0]?.status === "running"; i++) {
      await session.whenIdle();
      const next = session.wakeInfo().nextWakeAt;
      if (next !== undefined) timers.advance(next - clock.now());
    }
    const done = await session.wait(sub.id);
    expect(done).toMatchObject({ status: "succeeded", result: { text: "Ana is a customer." } });
    const kinds = session.view().conversations[0]?.entries.map((e) => e.content.kind);
    expect(kinds).toEqual(["user", "interrupted", "model", "tool-result", "model"]);
    // The tool schema reached the endpoint as JSON Schema generated from zod.
    expect(fixture?.requests.at(-1)?.body.tools).toEqual([
      {
        type: "function",
        function: {
          name: "lookup",
          description: "Find a customer",
          parameters: expect.objectContaining({ type: "object", required: ["email"] }),
        },
      },
    ]);
  });
});
