/**
 * Tool approvals in AI SDK UI at the edge, on real workerd: the AI SDK's own chat over
 * `chatTransport(edgeChatBackend(...))`. The call's approval request streams over SSE and the stream ends
 * while the Durable Object's run waits; a reloaded page (a new chat from `chatMessages(view)`, resumed) sees
 * the same; the approval it gives goes to `POST /sessions/:id/signals/:key` and the same message goes on.
 */
import { fileURLToPath } from "node:url";
import { lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { chatMessages, chatTransport, edgeChatBackend, type SessionView } from "../../src/index.ts";
import { lastText, PlainChat, toolParts } from "../support/plain-chat.ts";
import { bundleWorker, startWorkerd } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/booking.ts", import.meta.url)));
const token = "booking-token";

describe("tool approvals through the edge API", () => {
  let workerd: ReturnType<typeof startWorkerd>;
  let url = "";
  beforeAll(async () => {
    workerd = startWorkerd(script, { SESSIONS: "AgentSession" }, undefined, { API_TOKEN: token });
    url = (await workerd.ready).origin;
  }, 60_000);
  afterAll(async () => {
    await workerd?.dispose();
  });

  it("asks, waits in the Durable Object across a reload, and books once approved", async () => {
    const backend = edgeChatBackend({ baseUrl: url, token, sessionId: "booking-1" });
    const chatOver = (messages: UIMessage[] = []) =>
      new PlainChat(
        {
          id: "main",
          transport: chatTransport(backend),
          sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
        },
        messages,
      );
    const chat = chatOver();
    await chat.sendMessage({ text: "Book a table for 2" });
    await vi.waitFor(() => expect(chat.status).toBe("ready"), { timeout: 20_000 });
    const [asked] = toolParts(chat);
    expect(asked?.state).toBe("approval-requested");
    const approvalId = asked?.approval?.id ?? "";
    const view = (await backend.view()) as SessionView;
    expect(view.pending.map((p) => p.key)).toEqual([approvalId]);

    const reloaded = chatOver(chatMessages(view, "main") as UIMessage[]);
    await reloaded.resumeStream();
    await vi.waitFor(() => expect(reloaded.status).toBe("ready"), { timeout: 20_000 });
    expect(toolParts(reloaded)).toEqual(toolParts(chat));

    await reloaded.addToolApprovalResponse({ id: approvalId, approved: true });
    await vi.waitFor(() => expect(lastText(reloaded)).toBe("Checking. Booked for 2."), { timeout: 20_000 });
    await vi.waitFor(() => expect(reloaded.status).toBe("ready"), { timeout: 20_000 });
    expect(reloaded.error).toBeUndefined();
    expect(toolParts(reloaded)).toEqual([
      expect.objectContaining({ state: "output-available", output: { booked: 2 } }),
    ]);
    const after = (await backend.view()) as SessionView;
    expect(after.pending).toEqual([]);
    expect(after.submissions.map((s) => s.status)).toEqual(["succeeded"]);
  }, 60_000);
});
