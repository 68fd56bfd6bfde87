/** An AI SDK provider (the real @ai-sdk/openai-compatible, LanguageModelV3) adapted as our Model, over real HTTP. */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import {
  InvalidPromptError,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV3StreamPart,
  UnsupportedFunctionalityError,
} from "@ai-sdk/provider";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  aiSdkModel,
  createAgent,
  createRegistry,
  defineTool,
  ManualClock,
  ModelError,
  memoryStorage,
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
  const provider = createOpenAICompatible({
    name: "fixture",
    baseURL: fixture.url,
    apiKey: "sk-test",
    includeUsage: true,
  });
  return aiSdkModel(provider.chatModel("fixture-1"));
}

const request = { messages: [{ role: "user" as const, content: "hi" }], tools: [] };
const signal = new AbortController().signal;

describe("AI SDK LanguageModelV3 adapter", () => {
  it("streams text and reports usage through an AI SDK provider", async () => {
    const model = await modelFor([{ kind: "text", chunks: ["Hel", "lo"] }]);
    const deltas: string[] = [];
    const response = await model.generate(request, { signal, onText: (d) => deltas.push(d) });
    expect(model.id).toBe("fixture.chat:fixture-1");
    expect(deltas.join("")).toBe("Hello");
    expect(response).toMatchObject({
      text: "Hello",
      toolCalls: [],
      finishReason: "stop",
      usage: { inputTokens: 11, outputTokens: 7 },
    });
  });

  it("returns the provider's assembled tool calls", async () => {
    const model = await modelFor([
      { kind: "tools", calls: [{ id: "call_a", name: "lookup", args: ['{"email":', '"ana@example.com"}'] }] },
    ]);
    const response = await model.generate(
      {
        ...request,
        tools: [
          {
            name: "lookup",
            description: "Find",
            parameters: { type: "object", properties: { email: { type: "string" } } },
          },
        ],
      },
      { signal },
    );
    expect(response.toolCalls).toEqual([
      { id: "call_a", name: "lookup", args: '{"email":"ana@example.com"}' },
    ]);
    expect(fixture?.requests[0]?.body.tools).toMatchObject([
      { type: "function", function: { name: "lookup" } },
    ]);
  });

  it("maps a provider's 429 to a retryable ModelError with retry-after", async () => {
    const model = await modelFor([{ kind: "status", status: 429, retryAfter: 2 }]);
    const error = await model.generate(request, { signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true, status: 429, retryAfterMs: 2_000 });
  });

  it("does not retry a prompt the provider refuses before sending it", async () => {
    let streams = 0;
    // What @ai-sdk/google throws for a system message after the start: the same prompt always fails.
    const refusing = {
      specificationVersion: "v3",
      provider: "refusing",
      modelId: "refusing-1",
      supportedUrls: {},
      doGenerate: () => Promise.reject(new Error("unused")),
      doStream: () => {
        streams++;
        return Promise.reject(
          new UnsupportedFunctionalityError({
            functionality: "system messages are only supported at the beginning of the conversation",
          }),
        );
      },
    } satisfies LanguageModelV3;
    const model = aiSdkModel(refusing);
    const error = await model.generate(request, { signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: false });
    const invalid = aiSdkModel({
      ...refusing,
      doStream: () =>
        Promise.reject(new InvalidPromptError({ prompt: [], message: "messages must not be empty" })),
    });
    await expect(invalid.generate(request, { signal })).rejects.toMatchObject({ retryable: false });
    // Through the agent, the turn fails at once instead of asking again with backoff.
    const session = await openSession({
      id: "refused",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model }) }),
      clock: new ManualClock(0), // time stands still: a turn that backs off to retry never ends here
      ids: sequentialIds(),
    });
    await session.resume();
    streams = 0;
    await session.submit({ requestId: "r1", conversationId: "main", input: "hi" });
    await session.whenIdle();
    expect(session.view().submissions[0]).toMatchObject({ status: "failed" });
    expect(streams).toBe(1);
  });

  it("runs the agent loop unchanged on an AI SDK model", async () => {
    const model = await modelFor([
      { kind: "tools", calls: [{ id: "call_1", name: "lookup", args: ['{"email":"ana@example.com"}'] }] },
      { kind: "text", chunks: ["Ana is a customer."] },
    ]);
    const lookup = defineTool({
      name: "lookup",
      description: "Find a customer",
      input: z.object({ email: z.string().email() }),
      replay: "safe",
      execute: ({ email }) => ({ email, customer: true }),
    });
    const agent = createAgent({ model, tools: [lookup] });
    const session = await openSession({
      id: "ai-sdk",
      storage: memoryStorage(),
      registry: createRegistry({ ...agent }),
      ids: sequentialIds(),
    });
    await session.resume();
    const sub = await session.submit({
      requestId: "r1",
      conversationId: "main",
      input: "Is Ana a customer?",
    });
    expect(await session.wait(sub.id)).toMatchObject({
      status: "succeeded",
      result: { text: "Ana is a customer." },
    });
    // The second request carried the tool call and its result back to the provider in its own format.
    const messages = fixture?.requests[1]?.body.messages as { role: string }[];
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
  });
});

describe("AI SDK prompts", () => {
  it("send every earlier tool call's input as an object, even when the model's arguments were not one", async () => {
    // Anthropic and Bedrock refuse a tool call whose input is not an object ("Input should be a valid
    // dictionary"): a call the model got wrong, sent back as a string, would break every later request.
    const prompts: LanguageModelV3CallOptions["prompt"][] = [];
    const capturing = {
      specificationVersion: "v3",
      provider: "capturing",
      modelId: "capturing-1",
      supportedUrls: {},
      doGenerate: () => Promise.reject(new Error("unused")),
      doStream: async (options) => {
        prompts.push(options.prompt);
        return {
          stream: new ReadableStream<LanguageModelV3StreamPart>({
            start(controller) {
              controller.enqueue({ type: "text-delta", id: "t", delta: "ok" });
              controller.enqueue({
                type: "finish",
                finishReason: { unified: "stop", raw: "stop" },
                usage: {
                  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
                  outputTokens: { total: 1, text: 1, reasoning: undefined },
                },
              });
              controller.close();
            },
          }),
        };
      },
    } satisfies LanguageModelV3;
    const call = (id: string, args: string) => ({ id, name: "lookup", args });
    await aiSdkModel(capturing).generate(
      {
        tools: [],
        messages: [
          { role: "user", content: "hi" },
          {
            role: "assistant",
            content: "",
            toolCalls: [
              call("a", '{"email":"ana@example.com"'), // cut off: not JSON
              call("b", ""), // a call without arguments
              call("c", "[1, 2]"), // JSON, not an object
              call("d", '{"email":"ana@example.com"}'),
            ],
          },
          ...["a", "b", "c", "d"].map((id) => ({
            role: "tool" as const,
            toolCallId: id,
            toolName: "lookup",
            content: "{}",
          })),
        ],
      },
      { signal },
    );
    const assistant = prompts[0]?.find((m) => m.role === "assistant");
    const inputs = (assistant?.content ?? []).flatMap((part) =>
      part.type === "tool-call" ? [part.input] : [],
    );
    expect(inputs).toEqual([{}, {}, {}, { email: "ana@example.com" }]);
  });
});
