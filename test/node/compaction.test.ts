/**
 * A bounded model context (DESIGN §9): past a token budget a turn first compacts its conversation — a
 * `summary` entry covers the oldest part (which stays stored) and the context start moves past it — so
 * later rounds send the summary and what follows it. Crashes re-enter the compaction; a failing summarizer
 * leaves the context whole; a huge tool output stays whole in its entry and reaches the model cut.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitGuard,
  type CommitRecord,
  type CompactionOptions,
  createAgent,
  createRegistry,
  defineTool,
  type MemoryStorage,
  type Model,
  type ModelMessage,
  type ModelRequest,
  memoryStorage,
  openSession,
  type Storage,
  scriptedModel,
  sequentialIds,
  type TurnResult,
} from "../../src/index.ts";
import { deferred, ForwardingStorage } from "../support/storage-wrappers.ts";

/** A scripted model that answers every turn and remembers what it was sent. */
function recordingModel(seen: ModelRequest[]) {
  return scriptedModel([
    (request) => {
      seen.push(request);
      const last = request.messages.at(-1);
      return { text: `answer to ${typeof last?.content === "string" ? last.content.slice(0, 40) : "?"}` };
    },
  ]);
}

const summarizeBy =
  (calls: { n: number }, fail = false): NonNullable<CompactionOptions["summarize"]> =>
  async (messages) => {
    calls.n++;
    if (fail) throw new Error("summarizer unavailable");
    const users = messages.filter((m) => m.role === "user").length;
    return `summary #${calls.n} of ${users} questions`;
  };

async function chat(options: { turns: number; compaction: CompactionOptions; storage?: Storage }) {
  const seen: ModelRequest[] = [];
  const storage = options.storage ?? memoryStorage();
  const session = await openSession({
    id: "chat",
    storage,
    registry: createRegistry({
      ...createAgent({ model: recordingModel(seen), compaction: options.compaction }),
    }),
    ids: sequentialIds(),
  });
  await session.resume();
  for (let i = 0; i < options.turns; i++) {
    const s = await session.submit({
      requestId: `r${i}`,
      conversationId: "main",
      input: `question ${i} ${"x".repeat(200)}`,
    });
    expect((await session.wait(s.id)).status).toBe("succeeded");
  }
  return { session, seen };
}

