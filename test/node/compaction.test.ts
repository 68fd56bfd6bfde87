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
  type ModelRequest,
  memoryStorage,
  openSession,
  type Storage,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";

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
