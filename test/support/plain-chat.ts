/**
 * The AI SDK's own chat (`AbstractChat` from `ai`, what `useChat` wraps) without React, messages in an
 * array; and a chat backend over a session in this process.
 */
import { AbstractChat, type ChatInit, type ChatState, type UIMessage } from "ai";
import type { ChatBackend, Session } from "../../src/index.ts";

class PlainState implements ChatState<UIMessage> {
  status: ChatState<UIMessage>["status"] = "ready";
  error: Error | undefined = undefined;
  constructor(public messages: UIMessage[]) {}
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

export class PlainChat extends AbstractChat<UIMessage> {
  constructor(init: Omit<ChatInit<UIMessage>, "messages">, messages: UIMessage[] = []) {
    super({ ...init, state: new PlainState(messages) });
  }
}

type ToolPart = { type: string; state: string; approval?: { id: string }; output?: unknown };

/** The tool parts of the chat's last message. */
export const toolParts = (chat: PlainChat) =>
  (chat.messages.at(-1)?.parts ?? []).filter((p) => p.type === "dynamic-tool") as ToolPart[];

/** The text of the chat's last message. */
export const lastText = (chat: PlainChat) =>
  (chat.messages.at(-1)?.parts ?? []).flatMap((p) => (p.type === "text" ? [p.text] : [])).join("");

/** A chat backend over a session in this process (what the worker client gives a page). */
export function sessionBackend(session: Session): ChatBackend {
  return {
    submit: (input) => session.submit(input),
    submissionForRequest: (requestId) => session.readSubmissionForRequest(requestId),
    view: async (options) => session.view(options),
    subscribe: (from, listener) => session.subscribe(from, listener),
    cancelSubmission: (id, reason) => session.cancelSubmission(id, reason),
    signal: (key, payload, options) => session.signal(key, payload, options),
  };
}
