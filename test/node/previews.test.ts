/**
 * Streamed text as previews plus durable checkpoints (DESIGN §9, issue 16): every piece of a round's text
 * reaches live subscribers at once, in order with the changes; storage takes it in checkpoints (the first
 * piece at once, then at most one per `streamCheckpointMs`) and the answer when it commits. A UI that
 * shows previews gets the whole text exactly once; a crash keeps the checkpointed part, a prefix of it.
 */
import { describe, expect, it } from "vitest";
import { streamDocumentId } from "../../src/agent/stream-record.ts";
import {
  type ChatChunk,
  type CommitRecord,
  chatMessages,
  chatTransport,
  createAgent,
  createRegistry,
  ManualClock,
  ManualTimers,
  type MemoryStorage,
  type Model,
  ModelError,
  memoryStorage,
  openSession,
  type Preview,
  type Session,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";

const ANSWER = "The durable answer, streamed in pieces of twenty characters every ten milliseconds. ".repeat(
  50,
);

async function streamingSession(disk: MemoryStorage, checkpointMs?: number) {
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const model = scriptedModel([{ text: ANSWER }], { chunkSize: 20, chunkDelayMs: 10, timers });
  const session = await openSession({
    id: "stream",
    storage: disk,
    registry: createRegistry({
      ...createAgent({ model, ...(checkpointMs !== undefined && { streamCheckpointMs: checkpointMs }) }),
    }),
    clock,
    timers,
    ids: sequentialIds(),
  });
  await session.resume();
  return { session, clock, timers };
}

/** Lets the model stream: time moves 10 ms per step until `done` (or `steps` run out). */
async function drive(timers: ManualTimers, done: () => boolean, steps = 1_000) {
  for (let i = 0; i < steps && !done(); i++) {
    await new Promise((resolve) => setImmediate(resolve));
    timers.advance(10);
  }
}

async function readAll(stream: ReadableStream<ChatChunk>, timers: ManualTimers): Promise<ChatChunk[]> {
  const chunks: ChatChunk[] = [];
  const reader = stream.getReader();
  let finished = false;
  const reading = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
    finished = true;
  })();
  await drive(timers, () => finished);
  await reading;
  return chunks;
}

