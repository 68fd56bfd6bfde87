/**
 * The AI SDK UI transport over a real session: a message becomes a Submission (its id the requestId), the
 * chunks come from committed changes only — streamed text, the answer, tool calls and their results — and a
 * reconnect replays the run from its first commit, giving exactly the chunks a live reader got.
 */

import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type ChatChunk,
  chatMessages,
  chatTransport,
  createAgent,
  createRegistry,
  defineTool,
  memoryStorage,
  openSession,
  scriptedModel,
} from "../../src/index.ts";
import { sessionBackend } from "../support/plain-chat.ts";
import { readAll } from "../support/streams.ts";

async function weatherSession() {
  const weather = defineTool({
    name: "weather",
    description: "Weather in a city",
    input: z.object({ city: z.string() }),
    replay: "safe",
    execute: ({ city }) =>
      city === "Atlantis" ? Promise.reject(new Error("no such city")) : { city, celsius: 21 },
  });
  const model = scriptedModel(
    [
      {
        toolCalls: [
          { name: "weather", args: { city: "Lisbon" } },
          { name: "weather", args: { city: "Atlantis" } },
        ],
      },
      { text: "Lisbon is 21 °C; Atlantis could not be found." },
    ],
    { chunkSize: 6 },
  );
  const session = await openSession({
    id: "chat",
    storage: memoryStorage(),
    registry: createRegistry({ ...createAgent({ model, tools: [weather] }) }),
  });
  await session.resume();
  return session;
}

const userMessage = (id: string, text: string) => ({
  id,
  role: "user" as const,
  parts: [{ type: "text", text }],
});

/** The user's question as a fresh page (or a page reloaded and retrying) sends it. */
const sendWeatherQuestion = (transport: ReturnType<typeof chatTransport>) =>
  transport.sendMessages({
    trigger: "submit-message",
    chatId: "c1",
    messageId: undefined,
    messages: [userMessage("m1", "Weather in Lisbon and Atlantis?")],
    abortSignal: undefined,
  });

describe("chatTransport", () => {
  it("streams a run from its commits: text, tool calls, results and errors, then finish; a reconnect replays the same", async () => {
    const session = await weatherSession();
    const transport = chatTransport(sessionBackend(session));
    const live = await readAll(await sendWeatherQuestion(transport));
    const submission = await session.readSubmissionForRequest("m1");
    expect(submission?.status).toBe("succeeded");
    expect(live[0]).toEqual({ type: "start", messageId: `assistant:${submission?.id}` });
    expect(live.at(-1)).toEqual({ type: "finish" });
    const tools = live.filter((c) => c.type.startsWith("tool-"));
    expect(tools.map((c) => c.type)).toEqual([
      "tool-input-available",
      "tool-input-available",
      "tool-output-available",
      "tool-output-error",
    ]);
    expect(tools[2]).toMatchObject({ output: { city: "Lisbon", celsius: 21 } });
    expect(tools[3]).toMatchObject({ errorText: expect.stringContaining("no such city") });
    const text = live.flatMap((c) => (c.type === "text-delta" ? [c.delta] : [])).join("");
    expect(text).toBe("Lisbon is 21 °C; Atlantis could not be found.");
    // Every text part opened is closed, and only once.
    const opened = live.filter((c) => c.type === "text-start").map((c) => (c as { id: string }).id);
    const ended = live.filter((c) => c.type === "text-end").map((c) => (c as { id: string }).id);
    expect(ended).toEqual(opened);

    // The same message sent again (a reloaded page retrying) is the same run, not a second one.
    const again = await readAll(await sendWeatherQuestion(transport));
    expect(again).toEqual(live); // replayed from storage: what the live reader got, chunk for chunk
    expect(session.view().submissions).toHaveLength(1);
    // Nothing is running: there is no stream to resume.
    expect(await transport.reconnectToStream({ chatId: "c1" })).toBeNull();

    // The history as useChat's initial messages: the question, and the answer with its tool calls.
    const messages = chatMessages(session.view(), "c1");
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(messages[0]).toMatchObject({
      id: "m1",
      parts: [{ type: "text", text: "Weather in Lisbon and Atlantis?" }],
    });
    expect(messages[1]?.parts).toEqual([
      expect.objectContaining({ type: "dynamic-tool", toolName: "weather", state: "output-available" }),
      expect.objectContaining({ type: "dynamic-tool", toolName: "weather", state: "output-error" }),
      { type: "text", text: "Lisbon is 21 °C; Atlantis could not be found.", state: "done" },
    ]);
    await session.close();
  });

  it("resumes a run still going from its first commit", async () => {
    const session = await weatherSession();
    const transport = chatTransport(sessionBackend(session));
    const stream = await transport.sendMessages({
      trigger: "submit-message",
      chatId: "c2",
      messageId: undefined,
      messages: [userMessage("m2", "Weather?")],
      abortSignal: undefined,
    });
    // Before the run has ended, a second reader (a reloaded page) reconnects.
    const resumed = await transport.reconnectToStream({ chatId: "c2" });
    expect(resumed).not.toBeNull();
    const [first, second] = await Promise.all([
      readAll(stream),
      readAll(resumed as ReadableStream<ChatChunk>),
    ]);
    expect(second).toEqual(first);
    await session.close();
  });

  it("gives each run's entries to its own answer when a second message was queued behind the first", async () => {
    const session = await weatherSession();
    const first = await session.submit({ requestId: "q1", conversationId: "c3", input: "Weather?" });
    // Sent while the first runs: queued behind it, its user entry lands before the first's last entries.
    const second = await session.submit({ requestId: "q2", conversationId: "c3", input: "And now?" });
    await session.wait(first.id);
    await session.wait(second.id);
    const messages = chatMessages(session.view(), "c3");
    expect(messages.map((m) => `${m.role}:${m.id}`)).toEqual([
      "user:q1",
      `assistant:assistant:${first.id}`,
      "user:q2",
      `assistant:assistant:${second.id}`,
    ]);
    const tools = (m: (typeof messages)[number] | undefined) =>
      (m?.parts ?? []).filter((p) => (p as { type: string }).type === "dynamic-tool");
    expect(tools(messages[1])).toHaveLength(2);
    expect(tools(messages[3])).toHaveLength(0);
    await session.close();
  });
});