describe("compaction", () => {
  it("keeps the context under its budget however long the conversation grows; the covered entries stay stored", async () => {
    const calls = { n: 0 };
    const budget = 2_000;
    const { session, seen } = await chat({
      turns: 60,
      compaction: { budgetTokens: budget, summarize: summarizeBy(calls) },
    });
    expect(calls.n).toBeGreaterThan(3);
    const sizes = seen.map((r) => Math.ceil(JSON.stringify(r.messages).length / 4));
    // Every request after the first compaction stays near the budget (the turn's own input on top).
    expect(Math.max(...sizes.slice(20))).toBeLessThan(budget * 1.2);
    const last = seen.at(-1)?.messages ?? [];
    expect(last[0]).toMatchObject({
      role: "system",
      content: expect.stringContaining(`summary #${calls.n}`),
    });
    expect(JSON.stringify(last)).not.toContain("question 0 ");
    const conversation = session.conversation("main");
    expect(conversation?.contextStart).toBeGreaterThan(0);
    const all = await session.readEntries("main", 0);
    expect(all.filter((e) => e.content.kind === "user")).toHaveLength(60); // nothing was deleted
    expect(all.filter((e) => e.content.kind === "summary")).toHaveLength(calls.n);
  });

  it("leaves the context whole when the summarizer fails, and the turn still answers", async () => {
    const calls = { n: 0 };
    const { session, seen } = await chat({
      turns: 12,
      compaction: { budgetTokens: 600, summarize: summarizeBy(calls, true) },
    });
    expect(calls.n).toBeGreaterThan(0);
    const entries = await session.readEntries("main", 0);
    expect(entries.some((e) => e.content.kind === "summary")).toBe(false);
    expect(entries.filter((e) => e.content.kind === "note").length).toBe(calls.n);
    expect(JSON.stringify(seen.at(-1)?.messages)).toContain("question 0 "); // the whole context, as before
    expect(session.conversation("main")?.contextStart).toBeUndefined();
  });

  it("survives a crash at every commit of a compacting turn: one summary, the answer, nothing lost", async () => {
    const compaction = (calls: { n: number }) => ({ budgetTokens: 600, summarize: summarizeBy(calls) });
    const before = 9;
    const question = (i: number) => ({
      requestId: `r${i}`,
      conversationId: "main",
      input: `question ${i} ${"x".repeat(200)}`,
    });
    const registry = (calls: { n: number }) =>
      createRegistry({ ...createAgent({ model: recordingModel([]), compaction: compaction(calls) }) });
    /** A disk holding the first `before` turns, with no summary yet. */
    async function prepared(): Promise<MemoryStorage> {
      const disk = memoryStorage();
      const { session } = await chat({
        turns: before,
        compaction: { budgetTokens: 1_000_000 },
        storage: disk.reopen(),
      });
      await session.close();
      return disk;
    }
    // A clean run of the next turn: it compacts, in this many commits.
    const cleanDisk = await prepared();
    const counter = new DyingStorage(cleanDisk, Number.POSITIVE_INFINITY);
    const clean = await openSession({
      id: "chat",
      storage: counter,
      registry: registry({ n: 0 }),
      ids: sequentialIds(500),
    });
    await clean.resume();
    await clean.wait((await clean.submit(question(before))).id);
    const cleanEntries = await clean.readEntries("main", 0);
    expect(cleanEntries.filter((e) => e.content.kind === "summary")).toHaveLength(1);
    const commits = counter.commits;
    expect(commits).toBeGreaterThanOrEqual(3);
    for (let k = 0; k < commits; k++) {
      const disk = await prepared();
      const dying = new DyingStorage(disk, k);
      const a = await openSession({
        id: "chat",
        storage: dying,
        registry: registry({ n: 0 }),
        ids: sequentialIds(500),
      });
      await a.resume();
      const submitted = await a.submit(question(before)).catch(() => undefined);
      await a.whenIdle().catch(() => undefined);
      await a.close();
      expect(dying.died, `the process died at commit ${k + 1}`).toBe(true);
      const b = await openSession({
        id: "chat",
        storage: disk.reopen(),
        registry: registry({ n: 0 }),
        ids: sequentialIds(900),
      });
      await b.resume();
      const again = await b.submit(question(before));
      if (submitted) expect(again.id).toBe(submitted.id);
      expect((await b.wait(again.id)).status, `crash at commit ${k + 1}`).toBe("succeeded");
      const entries = await b.readEntries("main", 0);
      expect(
        entries.filter((e) => e.content.kind === "summary"),
        `crash at commit ${k + 1}`,
      ).toHaveLength(1);
      expect(entries.filter((e) => e.content.kind === "user")).toHaveLength(before + 1);
      expect(b.conversation("main")?.contextStart).toBeGreaterThan(0);
      await b.close();
    }
  });

  it("never summarizes a tool call apart from its result, though a follow-up was stored between them", async () => {
    const running = deferred();
    const release = deferred();
    const book = defineTool({
      name: "book_flight",
      description: "Book a flight",
      input: z.object({ to: z.string() }),
      replay: "unsafe",
      execute: async () => {
        running.resolve();
        await release.promise;
        return { booked: true, confirmation: "ABC123" };
      },
    });
    const seen: ModelRequest[] = [];
    const model = scriptedModel([
      (request) => {
        seen.push(request);
        const last = request.messages.at(-1);
        if (last?.role === "tool") return { text: "Booked." };
        if (last?.content === "Book me a flight to Oslo")
          return { toolCalls: [{ name: "book_flight", args: { to: "Oslo" } }] };
        return { text: `answer to ${last?.content}` };
      },
    ]);
    const summarized: (readonly ModelMessage[])[] = [];
    const compaction: CompactionOptions = {
      budgetTokens: 60,
      keepTokens: 1_000,
      summarize: async (messages) => {
        summarized.push(messages);
        return "They booked a flight to Oslo.";
      },
    };
    const session = await openSession({
      id: "booking",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: [book], compaction }) }),
      ids: sequentialIds(),
    });
    await session.resume();
    const say = (requestId: string, input: string) =>
      session.submit({ requestId, conversationId: "main", input });
    const booking = await say("r1", "Book me a flight to Oslo");
    await running.promise;
    // Stored after the call, before its result: the follow-up's turn runs once the booking turn ends.
    const question = await say("r2", "What is my confirmation code?");
    release.resolve();
    expect((await session.wait(booking.id)).status).toBe("succeeded");
    expect((await session.wait(question.id)).status).toBe("succeeded");
    const thanks = await say("r3", "Thanks");
    expect((await session.wait(thanks.id)).status).toBe("succeeded");

    const confirmed = { outcome: "ok", output: { booked: true, confirmation: "ABC123" } };
    const answerTo = (messages: readonly ModelMessage[]) =>
      messages.flatMap((m) => (m.role === "tool" ? [JSON.parse(m.content)] : []));
    // The question's turn is told the booking's real result, so the model can give the code (not re-book).
    const asked = seen.find((r) => r.messages.at(-1)?.content === "What is my confirmation code?");
    expect(answerTo(asked?.messages ?? [])).toEqual([confirmed]);
    // A summary is written only of a part that holds the call with its result.
    expect(summarized.length).toBeGreaterThan(0);
    for (const messages of summarized) {
      const calls = messages.filter((m) => m.role === "assistant" && m.toolCalls.length > 0);
      expect(answerTo(messages)).toEqual(calls.map(() => confirmed));
    }
    const entries = await session.readEntries("main", 0);
    const callAt = entries.find((e) => e.content.kind === "model" && e.content.toolCalls.length > 0)?.seq;
    const resultAt = entries.find((e) => e.content.kind === "tool-result")?.seq;
    for (const e of entries) {
      if (e.content.kind !== "summary") continue;
      expect(e.content.coversThroughSeq >= (callAt ?? 0)).toBe(e.content.coversThroughSeq >= (resultAt ?? 0));
    }
    await session.close();
  });

  it("counts the default summarizer's model call in the turn's usage, and records it on the summary", async () => {
    const billed = { calls: 0, inputTokens: 0, outputTokens: 0 };
    const model: Model = {
      id: "billed",
      async generate() {
        const usage = { inputTokens: 1_000, outputTokens: 100 };
        billed.calls += 1;
        billed.inputTokens += usage.inputTokens;
        billed.outputTokens += usage.outputTokens;
        return { text: "x".repeat(200), toolCalls: [], usage };
      },
    };
    const session = await openSession({
      id: "billing",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, compaction: { budgetTokens: 150 } }) }),
      ids: sequentialIds(),
    });
    await session.resume();
    const counted = { calls: 0, inputTokens: 0, outputTokens: 0 };
    for (const id of ["a", "b", "c"]) {
      const s = await session.submit({
        requestId: id,
        conversationId: "main",
        input: "tell me more ".repeat(10),
      });
      const { usage } = (await session.wait(s.id)).result as unknown as TurnResult;
      counted.calls += usage.calls;
      counted.inputTokens += usage.total.inputTokens;
      counted.outputTokens += usage.total.outputTokens;
    }
    const entries = await session.readEntries("main", 0);
    const summaries = entries.filter((e) => e.content.kind === "summary");
    expect(summaries.length).toBeGreaterThan(0);
    // What the turns report is what the model billed, summaries included.
    expect(counted).toEqual(billed);
    for (const summary of summaries)
      expect(summary.content).toMatchObject({ usage: { inputTokens: 1_000, outputTokens: 100 } });
    await session.close();
  });

  it("keeps a huge tool output whole in its entry and sends the model a cut version", async () => {
    const dump = defineTool({
      name: "dump",
      description: "Dump a log",
      input: z.object({}),
      replay: "safe",
      execute: () => ({ log: "line\n".repeat(20_000) }),
    });
    const seen: ModelRequest[] = [];
    const model = scriptedModel([
      { toolCalls: [{ name: "dump", args: {} }] },
      (request) => {
        seen.push(request);
        return { text: "read it" };
      },
    ]);
    const session = await openSession({
      id: "huge",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: [dump], maxToolResultChars: 5_000 }) }),
    });
    await session.resume();
    const s = await session.submit({ requestId: "r", conversationId: "main", input: "dump" });
    await session.wait(s.id);
    const entry = (await session.readEntries("main", 0)).find((e) => e.content.kind === "tool-result");
    expect(JSON.stringify(entry?.content).length).toBeGreaterThan(100_000);
    const tool = seen[0]?.messages.find((m) => m.role === "tool");
    expect(tool?.content.length).toBeLessThan(5_200);
    expect(tool?.content).toContain("[cut: the whole result is");
  });
});

/** Dies (every later call fails) after `allowed` commits; `died` says whether it did. */
class DyingStorage extends ForwardingStorage {
  died = false;
  commits = 0;
  constructor(
    inner: MemoryStorage,
    private allowed: number,
  ) {
    super(inner.reopen());
  }
  protected override target(): Storage {
    if (this.died) throw new Error("process killed");
    return this.inner;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    if (this.allowed-- <= 0) this.died = true;
    await this.target().commit(guard, commits);
    this.commits++;
  }
}
