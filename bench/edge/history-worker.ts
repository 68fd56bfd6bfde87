/**
 * A Worker with one Durable Object class, `HistoryHost`, for measuring a long-lived session inside workerd:
 * `/build?n` writes the history of n settled Submissions straight through the DO SQLite store (500 commits a
 * transaction, the rows a live session writes for them); `/open` opens the session for writing and keeps it
 * open in the object (its heap is then measured from outside, through the inspector); `/view` reports what
 * the open session holds.
 */
import type { DurableObjectStorageLike } from "../../edge/do-sqlite-sql.ts";
import { DurableObjectSqliteStorage } from "../../edge/do-sqlite-storage.ts";
import type { DurableObjectNamespaceLike } from "../../edge/index.ts";
import { createRegistry, openSession, type Session } from "../../src/index.ts";
import { settledHistory } from "../histories.ts";

export class HistoryHost {
  private readonly storage: DurableObjectSqliteStorage;
  private session: Session | undefined;

  constructor(private readonly ctx: { storage: DurableObjectStorageLike }) {
    this.storage = new DurableObjectSqliteStorage(ctx.storage);
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    switch (url.pathname) {
      case "/build": {
        const n = Number(url.searchParams.get("n") ?? 0);
        await this.storage.open("history", { mode: "write", at: 1_000, entryTail: 1, settled: 0 });
        for (let from = 0; from < n; from += 500) {
          const batch = settledHistory(Math.min(500, n - from), from);
          await this.storage.commit({ sessionId: "history", epoch: 1, expectedVersion: from }, batch);
        }
        return new Response(String(n));
      }
      case "/touch":
        // The database file opened and read once (the platform's cost, whatever the session holds).
        return Response.json(this.ctx.storage.sql.exec("SELECT count(*) AS n FROM da_sessions").toArray());
      case "/open": {
        const start = Date.now();
        this.session = await openSession({
          id: "history",
          storage: this.storage,
          registry: createRegistry(),
        });
        return Response.json({ version: this.session.version, ms: Date.now() - start });
      }
      case "/view": {
        const view = this.session?.view();
        return Response.json({
          submissions: view?.submissions.length,
          tasks: view?.tasks.length,
          entries: view?.conversations[0]?.entries.length,
        });
      }
    }
    return new Response("not found", { status: 404 });
  }
}

export default {
  fetch(
    request: Request,
    env: { HISTORY: DurableObjectNamespaceLike<{ fetch(request: Request): Promise<Response> }> },
  ) {
    const name = new URL(request.url).searchParams.get("session") ?? "history";
    return env.HISTORY.get(env.HISTORY.idFromName(name)).fetch(request);
  },
};
