/**
 * AI SDK UI at the edge: `chatTransport(edgeChatBackend(...))` against the shipped edge example on real
 * workerd. A message is a Submission over HTTP; its chunks come from the session's committed changes over
 * SSE — the campaign's tool calls and their results, the answer — and a second reader that reconnects gets
 * the same chunks; sending the same message again is the same run.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatTransport, EdgeRequestError, edgeChatBackend } from "../../src/index.ts";
import { readAll } from "../support/streams.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));

const message = {
  id: "chat-m1",
  role: "user" as const,
  parts: [{ type: "text", text: "Send the approved notice" }],
};

describe("chat transport over the edge API", () => {
  let edge: EdgeExample;
  beforeAll(async () => {
    edge = await EdgeExample.start(script);
  }, 60_000);
  afterAll(async () => {
    await edge?.workerd.dispose();
  });

  it("streams a run from the Durable Object's commits, and the same message again is the same run", async () => {
    const backend = edgeChatBackend({ baseUrl: edge.url, token: EdgeExample.token, sessionId: "chat-1" });
    const transport = chatTransport(backend);
    const send = () =>
      transport.sendMessages({
        trigger: "submit-message",
        chatId: "main",
        messageId: undefined,
        messages: [message],
        abortSignal: undefined,
      });
    const live = await readAll(await send());
    expect(live[0]).toMatchObject({ type: "start" });
    expect(live.at(-1)).toEqual({ type: "finish" });
    const inputs = live.filter((c) => c.type === "tool-input-available");
    const outputs = live.filter((c) => c.type === "tool-output-available");
    expect(inputs.length).toBeGreaterThan(0);
    expect(outputs.map((c) => (c as { toolCallId: string }).toolCallId)).toEqual(
      inputs.map((c) => (c as { toolCallId: string }).toolCallId),
    );
    const text = live.flatMap((c) => (c.type === "text-delta" ? [c.delta] : [])).join("");
    expect(text).toContain("5 of 5");
    // Sent again (a reload retrying): the same Submission, replayed chunk for chunk.
    expect(await readAll(await send())).toEqual(live);
    const submission = await backend.submissionForRequest("chat-m1");
    expect(submission?.status).toBe("succeeded");
    expect(await backend.submissionForRequest("never-sent")).toBeUndefined();
    // The mail went out once per recipient.
    const deliveries = await edge.json<{ to: string }[]>("/mail/deliveries");
    expect(new Set(deliveries.map((d) => d.to)).size).toBe(deliveries.length);
  }, 60_000);

  it("refuses a bad token with a typed error, writing nothing", async () => {
    const backend = edgeChatBackend({ baseUrl: edge.url, token: "wrong", sessionId: "chat-2" });
    const error = await chatTransport(backend)
      .sendMessages({
        trigger: "submit-message",
        chatId: "main",
        messageId: undefined,
        messages: [message],
        abortSignal: undefined,
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EdgeRequestError);
    expect((error as EdgeRequestError).status).toBe(401);
  });
});
