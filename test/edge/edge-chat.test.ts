/**
 * AI SDK UI at the edge: `chatTransport(edgeChatBackend(...))` against the shipped edge example on real
 * workerd. A message is a Submission over HTTP; its chunks come from the session's committed changes over
 * SSE — the campaign's tool calls and their results, the answer — and a second reader that reconnects gets
 * the same chunks; sending the same message again is the same run.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CommitRecord,
  chatTransport,
  EdgeRequestError,
  edgeChatBackend,
  followEdgeChanges,
  type Preview,
  type Submission,
} from "../../src/index.ts";
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

  it("sends the model's text as previews over SSE when asked (?previews=1), in order with the commits", async () => {
    const post = (requestId: string) =>
      edge.json<Submission>("/sessions/chat-previews/submissions?wait=20000", {
        body: { requestId, conversationId: "main", input: "Send the approved notice" },
      });
    const first = await post("p1"); // creates the session
    const events: ({ preview: Preview } | { change: CommitRecord })[] = [];
    const stop = followEdgeChanges({
      url: `${edge.url}/sessions/chat-previews/events`,
      headers: { authorization: `Bearer ${EdgeExample.token}` },
      after: first.acceptedVersion ?? 0,
      onChange: (change) => events.push({ change }),
      onPreview: (preview) => events.push({ preview }),
    });
    try {
      const second = await post("p2");
      const ended = () =>
        events.some(
          (e) =>
            "change" in e && e.change.submissions.some((s) => s.id === second.id && s.status === "succeeded"),
        );
      await expect.poll(ended, { timeout: 20_000 }).toBe(true);
      // Each model round's previews, put together, are the text that round committed, and come before it.
      const answers = events.flatMap((e, i) =>
        "change" in e
          ? e.change.entries.flatMap((entry) =>
              entry.taskId === second.taskId && entry.content.kind === "model" && entry.content.text
                ? [{ i, text: entry.content.text }]
                : [],
            )
          : [],
      );
      expect(answers.length).toBeGreaterThan(0);
      for (const answer of answers) {
        const before = events
          .slice(0, answer.i)
          .flatMap((e) => ("preview" in e && e.preview.taskId === second.taskId ? [e.preview] : []));
        const round = before.at(-1)?.round;
        expect(
          before
            .filter((p) => p.round === round)
            .map((p) => p.text)
            .join(""),
        ).toBe(answer.text);
      }
    } finally {
      stop();
    }
  });

  it("a connection dropped mid-answer goes on from the last change seen: the same chunks, none twice", async () => {
    // The network drops each of the first three event streams after two more commits reached the page.
    const resumedFrom: number[] = [];
    const dropping: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const url = String(input);
      if (!url.includes("/events")) return response;
      resumedFrom.push(Number(new Headers(init?.headers).get("last-event-id")));
      if (resumedFrom.length > 3 || !response.body) return response;
      return new Response(cutAfterCommits(response.body, 2), {
        status: response.status,
        headers: response.headers,
      });
    };
    const transport = chatTransport(
      edgeChatBackend({
        baseUrl: edge.url,
        token: EdgeExample.token,
        sessionId: "chat-drop",
        fetch: dropping,
      }),
    );
    const send = (t: typeof transport) =>
      t.sendMessages({
        trigger: "submit-message",
        chatId: "main",
        messageId: undefined,
        messages: [message],
        abortSignal: undefined,
      });
    const chunks = await readAll(await send(transport));
    expect(chunks.at(-1)).toEqual({ type: "finish" });
    // Each reconnect asked for what came after the last change the page had, never from the start again.
    expect(resumedFrom.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < resumedFrom.length; i++)
      expect(resumedFrom[i]).toBeGreaterThan(resumedFrom[i - 1] as number);
    // What the page got across the drops is the run exactly as an unbroken stream reads it.
    const whole = chatTransport(
      edgeChatBackend({ baseUrl: edge.url, token: EdgeExample.token, sessionId: "chat-drop" }),
    );
    expect(chunks).toEqual(await readAll(await send(whole)));
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
    expect((error as EdgeRequestError).code).toBe("unauthorized");
  });
});

/** An SSE body that fails like a dropped connection once `commits` more commit events have passed. */
function cutAfterCommits(body: ReadableStream<Uint8Array>, commits: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let text = "";
  let seen = 0;
  let dropped = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      // Dropped once the page read the last event allowed (an error discards chunks still queued).
      if (dropped) {
        await reader.cancel();
        return controller.error(new TypeError("network connection lost"));
      }
      const { value, done } = await reader.read();
      if (done) return controller.close();
      text += decoder.decode(value, { stream: true });
      // Whole events only: pass each on, and drop the connection after the last one allowed.
      for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n")) {
        const event = text.slice(0, end + 2);
        text = text.slice(end + 2);
        controller.enqueue(encoder.encode(event));
        if (/^event: commit$/m.test(event) && ++seen === commits) {
          dropped = true;
          return;
        }
      }
    },
    cancel: () => reader.cancel(),
  });
}
