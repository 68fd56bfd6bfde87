/**
 * Tool approvals in AI SDK UI, through the AI SDK's own chat (`AbstractChat` from `ai`, what `useChat`
 * wraps) over our transport and a real session: a call that asks for approval shows `approval-requested`
 * and the stream ends while the run waits; a reloaded page sees the same; the page's answer
 * (`addToolApprovalResponse` + `lastAssistantMessageIsCompleteWithApprovalResponses`) becomes the durable
 * approval signal and the same assistant message goes on. A decision taken elsewhere first is the one shown.
 */
import { lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import {
  chatMessages,
  chatTransport,
  createAgent,
  createRegistry,
  defineTool,
  memoryStorage,
  openSession,
  type Session,
  scriptedModel,
} from "../../src/index.ts";
import { lastText, PlainChat, sessionBackend, toolParts } from "../support/plain-chat.ts";
import { readAll } from "../support/streams.ts";

async function bookingSession() {
  const booked: number[] = [];
  const book = defineTool({
    name: "book_table",
    description: "Books a table",
    input: z.object({ people: z.number().int().positive() }),
    replay: "safe",
    approval: true,
    execute: ({ people }) => {
      booked.push(people);
      return { booked: people };
    },
  });
  const model = scriptedModel([
    { text: "Checking. ", toolCalls: [{ name: "book_table", args: { people: 2 } }] },
    (request) => {
      const result = request.messages.at(-1);
      const text = result?.role === "tool" ? JSON.stringify(result.content ?? "") : "";
      return { text: text.includes("rejected") ? "I did not book it." : "Booked for 2." };
    },
  ]);
  const session = await openSession({
    id: "bookings",
    storage: memoryStorage(),
    registry: createRegistry({ ...createAgent({ model, tools: [book] }) }),
  });
  await session.resume();
  return { session, booked };
}

const chatOver = (session: Session, messages: UIMessage[] = []) =>
  new PlainChat(
    {
      id: "c1",
      transport: chatTransport(sessionBackend(session)),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    },
    messages,
  );

/** Sends the question and lets the stream end at the approval it asks for. */
async function askToBook(session: Session) {
  const chat = chatOver(session);
  await chat.sendMessage({ text: "Book a table for 2" });
  await vi.waitFor(() => expect(chat.status).toBe("ready"));
  const [part] = toolParts(chat);
  const approvalId = part?.approval?.id ?? "";
  return { chat, approvalId };
}

describe("tool approvals in AI SDK UI", () => {
  it("asks, ends the stream while the run waits, survives a reload, and the approval continues the same message", async () => {
    const { session, booked } = await bookingSession();
    const { chat, approvalId } = await askToBook(session);
    expect(toolParts(chat)).toEqual([
      expect.objectContaining({ state: "approval-requested", approval: { id: approvalId } }),
    ]);
    // What the page shows is what the session holds: the run is not over, it waits for this key.
    const submission = await session.readSubmissionForRequest(chat.messages[0]?.id ?? "");
    expect(submission?.status).toBe("running");
    expect(session.view().pending.map((p) => p.key)).toEqual([approvalId]);
    expect(booked).toEqual([]);

    // A reloaded page: the committed conversation, then the run resumed from its first commit.
    const reloaded = chatOver(session, chatMessages(session.view(), "c1") as UIMessage[]);
    await reloaded.resumeStream();
    await vi.waitFor(() => expect(reloaded.status).toBe("ready"));
    expect(reloaded.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(toolParts(reloaded)).toEqual(toolParts(chat));
    expect(lastText(reloaded)).toBe("Checking. ");

    await reloaded.addToolApprovalResponse({ id: approvalId, approved: true });
    await vi.waitFor(() => expect(lastText(reloaded)).toBe("Checking. Booked for 2."));
    await vi.waitFor(() => expect(reloaded.status).toBe("ready"));
    expect(booked).toEqual([2]);
    expect(reloaded.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(toolParts(reloaded)).toEqual([
      expect.objectContaining({ state: "output-available", output: { booked: 2 } }),
    ]);
    expect((await session.readSubmissionForRequest(chat.messages[0]?.id ?? ""))?.status).toBe("succeeded");
    // Sending the same decision again (a retried request) signals nothing new.
    expect(session.view().pending).toEqual([]);
    await session.close();
  });

  it("a reloaded page with a message queued behind the run that awaits approval resumes that run, so it can be answered", async () => {
    const { session, booked } = await bookingSession();
    const { approvalId } = await askToBook(session);
    // Another message, queued behind the waiting run (sent from another tab, or before the page disabled
    // sending): the newest open run has not started and would stream nothing.
    await session.submit({ requestId: "later", conversationId: "c1", input: "And a taxi?" });
    const reloaded = chatOver(session, chatMessages(session.view(), "c1") as UIMessage[]);
    await reloaded.resumeStream();
    await vi.waitFor(() => expect(reloaded.status).toBe("ready"));
    expect(toolParts(reloaded)).toEqual([
      expect.objectContaining({ state: "approval-requested", approval: { id: approvalId } }),
    ]);
    await reloaded.addToolApprovalResponse({ id: approvalId, approved: true });
    await vi.waitFor(() => expect(lastText(reloaded)).toBe("Checking. Booked for 2."));
    expect(booked).toEqual([2]);
    // The queued message then runs, in order.
    await session.whenIdle();
    expect((await session.readSubmissionForRequest("later"))?.status).toBe("succeeded");
    await session.close();
  });

  it("a rejection is a denied call the model hears about; the tool never runs", async () => {
    const { session, booked } = await bookingSession();
    const { chat, approvalId } = await askToBook(session);
    await chat.addToolApprovalResponse({ id: approvalId, approved: false, reason: "too expensive" });
    await vi.waitFor(() => expect(lastText(chat)).toBe("Checking. I did not book it."));
    await vi.waitFor(() => expect(chat.status).toBe("ready"));
    expect(booked).toEqual([]);
    expect(toolParts(chat)).toEqual([expect.objectContaining({ state: "output-denied" })]);
    // The history after a reload says the same.
    const [, answer] = chatMessages(session.view(), "c1");
    expect(answer?.parts[1]).toMatchObject({
      type: "dynamic-tool",
      state: "output-denied",
      approval: { id: approvalId, approved: false },
    });
    await session.close();
  });

  it("a decision taken elsewhere first (another tab, the devtools) is the one the page ends up showing", async () => {
    const { session, booked } = await bookingSession();
    const { chat, approvalId } = await askToBook(session);
    await session.signal(
      approvalId,
      { approved: false, reason: "declined in the devtools" },
      { requestId: "dt" },
    );
    await chat.addToolApprovalResponse({ id: approvalId, approved: true });
    await vi.waitFor(() => expect(lastText(chat)).toBe("Checking. I did not book it."));
    await vi.waitFor(() => expect(chat.status).toBe("ready"));
    expect(chat.error).toBeUndefined();
    expect(booked).toEqual([]);
    expect(toolParts(chat)).toEqual([expect.objectContaining({ state: "output-denied" })]);
    await session.close();
  });

  it("an answer to a run cancelled meanwhile ends the continued message as cancelled, not as finished", async () => {
    const { session, booked } = await bookingSession();
    const { chat, approvalId } = await askToBook(session);
    const message = chat.messages.at(-1);
    const submission = await session.readSubmissionForRequest(chat.messages[0]?.id ?? "");
    await session.cancelSubmission(submission?.id ?? "", "the user left");
    await session.whenIdle();
    const answered = {
      ...(message as UIMessage),
      parts: (message?.parts ?? []).map((p) =>
        p.type === "dynamic-tool"
          ? { ...p, state: "approval-responded", approval: { id: approvalId, approved: true } }
          : p,
      ),
    };
    const transport = chatTransport(sessionBackend(session));
    const chunks = await readAll(
      await transport.sendMessages({
        trigger: "submit-message",
        chatId: "c1",
        messageId: answered.id,
        messages: [...chat.messages.slice(0, -1), answered],
        abortSignal: undefined,
      }),
    );
    // The call it asked about never ran, and the UI's tool part is told so before the message ends.
    expect(chunks.map((c) => c.type)).toEqual(["start", "tool-output-error", "abort"]);
    expect(chunks[1]).toMatchObject({ errorText: expect.stringContaining("not-run: the tool call ended") });
    expect((chunks[1] as { errorText: string }).errorText).toContain(
      "cancelled before it ran (the user left)",
    );
    expect(booked).toEqual([]);
    await session.close();
  });

  it("a continued message whose run ended before reaching what it shows ends as the run ended", async () => {
    const { session } = await bookingSession();
    const { chat } = await askToBook(session);
    const message = chat.messages.at(-1) as UIMessage;
    const submission = await session.readSubmissionForRequest(chat.messages[0]?.id ?? "");
    await session.cancelSubmission(submission?.id ?? "", "the user left");
    await session.whenIdle();
    // The message answers an approval this run never asked for (a stale page, a mixed-up id): the replay
    // never reaches it, and the run's own end — cancelled — is what the message gets.
    const stale = {
      ...message,
      parts: message.parts.map((p) =>
        p.type === "dynamic-tool"
          ? { ...p, state: "approval-responded", approval: { id: "approval:not-this-run", approved: true } }
          : p,
      ),
    };
    const chunks = await readAll(
      await chatTransport(sessionBackend(session)).sendMessages({
        trigger: "submit-message",
        chatId: "c1",
        messageId: stale.id,
        messages: [...chat.messages.slice(0, -1), stale as UIMessage],
        abortSignal: undefined,
      }),
    );
    expect(chunks.map((c) => c.type)).toEqual(["start", "abort"]);
    await session.close();
  });
});
