/**
 * The model's context, rebuilt from committed entries only — never from a live array — so a process that
 * reopens the session sends the model exactly what the crashed one would have. A conversation's latest
 * `summary` entry stands for everything it covers (compaction): the context is that summary, then the
 * entries after what it covers. Huge tool outputs stay whole in their entry and reach the model cut to a
 * size (see {@link ContextPolicy}).
 */
import { clip } from "../records/json.ts";
import type { Entry, EntryContent } from "../records/schemas.ts";
import type { ModelMessage } from "./model.ts";

/** How entries become messages. */
export interface ContextPolicy {
  /** A tool result whose JSON is longer than this many characters is cut (default 20,000). */
  readonly maxToolResultChars?: number;
}

export const DEFAULT_MAX_TOOL_RESULT_CHARS = 20_000;

/** Opens a note the kernel adds to the context in a user-role message, so it is not read as the user's. */
const NOTE_LABEL = "[note from the agent runtime, not the user]";

/** The first seq the context reads: after what the latest summary covers (0 without one). */
export function contextStart(entries: readonly Entry[]): number {
  const summary = latestSummary(entries);
  return summary?.content.kind === "summary" ? summary.content.coversThroughSeq + 1 : 0;
}

function latestSummary(entries: readonly Entry[]): Entry | undefined {
  let found: Entry | undefined;
  for (const entry of entries)
    if (entry.content.kind === "summary" && (!found || entry.seq > found.seq)) found = entry;
  return found;
}

/**
 * Messages for the model from entries (seq order): the latest summary first, then every entry after what it
 * covers. Interrupted records are kept visible as notes, so the model knows an earlier answer was cut off,
 * but their partial text never becomes an assistant turn and never drives tool calls. Each tool call is
 * followed by its own result — wherever the result entry landed (a message sent while a turn ran may be
 * stored between them), else from `answers` (results this request adds), else by a result saying none was
 * recorded (its turn ended first): providers refuse a call left unanswered, and would refuse every later
 * request. A system message only ever opens the context (the system prompt, then the summary): several
 * providers refuse one anywhere else.
 */
export function buildMessages(
  entries: readonly Entry[],
  system?: string,
  policy: ContextPolicy = {},
  answers: readonly EntryContent[] = [],
): ModelMessage[] {
  const messages: ModelMessage[] = system ? [{ role: "system", content: system }] : [];
  const summary = latestSummary(entries);
  if (summary) messages.push(messageOf(summary, policy) as ModelMessage);
  const start = contextStart(entries);
  const inContext = entries.filter((e) => e.seq >= start && e.content.kind !== "summary");
  const results = pairResults(inContext, answers);
  for (const entry of inContext) {
    if (entry.content.kind === "tool-result") continue;
    const message = messageOf(entry, policy);
    if (message) messages.push(message);
    if (entry.content.kind !== "model") continue;
    for (const [index, call] of entry.content.toolCalls.entries()) {
      const result = results.get(entry)?.[index];
      if (result === undefined) messages.push(unrecorded(call.id, call.name));
      else if ("content" in result) messages.push(messageOf(result, policy) as ModelMessage);
      else messages.push(contentMessage(result, policy) as ModelMessage);
    }
  }
  return messages;
}

type Result = Entry | EntryContent;

/**
 * The result of each call, by its model entry and position. Ids need not be unique in a conversation (a
 * provider may number its calls afresh in every response), so a result answers the latest call before it
 * with its id that is still unanswered — never another call's: a newer call with the same id ends the wait
 * of older ones (their results come before it), and `answers` come after every entry.
 */
export function pairResults(
  entries: readonly Entry[],
  answers: readonly EntryContent[],
): Map<Entry, Result[]> {
  const paired = new Map<Entry, Result[]>();
  const waiting = new Map<string, { asked: Result[]; index: number }[]>();
  const answer = (toolCallId: string, result: Result) => {
    const call = waiting.get(toolCallId)?.shift();
    if (call) call.asked[call.index] = result;
  };
  for (const entry of entries) {
    const content = entry.content;
    if (content.kind === "tool-result") answer(content.toolCallId, entry);
    if (content.kind !== "model" || content.toolCalls.length === 0) continue;
    const asked: Result[] = [];
    paired.set(entry, asked);
    for (let index = 0; index < content.toolCalls.length; index++) {
      const id = (content.toolCalls[index] as { id: string }).id;
      const open = waiting.get(id);
      // Calls of one response that share an id wait in order; a newer response's call replaces older waits.
      if (open !== undefined && open.length > 0 && open[0]?.asked === asked) open.push({ asked, index });
      else waiting.set(id, [{ asked, index }]);
    }
  }
  for (const result of answers) if (result.kind === "tool-result") answer(result.toolCallId, result);
  return paired;
}

/** The answer to a call whose result was never recorded: its turn ended (cancelled, interrupted) first. */
function unrecorded(toolCallId: string, toolName: string): ModelMessage {
  const error =
    "no result was recorded for this call: its turn ended before it finished (cancelled or interrupted); it may or may not have taken effect";
  return {
    role: "tool",
    toolCallId,
    toolName,
    content: JSON.stringify({ outcome: "unknown", output: { error } }),
  };
}

/**
 * Committed entries are immutable, so each one's message is built once: a long turn rebuilds its whole
 * context every round, and re-serialising every earlier tool result each time would make it quadratic.
 */
const messageCache = new WeakMap<Entry, { limit: number; message: ModelMessage | null }>();

function messageOf(entry: Entry, policy: ContextPolicy): ModelMessage | undefined {
  const limit = policy.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS;
  const cached = messageCache.get(entry);
  if (cached && cached.limit === limit) return cached.message ?? undefined;
  const message = contentMessage(entry.content, policy, entry.seq);
  if (Object.isFrozen(entry)) messageCache.set(entry, { limit, message: message ?? null });
  return message;
}

/** The message an entry's content stands for in the model's context (none for notes). */
export function contentMessage(
  content: EntryContent,
  policy: ContextPolicy = {},
  seq?: number,
): ModelMessage | undefined {
  switch (content.kind) {
    case "user":
      return { role: "user", content: content.text };
    case "model":
      return { role: "assistant", content: content.text, toolCalls: content.toolCalls };
    case "tool-result": {
      const limit = policy.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS;
      let text = JSON.stringify({ outcome: content.outcome, output: content.output });
      if (text.length > limit) {
        const where = seq === undefined ? "" : ` (entry ${seq})`;
        // Cut between characters, never inside a surrogate pair: the message must stay well-formed.
        text = `${clip(text, limit)} [cut: the whole result is ${text.length} characters, kept in the conversation${where}]`;
      }
      return { role: "tool", toolCallId: content.toolCallId, toolName: content.toolName, content: text };
    }
    case "interrupted":
      // A user-role note, labelled: a system message after the start breaks the conversation for good on
      // providers that refuse one there (Google, Bedrock).
      return {
        role: "user",
        content: `${NOTE_LABEL} An earlier ${content.of} response was interrupted (${content.reason}); its partial text was: ${JSON.stringify(content.partialText)}`,
      };
    case "summary":
      return { role: "system", content: `Summary of the conversation so far: ${content.text}` };
    case "note":
      return undefined;
  }
}
