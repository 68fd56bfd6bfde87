/**
 * agent/tool-call-vs-minimal: the workload every durable agent framework can run — one Submission, 100
 * model rounds of 3 no-op tool calls (run in parallel), every step durable before the next — through
 * `createAgent` + `scriptedModel`, as ms per tool call; the floor is one raw transaction writing a 300-byte
 * record on the same store in the same run (a tool call "close to one raw durable write" means a ratio
 * near 1). Also counts what the kernel writes: rows and bytes per tool call.
 *
 * Runs anywhere the store runs (Node with fake-indexeddb, Chromium); no Node APIs here.
 */
import { z } from "zod";
import {
  type CommitGuard,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  type Model,
  openSession,
  type ScriptedTurn,
  type Storage,
  scriptedModel,
} from "../src/index.ts";
import type { WriteHook } from "../src/storage/memory-storage.ts";
import type { RowWrite } from "../src/storage/rows.ts";
import { ForwardingStorage } from "../test/support/storage-wrappers.ts";
import { median } from "./workload.ts";

export const ROUNDS = 100;
export const PER_ROUND = 3;
const RECORD = "x".repeat(280);

const noop = defineTool({
  name: "noop",
  description: "Does nothing",
  input: z.object({ n: z.number() }),
  replay: "unsafe",
  execute: async ({ n }) => ({ n }),
});

/** 100 rounds of 3 tool calls, then an answer. */
export function toolCallModel(rounds = ROUNDS, perRound = PER_ROUND): Model {
  const turns: ScriptedTurn[] = Array.from({ length: rounds }, () => ({
    toolCalls: Array.from({ length: perRound }, (_, n) => ({ name: "noop", args: { n } })),
  }));
  turns.push({ text: "done" });
  return scriptedModel(turns);
}

/**
 * Counts what the store writes: transactions (each also writes the session row), commits, and the rows the
 * store reports to its write hook (create-only rows, change-log rows, rows materialized from the log) with
 * their JSON bytes. Rows are kept by reference and measured after the run (`count()`), so counting costs
 * the timed run next to nothing.
 */
export class WriteCounter extends ForwardingStorage {
  private transactions = 0;
  private commits = 0;
  private readonly rows: RowWrite[];
  /** The session row's JSON bytes, as stored after the run (`measureSessionRow`). */
  private sessionRowBytes = 0;
  constructor(make: (onWrite: WriteHook) => Storage) {
    const rows: RowWrite[] = [];
    super(make((row) => void rows.push(row)));
    this.rows = rows;
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    this.transactions++;
    this.commits += commits.length;
    await this.inner.commit(guard, commits);
  }
  override async checkpoint(guard: CommitGuard): Promise<void> {
    this.transactions++;
    await this.inner.checkpoint?.(guard);
  }
  /**
   * Reads the session row as the run left it: every transaction writes it once (its numbers only grow, so
   * its last size counts each write at most as large as it was).
   */
  async measureSessionRow(sessionId: string): Promise<void> {
    const stored = await this.inner.open(sessionId, { mode: "read", at: 0, entryTail: 0, settled: 0 });
    this.sessionRowBytes = new TextEncoder().encode(JSON.stringify(stored?.meta.value)).length;
  }
  count(): { transactions: number; commits: number; rows: number; bytes: number } {
    const encoder = new TextEncoder();
    // The session row, once per transaction.
    let bytes = this.transactions * this.sessionRowBytes;
    for (const row of this.rows)
      if (row.op !== "delete") bytes += encoder.encode(JSON.stringify(row.value)).length;
    return {
      transactions: this.transactions,
      commits: this.commits,
      rows: this.rows.length + this.transactions,
      bytes,
    };
  }
}

export interface ToolCallRun {
  readonly ms: number;
  readonly toolCalls: number;
  readonly transactions: number;
  readonly commits: number;
  readonly rows: number;
  readonly bytes: number;
}

/** Makes a fresh store that reports each row it writes to `onWrite`. */
export type CountedStore = (onWrite: WriteHook) => Storage;

/** One run of the workload on a fresh store. */
export async function runToolCalls(
  store: CountedStore,
  rounds = ROUNDS,
  sessionId = "bench",
): Promise<ToolCallRun> {
  const { ms, toolCalls, counter } = await runWorkload(store, rounds, sessionId);
  await counter.measureSessionRow(sessionId);
  return { ms, toolCalls, ...counter.count() };
}

/**
 * The workload alone: the counter is read afterwards (closing the session writes the log's tail into rows,
 * counted too: it is written sooner or later).
 */
export async function runWorkload(store: CountedStore, rounds = ROUNDS, sessionId = "bench") {
  const storage = new WriteCounter(store);
  const agent = createAgent({ model: toolCallModel(rounds), tools: [noop], maxRounds: rounds + 1 });
  const session = await openSession({ id: sessionId, storage, registry: createRegistry({ ...agent }) });
  await session.resume();
  const start = performance.now();
  const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
  const done = await session.wait(sub.id);
  const ms = performance.now() - start;
  if (done.status !== "succeeded") throw new Error(`the run ended ${done.status}`);
  await session.close();
  return { ms, toolCalls: rounds * PER_ROUND, counter: storage };
}

/** A raw store: one durable write of a 300-byte record. */
export interface RawWriter {
  write(i: number, record: string): Promise<void>;
  close(): Promise<void> | void;
}

/** ms per raw transaction over `n` writes. */
export async function rawWrites(writer: RawWriter, n: number, from = 0): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) await writer.write(from + i, RECORD);
  return (performance.now() - start) / n;
}

/** A raw IndexedDB writer: one readwrite transaction putting one 300-byte record. */
export async function rawIndexedDb(
  name: string,
  durability: "strict" | "relaxed",
  factory: IDBFactory = indexedDB,
): Promise<RawWriter> {
  const db = await new Promise<IDBDatabase>((resolve, reject) => {
    const request = factory.open(name, 1);
    request.onupgradeneeded = () => request.result.createObjectStore("steps");
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  return {
    write: (i, record) =>
      new Promise<void>((resolve, reject) => {
        const tx = db.transaction("steps", "readwrite", { durability });
        tx.objectStore("steps").put({ step: i, at: i, record }, i);
        tx.oncomplete = () => resolve();
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error);
      }),
    close: () => db.close(),
  };
}

export interface ToolCallResult {
  /** ms per tool call, median of rounds. */
  readonly ours: number;
  /** ms per raw 300-byte transaction, median of rounds. */
  readonly floor: number;
  readonly run: ToolCallRun;
}

/**
 * Alternates the workload and the raw writes, `rounds` times; medians of each. `store` makes a fresh
 * store per run; `raw` opens the raw writer once.
 */
export async function compareToolCalls(
  store: (i: number, onWrite: WriteHook) => Storage,
  raw: () => Promise<RawWriter>,
  rounds = 5,
  gc: () => void = () => undefined,
): Promise<ToolCallResult> {
  await runToolCalls((onWrite) => store(-1, onWrite), 30); // warm-up: JIT, connections
  const writer = await raw();
  await rawWrites(writer, 100);
  const ours: number[] = [];
  const floor: number[] = [];
  let last: ToolCallRun | undefined;
  try {
    for (let r = 0; r < rounds; r++) {
      gc();
      last = await runToolCalls((onWrite) => store(r, onWrite));
      ours.push(last.ms / last.toolCalls);
      gc();
      floor.push(await rawWrites(writer, last.toolCalls, (r + 1) * 1000));
    }
  } finally {
    await writer.close();
  }
  if (!last) throw new Error("no rounds");
  return { ours: median(ours), floor: median(floor), run: last };
}
