/**
 * The Worker the edge benchmarks run on workerd:
 * - `CommitBench` (a Durable Object class): in one object `/ours?n&from` runs n workload commits through a
 *   Session over the DO SQLite store; in another `/raw?n&from` writes exactly the rows those commits write,
 *   one raw `transactionSync` per commit, into the same tables. With `&durable`, each commit is followed by
 *   `storage.sync()`, so each is its own durable SQLite commit (as a phase that ends after I/O commits).
 * - `BenchSession`: the edge session object with a scripted one-tool agent, behind the shipped router;
 *   `/__ping/:session` is a bare round trip to the same object (it touches no session).
 */
import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import type { DurableObjectStorageLike } from "../../edge/do-sqlite-sql.ts";
import { DurableObjectSqliteStorage } from "../../edge/do-sqlite-storage.ts";
import { createEdgeApp, type DurableObjectNamespaceLike, defineSessionObject } from "../../edge/index.ts";

type FetchStub = { fetch(request: Request): Promise<Response> };

import {
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  openSession,
  type Session,
  scriptedModel,
  sequentialIds,
} from "../../src/index.ts";
import { pruneChangesThrough } from "../../src/storage/change-log.ts";
import { documentRowsObsoleteBelow } from "../../src/storage/rows.ts";
import { DEFAULT_RETAIN_CHANGES } from "../../src/storage/storage.ts";
import { PAYLOAD, signalRegistry } from "../signals.ts";
import { rawWrites, runWorkload, type WriteCounter } from "../tool-call.ts";
import { benchRegistry, commitStep, floorRowsOf, renumber } from "../workload.ts";

/** `ctx.storage` as this bench uses it: the store's parts plus `sync()` (wait until writes are durable). */
type BenchStorage = DurableObjectStorageLike & { sync(): Promise<void> };

interface Env {
  readonly SESSIONS: DurableObjectNamespaceLike;
  readonly COMMITS: DurableObjectNamespaceLike<FetchStub>;
  readonly API_TOKEN: string;
}

/** Each key's wait continuing: resolved as its next phase starts (that phase then holds: it commits nothing). */
const continued = new Map<string, () => void>();
const waitsRegistry = signalRegistry((key) => continued.get(key)?.(), true);

export class CommitBench {
  private readonly storage: DurableObjectSqliteStorage;
  private session: Session | undefined;
  /** The signal benchmarks' session (`/waits-*`): waits on `k:<name>:<n>`. */
  private waits: Session | undefined;
  private template: CommitRecord[] = [];
  private runs = 0;
  /** What the last `/toolcalls` run wrote, read by `/toolcalls-count`. */
  private counted:
    | { counting: ReturnType<typeof countingSql>; counter: WriteCounter; sessionId: string }
    | undefined;

