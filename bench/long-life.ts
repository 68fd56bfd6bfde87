/**
 * Long-life benchmarks (DESIGN §9), each a ratio of the big case against the small one in the same run:
 * - `session/open-50000-vs-100/<store>`: cold open of a session with 50,000 settled Submissions vs 100;
 * - `session/heap-50000-vs-100/<store>`: heap the open session keeps (after a full GC), same sessions;
 * - `agent/turn-20000-vs-20`: one more turn in a conversation of 20,000 entries vs one of 20, compaction on;
 * - `stream/bytes-2000-chars`: bytes written to stream a 2,000-character answer, vs its length.
 * Histories are written straight through the store's commit (the rows a live session writes for them, in
 * transactions of 500 commits), so building 50,000 Submissions takes seconds, not minutes.
 */
import { z } from "zod";
import {
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTask,
  indexedDbStorage,
  memoryStorage,
  openSession,
  type Storage,
  scriptedModel,
  sequentialIds,
} from "../src/index.ts";
import { ForwardingStorage } from "../test/support/storage-wrappers.ts";
import { settledHistory } from "./histories.ts";
import { median } from "./workload.ts";

const echo = defineTask({
  kind: "echo",
  version: 1,
  input: z.object({ text: z.string() }),
  phases: { run: (ctx) => ctx.complete({ echoed: ctx.input.text }) },
});
const echoRegistry = () =>
  createRegistry({
    tasks: [echo],
    submissionTask: (s) => ({ kind: "echo", input: { text: String(s.input) } }),
  });

/** Writes `commits` into a new session of `storage`, 500 per transaction. */
async function writeHistory(storage: Storage, sessionId: string, commits: CommitRecord[]): Promise<void> {
  await storage.open(sessionId, { mode: "write", at: 1_000, entryTail: 1, settled: 0 });
  for (let i = 0; i < commits.length; i += 500) {
    const batch = commits.slice(i, i + 500);
    await storage.commit({ sessionId, epoch: 1, expectedVersion: i }, batch);
  }
}

const gc = () => (globalThis as { gc?: () => void }).gc?.();
/** Bytes of JS heap in use: Node's, or Chromium's (`--enable-precise-memory-info` makes it exact). */
const heapUsed = () =>
  typeof process !== "undefined" && typeof process.memoryUsage === "function"
    ? process.memoryUsage().heapUsed
    : ((performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0);

/**
 * Cold open time (ms, median of `rounds`) and the heap one open session keeps (bytes: fifty held at once,
 * after a full GC, divided by fifty, so the allocator's noise does not drown a session's few kilobytes).
 */
async function measureOpen(storage: () => Storage, sessionId: string, rounds: number) {
  const open = (store: Storage) =>
    openSession({ id: sessionId, storage: store, registry: echoRegistry(), mode: "read" });
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const store = storage();
    // Each open starts from a collected heap: a major collection of the store's own rows (50,000
    // Submissions in fake-indexeddb's memory) landing in some opens and not others made the median jump.
    gc();
    const start = performance.now();
    const session = await open(store);
    times.push(performance.now() - start);
    if (session.view().submissions.length === 0) throw new Error("the bench session is empty");
    await session.close();
    await store.close();
  }
  const heaps: number[] = [];
  for (let r = 0; r < 3; r++) {
    const store = storage();
    gc();
    const before = heapUsed();
    const held = [];
    for (let i = 0; i < 50; i++) held.push(await open(store));
    gc();
    heaps.push((heapUsed() - before) / held.length);
    for (const session of held) await session.close();
    await store.close();
  }
  return { ms: median(times), heap: median(heaps) };
}

/**
 * Open time and heap of 50,000 settled Submissions vs 100, on one kind of store (`indexeddb`: whatever
 * IndexedDB the realm has: fake-indexeddb in Node, the real one on disk in Chromium).
 */
export async function openBench(store: "memory" | "indexeddb") {
  let storage: () => Storage;
  if (store === "memory") {
    const disk = memoryStorage();
    storage = () => disk.reopen();
  } else {
    const name = `long-life-${Date.now()}`;
    storage = () => indexedDbStorage(name, { durability: "relaxed" });
  }
  const setup = storage();
  await writeHistory(setup, "big", settledHistory(50_000));
  await writeHistory(setup, "small", settledHistory(100));
  await measureOpen(storage, "big", 2); // warm-up
  await measureOpen(storage, "small", 2);
  const big = await measureOpen(storage, "big", 7);
  const small = await measureOpen(storage, "small", 7);
  return {
    open: { ours: big.ms, floor: small.ms },
    heap: { ours: big.heap / 1024, floor: small.heap / 1024 },
  };
}

