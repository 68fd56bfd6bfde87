/** The model's context as `buildMessages` rebuilds it from committed entries. */
import { describe, expect, it } from "vitest";
import { buildMessages, type Entry, type Json, type ModelMessage } from "../../src/index.ts";

const entry = (seq: number, content: Entry["content"]): Entry => ({
  conversationId: "c",
  seq,
  version: seq + 1,
  at: 0,
  content,
});

const ask = (seq: number, id: string, account: string) =>
  entry(seq, {
    kind: "model",
    text: "",
    toolCalls: [{ id, name: "get_balance", args: JSON.stringify({ account }) }],
  });

const result = (seq: number, id: string, output: Json) =>
  entry(seq, { kind: "tool-result", toolCallId: id, toolName: "get_balance", outcome: "ok", output });

/** Each tool message's output, in order. */
const toolOutputs = (messages: readonly ModelMessage[]) =>
  messages.flatMap((m) => (m.role === "tool" ? [JSON.parse(m.content) as unknown] : []));

describe("model context", () => {
  it("answers each call with its own result when a provider reuses a call id in every round", () => {
    const entries = [
      entry(0, { kind: "user", text: "balances?" }),
      ask(1, "call_0", "checking"),
      result(2, "call_0", { balance: 100 }),
      ask(3, "call_0", "savings"),
      result(4, "call_0", { balance: 99_999 }),
    ];
    expect(toolOutputs(buildMessages(entries))).toEqual([
      { outcome: "ok", output: { balance: 100 } },
      { outcome: "ok", output: { balance: 99_999 } },
    ]);
  });

  it("never answers a call with a later call's result that reuses its id", () => {
    const entries = [
      entry(0, { kind: "user", text: "balances?" }),
      ask(1, "call_0", "checking"), // its turn ended before this call's result was recorded
      entry(2, { kind: "user", text: "and savings?" }),
      ask(3, "call_0", "savings"),
      result(4, "call_0", { balance: 99_999 }),
    ];
    const [first, second] = toolOutputs(buildMessages(entries));
    expect(first).toMatchObject({ outcome: "unknown" });
    expect(second).toEqual({ outcome: "ok", output: { balance: 99_999 } });
  });

  it("pairs results added by the request itself with the latest call of that id", () => {
    const entries = [
      ask(0, "call_0", "checking"),
      result(1, "call_0", { balance: 100 }),
      ask(2, "call_0", "savings"),
    ];
    const added = { kind: "tool-result" as const, toolCallId: "call_0", toolName: "get_balance" };
    const messages = buildMessages(entries, undefined, {}, [
      { ...added, outcome: "error", output: { error: "x" } },
    ]);
    expect(toolOutputs(messages)).toEqual([
      { outcome: "ok", output: { balance: 100 } },
      { outcome: "error", output: { error: "x" } },
    ]);
  });

  it("cuts a long tool result between characters, never inside a surrogate pair", () => {
    const entries = [
      ask(0, "a", "checking"),
      result(1, "a", { text: `${"x".repeat(38)}${"😀".repeat(20)}` }),
    ];
    for (let limit = 40; limit <= 90; limit++) {
      const cut = buildMessages(entries, undefined, { maxToolResultChars: limit }).at(-1)?.content ?? "";
      expect(cut).toContain("[cut: the whole result is");
      // A lone surrogate is a high one not followed by a low one, or a low one not after a high one.
      expect(cut).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    }
  });

  it("sends system messages only at the start: an interrupted answer becomes a labelled user note", () => {
    const entries = [
      entry(0, { kind: "user", text: "old question" }),
      entry(1, { kind: "model", text: "old answer", toolCalls: [] }),
      entry(2, { kind: "summary", text: "they asked and we answered", coversThroughSeq: 1 }),
      entry(3, { kind: "user", text: "new question" }),
      entry(4, { kind: "interrupted", of: "model", partialText: "I was say", reason: "crash" }),
      entry(5, { kind: "model", text: "the answer", toolCalls: [] }),
    ];
    const messages = buildMessages(entries, "be brief");
    expect(messages.map((m) => m.role)).toEqual(["system", "system", "user", "user", "assistant"]);
    expect(messages[1]?.content).toContain("they asked and we answered");
    expect(messages[3]?.content).toMatch(
      /^\[note from the agent runtime, not the user\] An earlier model response was interrupted \(crash\)/,
    );
    expect(messages[3]?.content).toContain('"I was say"');
  });
});