  constructor(private readonly ctx: { storage: BenchStorage }) {
    this.storage = new DurableObjectSqliteStorage(ctx.storage);
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? 0);
    const from = Number(url.searchParams.get("from") ?? 0);
    const durable = url.searchParams.has("durable");
    switch (url.pathname) {
      case "/ping":
        return new Response("pong");
      case "/setup-ours": {
        this.session = await openSession({
          id: "bench",
          storage: this.storage,
          registry: benchRegistry,
          ids: sequentialIds(),
        });
        for (let i = 0; i < 50; i++) await commitStep(this.session, i);
        return Response.json((await this.session.readChanges(0, 50)).changes);
      }
      case "/setup-raw": {
        this.template = (await request.json()) as CommitRecord[];
        await this.storage.open("bench", { mode: "write", at: Date.now(), entryTail: 1, settled: 0 });
        for (const commit of renumber(this.template, 0, 50)) this.raw(commit);
        return new Response("ready");
      }
      case "/ours":
        if (!this.session) break;
        for (let i = 0; i < n; i++) {
          await commitStep(this.session, from + i);
          if (durable) await this.ctx.storage.sync();
        }
        return new Response(String(this.session.version));
      case "/toolcalls": {
        // The agent workload in a fresh session of this object. What it wrote is counted by the next
        // request (`/toolcalls-count`), so counting is not timed with the run.
        const counting = countingSql(this.ctx.storage);
        const sessionId = `tool-calls-${this.runs++}`;
        const { toolCalls, counter } = await runWorkload(
          (onWrite) => new DurableObjectSqliteStorage(counting.storage, { onWrite }),
          n || undefined,
          sessionId,
        );
        this.counted = { counting, counter, sessionId };
        return Response.json({ toolCalls });
      }
      case "/toolcalls-count": {
        // The last run's rows, bytes and transactions; rows also as SQLite counts them (index rows
        // included, as the platform bills them).
        if (!this.counted) break;
        const { counting, counter, sessionId } = this.counted;
        await counter.measureSessionRow(sessionId);
        return Response.json({ ...counter.count(), sqliteRowsWritten: counting.rowsWritten() });
      }
      case "/rawsteps": {
        const { sql } = this.ctx.storage;
        sql.exec("CREATE TABLE IF NOT EXISTS bench_steps (step INTEGER PRIMARY KEY, v TEXT NOT NULL)");
        const writer = {
          write: async (i: number, record: string) =>
            this.ctx.storage.transactionSync(() => {
              sql.exec(
                "INSERT OR REPLACE INTO bench_steps (step, v) VALUES (?, ?)",
                i,
                JSON.stringify({ step: i, at: i, record }),
              );
            }),
          close: () => undefined,
        };
        return Response.json({ ms: await rawWrites(writer, n, from) });
      }
      case "/waits-setup":
        // A session of n waits (past `liveWaits`, 100, they are parked: left in storage).
        this.waits = await openSession({ id: "waits", storage: this.storage, registry: waitsRegistry });
        await this.waits.resume();
        await this.spawnWaits(url.searchParams.get("name") ?? "", 0, n);
        // Opened again, as after an eviction: the parked waits stay in storage (the live ones are loaded).
        await this.waits.close();
        this.waits = await openSession({ id: "waits", storage: this.storage, registry: waitsRegistry });
        await this.waits.resume();
        return Response.json({ live: this.waits.pending().length, parked: this.waits.parkedInStorage });
      case "/waits-spawn":
        await this.spawnWaits(url.searchParams.get("name") ?? "", from, n);
        return new Response("ok");
      case "/waits-signal": {
        // n signals, each awaited to its commit, and with `&phase` to its wait's next phase starting.
        if (!this.waits) break;
        const name = url.searchParams.get("name") ?? "";
        for (let i = from; i < from + n; i++) {
          const key = `k:${name}:${i}`;
          const going = new Promise<void>((resolve) => continued.set(key, resolve));
          await this.waits.signal(key, PAYLOAD, { requestId: `r${i}` });
          if (url.searchParams.has("phase")) await going;
          continued.delete(key);
        }
        return new Response("ok");
      }
      case "/waits-plain":
        // n plain commits of the same payload, in the same session.
        if (!this.waits) break;
        for (let i = 0; i < n; i++)
          await this.waits.commit((draft) =>
            draft.appendEntry("log", { kind: "note", text: JSON.stringify(PAYLOAD) }),
          );
        return new Response("ok");
      case "/raw":
        for (const commit of renumber(this.template, from, n)) {
          this.raw(commit);
          if (durable) await this.ctx.storage.sync();
        }
        return new Response("ok");
    }
    return new Response("not found", { status: 404 });
  }

  /** Spawns waits on `k:<name>:<from>`… (n of them), and returns once each waits. */
  private async spawnWaits(name: string, from: number, n: number): Promise<void> {
    const session = this.waits as Session;
    const keys = new Set<string>();
    for (let i = from; i < from + n; i += 500) {
      await session.commit((draft) => {
        for (let j = i; j < Math.min(from + n, i + 500); j++) {
          draft.spawn("waiter", { key: `k:${name}:${j}` });
          keys.add(`k:${name}:${j}`);
        }
      });
    }
    // Each starts waiting in a commit of its own first phase (this session holds even the parked ones). Not
    // `whenIdle()`: the waits signalled before hold their next phase, so the session is never idle.
    while (session.pending().filter((wait) => keys.has(wait.key)).length < n)
      await new Promise((resolve) => setTimeout(resolve, 1));
  }

  /**
   * One transactionSync per commit: read the session row, write the commit's rows, delete the document rows
   * a baseline makes obsolete and, every PRUNE_EVERY versions, the change-log rows beyond the retained ones,
   * write the session row (the statements the kernel's store runs).
   */
  private raw(commit: CommitRecord): void {
    const { sql } = this.ctx.storage;
    this.ctx.storage.transactionSync(() => {
      const meta = sql.exec("SELECT v FROM da_sessions WHERE id = ?", "bench").toArray()[0];
      for (const row of floorRowsOf(commit)) {
        const [id, n] = row.table === "changes" ? ["", row.key[0]] : [row.key[0], row.key[1] ?? -1];
        sql.exec(
          "INSERT OR REPLACE INTO da_rows (session, tbl, id, n, v) VALUES (?, ?, ?, ?, ?)",
          "bench",
          row.table,
          id,
          n,
          JSON.stringify(row.value),
        );
      }
      for (const change of commit.documents) {
        const below = documentRowsObsoleteBelow(change);
        if (below === undefined) continue;
        sql.exec(
          "DELETE FROM da_rows WHERE session = ? AND tbl = 'documentRows' AND id = ? AND n < ?",
          "bench",
          change.id,
          below,
        );
      }
      const through = pruneChangesThrough(commit.version, DEFAULT_RETAIN_CHANGES);
      if (through !== undefined) {
        sql.exec(
          "DELETE FROM da_rows WHERE session = ? AND tbl = 'changes' AND id = '' AND n <= ?",
          "bench",
          through,
        );
      }
      const value = {
        ...(JSON.parse(String(meta?.v)) as object),
        version: commit.version,
        updatedAt: commit.at,
      };
      sql.exec("INSERT OR REPLACE INTO da_sessions (id, v) VALUES (?, ?)", "bench", JSON.stringify(value));
    });
  }
}

