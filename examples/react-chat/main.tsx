/** @jsxImportSource react */
/**
 * Plain `useChat` (`@ai-sdk/react`) with durable-agent's transport: messages are Submissions in a session
 * held by a Web Worker over IndexedDB. On load the page shows the committed conversation and resumes the
 * stream of a run still going (`resume: true` calls the transport's `reconnectToStream`). A tool call that
 * asks for approval shows Approve / Reject; the answer goes back through `addToolApprovalResponse`, and
 * `sendAutomaticallyWhen` lets the transport deliver it as the durable approval and continue the run.
 */
import { useChat } from "@ai-sdk/react";
import { lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { chatMessages, chatTransport } from "durable-agent";
import { connectSessionWorker } from "durable-agent/worker";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";

const client = connectSessionWorker(
  new Worker(new URL("./chat.worker.ts", import.meta.url), { type: "module" }),
);
const transport = chatTransport(client);
const CHAT = "main";

function Chat({ initial }: { initial: UIMessage[] }) {
  const { messages, sendMessage, status, addToolApprovalResponse } = useChat({
    id: CHAT,
    messages: initial,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  // A run that waits for a decision holds the conversation: a message sent now would queue behind it,
  // unanswered until the decision is taken. Asked for first.
  const awaitingDecision = messages.some((m) =>
    m.parts.some((p) => (p as { state?: string }).state === "approval-requested"),
  );
  return (
    <main data-status={status}>
      {messages.map((message) => (
        <div key={message.id} className={`message ${message.role}`} data-role={message.role}>
          {message.parts.map((part, i) =>
            part.type === "text" ? (
              // A text part right before another one was cut off (a reload mid-answer): the model was asked
              // again, and its answer is the part after. Shown as what it is, not as a second answer.
              message.parts[i + 1]?.type === "text" ? (
                // biome-ignore lint/suspicious/noArrayIndexKey: a message's parts only ever grow at the end
                <p key={i} className="text cut-off" title="cut off by a reload; the model was asked again">
                  {part.text}
                </p>
              ) : (
                // biome-ignore lint/suspicious/noArrayIndexKey: as above
                <p key={i} className="text">
                  {part.text}
                </p>
              )
            ) : part.type === "dynamic-tool" ? (
              // biome-ignore lint/suspicious/noArrayIndexKey: a message's parts only ever grow at the end
              <p key={i} className="tool" data-state={part.state}>
                {part.toolName}({JSON.stringify(part.input)}){" "}
                {part.state === "output-available" ? `→ ${JSON.stringify(part.output)}` : part.state}
                {part.state === "approval-requested" && (
                  <>
                    {" "}
                    <button
                      type="button"
                      onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: true })}
                    >
                      Approve
                    </button>{" "}
                    <button
                      type="button"
                      onClick={() =>
                        void addToolApprovalResponse({
                          id: part.approval.id,
                          approved: false,
                          reason: "declined in the chat",
                        })
                      }
                    >
                      Reject
                    </button>
                  </>
                )}
              </p>
            ) : null,
          )}
        </div>
      ))}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (!input.trim() || awaitingDecision) return;
          void sendMessage({ text: input });
          setInput("");
        }}
      >
        <input
          aria-label="message"
          value={input}
          onChange={(e) => setInput(e.currentTarget.value)}
          placeholder={awaitingDecision ? "Approve or reject the call above first" : "Ask the time in Lisbon"}
        />
        <button
          type="submit"
          disabled={status === "submitted" || status === "streaming" || awaitingDecision}
          title={awaitingDecision ? "a call above waits for your decision" : undefined}
        >
          Send
        </button>
      </form>
    </main>
  );
}

function App() {
  const [initial, setInitial] = useState<UIMessage[] | undefined>(undefined);
  useEffect(() => {
    void client.view().then(async (view) => {
      // No tab has created the session yet (this one follows a leader still starting): wait until one has.
      for (let i = 0; i < 100 && !view; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        view = await client.view();
      }
      setInitial(view ? (chatMessages(view, CHAT) as UIMessage[]) : []);
    });
  }, []);
  return initial ? <Chat initial={initial} /> : <p>connecting…</p>;
}

createRoot(document.querySelector("#root") as HTMLElement).render(<App />);