describe("previews and stream checkpoints", () => {
  it("hands every piece to a live subscriber at once and stores a checkpoint a second, not one per flush", async () => {
    const disk = memoryStorage();
    const { session, timers } = await streamingSession(disk);
    const previews: Preview[] = [];
    const streamed: CommitRecord[] = [];
    session.subscribe(0, (change) => change.deferred && streamed.push(change), {
      onPreview: (preview) => previews.push(preview),
    });
    const s = await session.submit({ requestId: "r", conversationId: "main", input: "go" });
    await drive(timers, () => session.submission(s.id)?.status === "succeeded");
    // Every piece, in order, each starting where the last one ended: together, the answer.
    expect(previews.map((p) => p.text).join("")).toBe(ANSWER);
    let offset = 0;
    for (const p of previews) {
      expect(p.offset).toBe(offset);
      offset += p.text.length;
    }
    // Stored: the first piece at once, then one checkpoint per second of streaming (this one took 2.1 s).
    expect(streamed.length).toBe(3);
    expect(session.view().documents.find((d) => d.id === streamDocumentId(s.taskId ?? ""))).toBeUndefined();
  });

  it("gives a chat UI the whole answer exactly once, previews first, the committed text completing it", async () => {
    const { session, timers } = await streamingSession(memoryStorage());
    const backend = {
      submit: (input: Parameters<Session["submit"]>[0]) => session.submit(input),
      submissionForRequest: (id: string) => session.readSubmissionForRequest(id),
      view: async () => session.view(),
      subscribe: (
        from: number,
        listener: (c: CommitRecord) => void,
        onError?: (e: Error) => void,
        onPreview?: (p: Preview) => void,
      ) =>
        session.subscribe(from, listener, { ...(onError && { onError }), ...(onPreview && { onPreview }) }),
    };
    const stream = await chatTransport(backend).sendMessages({
      trigger: "submit-message",
      chatId: "main",
      messageId: undefined,
      messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "go" }] }],
      abortSignal: undefined,
    });
    const chunks = await readAll(stream, timers);
    const deltas = chunks.flatMap((c) => (c.type === "text-delta" ? [c.delta] : []));
    expect(deltas.join("")).toBe(ANSWER);
    // Streamed piece by piece (previews), not in a few stored checkpoints.
    expect(deltas.length).toBeGreaterThan(100);
    expect(chunks.filter((c) => c.type === "text-start")).toHaveLength(1);
    expect(chunks.at(-1)).toEqual({ type: "finish" });
    // The same run replayed from storage only (a reloaded page): the same text, in fewer pieces.
    const replay = await chatTransport({
      ...backend,
      subscribe: (f, l, e) => session.subscribe(f, l, e ? { onError: e } : {}),
    }).sendMessages({
      trigger: "submit-message",
      chatId: "main",
      messageId: undefined,
      messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "go" }] }],
      abortSignal: undefined,
    });
    const replayed = (await readAll(replay, timers)).flatMap((c) =>
      c.type === "text-delta" ? [c.delta] : [],
    );
    expect(replayed.join("")).toBe(ANSWER);
    expect(replayed.length).toBeLessThan(5);
  });

  it("sends no previews to a subscriber still catching up from the change log", async () => {
    const disk = memoryStorage();
    const { session, timers } = await streamingSession(disk);
    const s = await session.submit({ requestId: "r", conversationId: "main", input: "go" });
    await drive(timers, () => session.view().documents.length > 0); // the first checkpoint is stored
    const order: string[] = [];
    session.subscribe(0, (change) => order.push(`change ${change.version}`), {
      onPreview: (p) => order.push(`preview ${p.offset}`),
    });
    await drive(timers, () => session.submission(s.id)?.status === "succeeded");
    const firstPreview = order.findIndex((line) => line.startsWith("preview"));
    const versions = order.filter((l) => l.startsWith("change")).map((l) => Number(l.split(" ")[1]));
    expect(versions).toEqual(Array.from({ length: session.version }, (_, i) => i + 1));
    // Previews only once it had caught up to the version it joined at.
    expect(order.slice(0, firstPreview).filter((l) => l.startsWith("change")).length).toBeGreaterThanOrEqual(
      2,
    );
  });

  it("keeps the checkpointed text when the process dies mid-stream: a prefix of what was previewed", async () => {
    const disk = memoryStorage();
    const first = await streamingSession(disk.reopen());
    const previews: string[] = [];
    first.session.subscribe(0, () => undefined, { onPreview: (p) => previews.push(p.text) });
    const s = await first.session.submit({ requestId: "r", conversationId: "main", input: "go" });
    await drive(first.timers, () => previews.join("").length >= 1_300);
    // The process dies here (no close, no flush); the next one resumes.
    const next = await streamingSession(disk.reopen());
    await drive(next.timers, () => next.session.submission(s.id)?.status === "succeeded");
    const entries = next.session.view().conversations[0]?.entries ?? [];
    const interrupted = entries.find((e) => e.content.kind === "interrupted");
    const partial = interrupted?.content.kind === "interrupted" ? interrupted.content.partialText : "";
    expect(partial.length).toBeGreaterThan(0);
    expect(previews.join("").startsWith(partial)).toBe(true);
    expect(partial.length).toBeLessThan(previews.join("").length); // the part after the last checkpoint was lost
    const answer = entries.findLast((e) => e.content.kind === "model");
    expect(answer?.content.kind === "model" && answer.content.text).toBe(ANSWER);
  });

  it("removes the stream record when the model fails for good mid-stream, keeping what it streamed as a record", async () => {
    const model = {
      id: "failing",
      async generate(_request: unknown, options: { onText?: (delta: string) => void }) {
        options.onText?.("half an ans");
        throw new ModelError("upstream closed the stream", { retryable: false, partialText: "half an ans" });
      },
    };
    const session = await openSession({
      id: "fails",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model: model as never }) }),
      ids: sequentialIds(),
    });
    await session.resume();
    const s = await session.submit({ requestId: "r", conversationId: "main", input: "go" });
    expect((await session.wait(s.id)).status).toBe("failed");
    expect(session.view().documents).toEqual([]);
    const kinds = session.view().conversations[0]?.entries.map((e) => e.content.kind);
    expect(kinds).toEqual(["user", "interrupted"]);
  });

  it("stores an emoji a model streamed split between two pieces whole, not as two halves the store refuses", async () => {
    const disk = memoryStorage();
    const open = async () => {
      const clock = new ManualClock(0);
      const timers = new ManualTimers(clock);
      // A custom model that cuts its text between the two halves of a surrogate pair, then pauses.
      const model: Model = {
        id: "splitting",
        async generate(_request, { onText }) {
          const wait = (ms: number) => new Promise<void>((resolve) => timers.setTimeout(resolve, ms));
          onText?.("Smile \ud83d");
          await wait(2_000);
          onText?.("\ude00 done. ");
          await wait(60_000);
          return { text: "Smile \ud83d\ude00 done. ", toolCalls: [] };
        },
      };
      const session = await openSession({
        id: "split",
        storage: disk.reopen(),
        registry: createRegistry({ ...createAgent({ model }) }),
        clock,
        timers,
        ids: sequentialIds(),
      });
      await session.resume();
      return { session, timers };
    };
    const first = await open();
    const s = await first.session.submit({ requestId: "r", conversationId: "main", input: "go" });
    await drive(first.timers, () => false, 400);
    // The process dies in the pause: what was streamed so far is kept, the emoji whole.
    const next = await open();
    await drive(next.timers, () => next.session.submission(s.id)?.status === "succeeded", 10_000);
    const entries = next.session.view().conversations[0]?.entries ?? [];
    const interrupted = entries.find((e) => e.content.kind === "interrupted");
    expect(interrupted?.content.kind === "interrupted" && interrupted.content.partialText).toBe(
      "Smile \ud83d\ude00 done. ",
    );
  });

  it("stores text held back in a checkpoint window when the window ends, even while the model pauses", async () => {
    const disk = memoryStorage();
    const open = async () => {
      const clock = new ManualClock(0);
      const timers = new ManualTimers(clock);
      // Two pieces 300 ms apart, then a 60 s pause (a slow tool-less thought), then the rest.
      const model: Model = {
        id: "pausing",
        async generate(_request, { onText }) {
          const wait = (ms: number) => new Promise<void>((resolve) => timers.setTimeout(resolve, ms));
          onText?.("First piece, ");
          await wait(300); // the first piece's checkpoint is stored by then; this one falls in its window
          onText?.("second piece held back. ");
          await wait(60_000);
          onText?.("After the pause.");
          return { text: "First piece, second piece held back. After the pause.", toolCalls: [] };
        },
      };
      const session = await openSession({
        id: "pause",
        storage: disk.reopen(),
        registry: createRegistry({ ...createAgent({ model }) }),
        clock,
        timers,
        ids: sequentialIds(),
      });
      await session.resume();
      return { session, timers };
    };
    const first = await open();
    const s = await first.session.submit({ requestId: "r", conversationId: "main", input: "go" });
    const stored = () => {
      const doc = first.session.view().documents.find((d) => d.id.startsWith("stream:"));
      return ((doc?.value as { chunks?: string[] } | undefined)?.chunks ?? []).join("");
    };
    // 2 s into the pause: the held-back piece was stored when its window ended, with nothing more streamed.
    await drive(first.timers, () => false, 200);
    expect(stored()).toBe("First piece, second piece held back. ");
    // The process dies in the pause: the next one keeps all of it as the interrupted record.
    const next = await open();
    await drive(next.timers, () => next.session.submission(s.id)?.status === "succeeded", 10_000);
    const entries = next.session.view().conversations[0]?.entries ?? [];
    const interrupted = entries.find((e) => e.content.kind === "interrupted");
    expect(interrupted?.content.kind === "interrupted" && interrupted.content.partialText).toBe(
      "First piece, second piece held back. ",
    );
    // A page loaded now shows the cut-off text as a part of its own before the answer, as a resumed stream
    // showed it (it was left out: a second reload lost it).
    const answer = chatMessages(next.session.view(), "main").find((m) => m.role === "assistant");
    expect(answer?.parts.map((p) => (p as { text?: string }).text)).toEqual([
      "First piece, second piece held back. ",
      "First piece, second piece held back. After the pause.",
    ]);
  });
});