/** `storage` with every statement's cursor kept, to sum the rows SQLite wrote. */
function countingSql(storage: BenchStorage) {
  const cursors: { rowsWritten?: number }[] = [];
  const sql = {
    exec(query: string, ...bindings: unknown[]) {
      const cursor = storage.sql.exec(query, ...bindings);
      cursors.push(cursor as { rowsWritten?: number });
      return cursor;
    },
  };
  return {
    storage: { sql, transactionSync: <T>(closure: () => T) => storage.transactionSync(closure) },
    rowsWritten: () => cursors.reduce((sum, cursor) => sum + (cursor.rowsWritten ?? 0), 0),
  };
}

/** A one-tool agent: look a value up, then answer with it. */
function oneToolRegistry() {
  const lookup = defineTool({
    name: "lookup",
    description: "Look up a value",
    input: z.object({ key: z.string() }),
    replay: "safe",
    execute: ({ key }) => ({ key, value: key.length }),
  });
  const model = scriptedModel([
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "Found it." }
        : { toolCalls: [{ name: "lookup", args: { key: "answer" } }] },
  ]);
  return createRegistry({ ...createAgent({ model, tools: [lookup] }) });
}

const SessionBase = defineSessionObject<Env>(DurableObject, { registry: () => oneToolRegistry() });

export class BenchSession extends SessionBase {
  override fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname === "/__ping") return Promise.resolve(new Response("pong"));
    return super.fetch(request);
  }
}

const app = createEdgeApp<Env>();
app.get("/__ping/:id", (c) =>
  c.env.SESSIONS.get(c.env.SESSIONS.idFromName(c.req.param("id"))).fetch(
    new Request("https://session.internal/__ping"),
  ),
);

export default {
  fetch(request: Request, env: Env, ctx: unknown): Response | Promise<Response> {
    const url = new URL(request.url);
    // /commit/<object>/<action>: `ours` and `raw` each run in their own object of the same class, so each
    // database holds one session, as in production (SQLite appends at the right edge of a B-tree cost
    // less than inserts in the middle: two sessions in one database would favour whichever sorts last).
    const commit = /^\/commit\/(\w+)(\/.*)$/.exec(url.pathname);
    if (commit) {
      const stub = env.COMMITS.get(env.COMMITS.idFromName(commit[1] as string));
      return stub.fetch(new Request(`https://commit${commit[2]}${url.search}`, request));
    }
    return app.fetch(request, env, ctx as never);
  },
};
