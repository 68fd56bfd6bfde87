/**
 * The Worker the edge benchmarks run on workerd:
 * - `CommitBench` (a Durable Object): `/ours?n&from` runs n workload commits through a Session over the
 *   DO SQLite store; `/raw?n&from` writes exactly the rows those commits write, one raw `transactionSync`
 *   per commit, into the same tables of the same object.
 * - `BenchSession`: the edge session object with a scripted one-tool agent, behind the shipped router;
 *   `/__ping/:session` is a bare round trip to the same object (it touches no session).
 */
import { z } from "zod";
import { DurableObjectSqliteStorage, type DurableObjectStorageLike } from "../../edge/do-sqlite-storage.ts";
import { createEdgeApp, type DurableObjectNamespaceLike, defineSessionObject } from "../../edge/index.ts";
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
import { rowsOfCommit } from "../../src/storage/rows.ts";
import { benchRegistry, commitStep, renumber } from "../workload.ts";

interface Env {
  readonly SESSIONS: DurableObjectNamespaceLike;
  readonly COMMITS: DurableObjectNamespaceLike;
  readonly API_TOKEN: string;
}

export class CommitBench {
  private readonly storage: DurableObjectSqliteStorage;
  private session: Session | undefined;
  private template: CommitRecord[] = [];

  constructor(private readonly ctx: { storage: DurableObjectStorageLike }) {
    this.storage = new DurableObjectSqliteStorage(ctx.storage);
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? 0);
    const from = Number(url.searchParams.get("from") ?? 0);
    if (url.pathname === "/ping") return new Response("pong");
    if (url.pathname === "/setup") {
      this.session = await openSession({
        id: "ours",
        storage: this.storage,
        registry: benchRegistry,
        ids: sequentialIds(),
      });
      for (let i = 0; i < 50; i++) await commitStep(this.session, i);
      this.template = (await this.session.readChanges(0, 50)).changes;
      await this.storage.open("raw", { mode: "write", at: Date.now(), entryTail: 1 });
      this.raw(renumber(this.template, 0, 50));
      return new Response("ready");
    }
    if (url.pathname === "/ours" && this.session) {
      for (let i = 0; i < n; i++) await commitStep(this.session, from + i);
      return new Response(String(this.session.version));
    }
    if (url.pathname === "/raw") {
      this.raw(renumber(this.template, from, n));
      return new Response("ok");
    }
    return new Response("not found", { status: 404 });
  }

  /** One transactionSync per commit: read the session row, write the commit's rows, write the session row. */
  private raw(commits: readonly CommitRecord[]): void {
    const { sql } = this.ctx.storage;
    for (const commit of commits) {
      this.ctx.storage.transactionSync(() => {
        const meta = sql.exec("SELECT v FROM da_sessions WHERE id = ?", "raw").toArray()[0];
        for (const row of rowsOfCommit(commit)) {
          const [id, n] = row.table === "changes" ? ["", row.key[0]] : [row.key[0], row.key[1] ?? -1];
          sql.exec(
            "INSERT OR REPLACE INTO da_rows (session, tbl, id, n, v) VALUES (?, ?, ?, ?, ?)",
            "raw",
            row.table,
            id,
            n,
            JSON.stringify(row.value),
          );
        }
        const value = {
          ...(JSON.parse(String(meta?.v)) as object),
          version: commit.version,
          updatedAt: commit.at,
        };
        sql.exec("INSERT OR REPLACE INTO da_sessions (id, v) VALUES (?, ?)", "raw", JSON.stringify(value));
      });
    }
  }
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

const SessionBase = defineSessionObject<Env>({ registry: () => oneToolRegistry() });

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
    if (url.pathname.startsWith("/commit/")) {
      const stub = env.COMMITS.get(env.COMMITS.idFromName("bench"));
      return stub.fetch(new Request(`https://commit${url.pathname.slice("/commit".length)}${url.search}`));
    }
    return app.fetch(request, env, ctx as never);
  },
};
