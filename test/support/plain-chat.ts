/** The AI SDK's own chat (`AbstractChat` from `ai`, what `useChat` wraps) without React: messages in an array. */
import { AbstractChat, type ChatInit, type ChatState, type UIMessage } from "ai";

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
