/**
 * The model's context, rebuilt from committed entries only — never from a live array — so a process that
 * reopens the session sends the model exactly what the crashed one would have.
 */
import type { Entry, EntryContent } from "../records/schemas.ts";
import type { ModelMessage } from "./model.ts";

/** The seq from which the context starts: the latest summary (compaction marker) covers what came before. */
export function contextStart(entries: readonly Entry[]): number {
  for (let i = entries.length - 1; i >= 0; i--) {
    const content = entries[i]?.content;
    if (content?.kind === "summary") return entries[i]?.seq ?? 0;
  }
  return 0;
}

/**
 * Messages for the model from entries (seq order). Interrupted records are kept visible as notes, so the
 * model knows an earlier answer was cut off, but their partial text never becomes an assistant turn and
 * never drives tool calls.
 */
export function buildMessages(entries: readonly Entry[], system?: string): ModelMessage[] {
  const messages: ModelMessage[] = system ? [{ role: "system", content: system }] : [];
  const start = contextStart(entries);
  for (const entry of entries) {
    if (entry.seq < start) continue;
    const message = messageOf(entry);
    if (message) messages.push(message);
  }
  return messages;
}

/**
 * Committed entries are immutable, so each one's message is built once: a long turn rebuilds its whole
 * context every round, and re-serialising every earlier tool result each time would make it quadratic.
 */
const messageCache = new WeakMap<Entry, ModelMessage | null>();

function messageOf(entry: Entry): ModelMessage | undefined {
  const cached = messageCache.get(entry);
  if (cached !== undefined) return cached ?? undefined;
  const message = contentMessage(entry.content);
  if (Object.isFrozen(entry)) messageCache.set(entry, message ?? null);
  return message;
}

/** The message an entry's content stands for in the model's context (none for notes). */
export function contentMessage(content: EntryContent): ModelMessage | undefined {
  switch (content.kind) {
    case "user":
      return { role: "user", content: content.text };
    case "model":
      return { role: "assistant", content: content.text, toolCalls: content.toolCalls };
    case "tool-result":
      return {
        role: "tool",
        toolCallId: content.toolCallId,
        toolName: content.toolName,
        content: JSON.stringify({ outcome: content.outcome, output: content.output }),
      };
    case "interrupted":
      return {
        role: "system",
        content: `An earlier ${content.of} response was interrupted (${content.reason}); its partial text was: ${JSON.stringify(content.partialText)}`,
      };
    case "summary":
      return { role: "system", content: `Summary of the conversation so far: ${content.text}` };
    case "note":
      return undefined;
  }
}