/** One more turn in a conversation of `entries` entries, compaction on; ms per turn. */
async function turnCost(entries: number, store: () => Storage): Promise<number> {
  const disk = store();
  // The conversation's history: alternating questions and answers, written straight to the store.
  const history: CommitRecord[] = [];
  for (let i = 0; i < entries / 2; i++) {
    const version = i + 1;
    const text = (who: string) => `${who} ${i} ${"lorem ipsum ".repeat(8)}`;
    history.push({
      version,
      epoch: 1,
      at: version,
      deferred: false,
      conversations: [{ id: "main", createdAt: 0, entryCount: i * 2 + 2 }],
      entries: [
        {
          conversationId: "main",
          seq: i * 2,
          version,
          at: version,
          content: { kind: "user", text: text("q") },
        },
        {
          conversationId: "main",
          seq: i * 2 + 1,
          version,
          at: version,
          content: { kind: "model", text: text("a"), toolCalls: [] },
        },
      ],
      documents: [],
      tasks: [],
      submissions: [],
    });
  }
  await writeHistory(disk, "chat", history);
  const model = scriptedModel([{ text: "ok" }]);
  const agent = createAgent({
    model,
    compaction: { budgetTokens: 4_000, summarize: async () => "summary so far" },
  });
  const session = await openSession({
    id: "chat",
    storage: disk,
    registry: createRegistry({ ...agent }),
    ids: sequentialIds(),
  });
  await session.resume();
  const turn = async (i: number) => {
    const s = await session.submit({ requestId: `t${i}`, conversationId: "main", input: `question ${i}` });
    await session.wait(s.id);
  };
  for (let i = 0; i < 5; i++) await turn(i); // warm-up; the first compacts a long conversation once
  const times: number[] = [];
  for (let i = 5; i < 45; i++) {
    const start = performance.now();
    await turn(i);
    times.push(performance.now() - start);
  }
  await session.close();
  return median(times);
}

/**
 * `agent/turn-20000-vs-20` on one kind of store: the memory store, or IndexedDB (real and on disk in
 * Chromium), a fresh session per case.
 */
export async function turnBench(
  kind: "memory" | "indexeddb" = "memory",
): Promise<{ ours: number; floor: number }> {
  let n = 0;
  const stamp = Date.now();
  const store = () =>
    kind === "memory"
      ? memoryStorage()
      : indexedDbStorage(`turns-${stamp}-${n++}`, { durability: "relaxed" });
  await turnCost(20, store);
  const ours: number[] = [];
  const floor: number[] = [];
  for (let r = 0; r < 3; r++) {
    ours.push(await turnCost(20_000, store));
    floor.push(await turnCost(20, store));
  }
  return { ours: median(ours), floor: median(floor) };
}

/**
 * Counts the JSON characters of every row the store writes while it commits a group holding deferred (streaming)
 * commits — their change-log rows and any rows materialized with them — and 120 for the session row each rewrites.
 */
class ByteCounter extends ForwardingStorage {
  streamBytes = 0;
  private counting = false;
  constructor() {
    super(
      memoryStorage({
        onWrite: (row) => {
          if (this.counting) this.streamBytes += JSON.stringify(row.value ?? null).length;
        },
      }),
    );
  }
  override async commit(...args: Parameters<Storage["commit"]>): Promise<void> {
    const deferred = args[1].filter((commit) => commit.deferred).length;
    this.counting = deferred > 0;
    this.streamBytes += 120 * deferred;
    try {
      await this.inner.commit(...args);
    } finally {
      this.counting = false;
    }
  }
}

/** Bytes written to stream a 2,000-character answer (20 characters every 10 ms, 50 ms flushes) vs 2,000. */
export async function streamBench(): Promise<{ ours: number; floor: number }> {
  const { ManualClock, ManualTimers } = await import("../src/index.ts");
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const text = "x".repeat(2_000);
  const storage = new ByteCounter();
  const model = scriptedModel([{ text }], { chunkSize: 20, chunkDelayMs: 10, timers });
  const session = await openSession({
    id: "stream",
    storage,
    registry: createRegistry({ ...createAgent({ model }) }),
    clock,
    timers,
    ids: sequentialIds(),
  });
  await session.resume();
  const s = await session.submit({ requestId: "r", conversationId: "main", input: "go" });
  const done = session.wait(s.id);
  for (let i = 0; i < 400 && session.submission(s.id)?.status !== "succeeded"; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    timers.advance(10);
  }
  await done;
  // The stream's own writes, plus the answer once (its final entry): against the answer's length.
  return { ours: storage.streamBytes + text.length, floor: text.length };
}

/** For checks: a stored session of `count` settled Submissions. */
export function writeHistoryForTest(storage: Storage, sessionId: string, count: number): Promise<void> {
  return writeHistory(storage, sessionId, settledHistory(count));
}
