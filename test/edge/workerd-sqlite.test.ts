/**
 * Edge tier smoke test: a real workerd (through miniflare) with a SQLite-backed Durable Object, checking the
 * platform guarantees the edge host relies on: `transactionSync` is atomic and data survives a restart.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterAll, describe, expect, it } from "vitest";
import { DO_SQLITE_MAX_ROW_BYTES } from "../../edge/index.ts";

const script = /* js */ `
export class Probe {
  constructor(state) {
    this.sql = state.storage.sql;
    this.storage = state.storage;
    this.sql.exec("CREATE TABLE IF NOT EXISTS rows (k TEXT PRIMARY KEY, v TEXT NOT NULL)");
  }
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/big") {
      try {
        this.sql.exec("INSERT OR REPLACE INTO rows VALUES (?, ?)", "big", "x".repeat(Number(url.searchParams.get("n"))));
      } catch (error) {
        return new Response(String(error.message), { status: 500 });
      }
      return new Response("ok");
    }
    if (url.pathname === "/put") {
      const fail = url.searchParams.get("fail") === "1";
      try {
        this.storage.transactionSync(() => {
          this.sql.exec("INSERT OR REPLACE INTO rows VALUES (?, ?)", url.searchParams.get("k"), url.searchParams.get("v"));
          if (fail) throw new Error("abort inside the transaction");
        });
      } catch (error) {
        return new Response(String(error.message), { status: 500 });
      }
      return new Response("ok");
    }
    if (url.pathname === "/create") {
      // As the edge store writes a create-only row: the count of rows written, read without iterating.
      const cursor = this.sql.exec(
        "INSERT INTO rows VALUES (?, ?) ON CONFLICT (k) DO NOTHING",
        url.searchParams.get("k"),
        url.searchParams.get("v"),
      );
      return Response.json({ rowsWritten: cursor.rowsWritten });
    }
    const rows = this.sql.exec("SELECT k, v FROM rows ORDER BY k").toArray();
    return Response.json(rows);
  }
}
export default {
  fetch(request, env) {
    return env.PROBE.get(env.PROBE.idFromName("one")).fetch(request);
  },
};
`;

const persist = mkdtempSync(join(tmpdir(), "workerd-"));
const start = () =>
  new Miniflare({
    modules: true,
    script,
    compatibilityDate: "2026-04-01",
    durableObjects: { PROBE: { className: "Probe", useSQLite: true } },
    durableObjectsPersist: persist,
  });

afterAll(() => rmSync(persist, { recursive: true, force: true }));

describe("workerd Durable Object SQLite", () => {
  it("rolls back a failed transactionSync and keeps committed rows across a runtime restart", async () => {
    const first = start();
    expect(await (await first.dispatchFetch("http://do/put?k=a&v=1")).text()).toBe("ok");
    const failed = await first.dispatchFetch("http://do/put?k=b&v=2&fail=1");
    expect(failed.status).toBe(500);
    await failed.text();
    await first.dispose();

    const second = start();
    const rows = await (await second.dispatchFetch("http://do/list")).json();
    expect(rows).toEqual([{ k: "a", v: "1" }]);
    await second.dispose();
  });

  it("counts a create-only insert as written when its key is new, and as nothing when the key exists", async () => {
    const runtime = start();
    const create = async (k: string, v: string) =>
      (await (await runtime.dispatchFetch(`http://do/create?k=${k}&v=${v}`)).json()) as {
        rowsWritten: number;
      };
    expect((await create("c", "first")).rowsWritten).toBeGreaterThan(0);
    expect(await create("c", "second")).toEqual({ rowsWritten: 0 });
    const rows = (await (await runtime.dispatchFetch("http://do/list")).json()) as { k: string; v: string }[];
    expect(rows.find((row) => row.k === "c")).toEqual({ k: "c", v: "first" });
    await runtime.dispose();
  });

  it("holds a row of the size the edge store allows, and refuses a larger one (SQLITE_TOOBIG)", async () => {
    const runtime = start();
    const put = async (bytes: number) => {
      const response = await runtime.dispatchFetch(`http://do/big?n=${bytes}`);
      return { status: response.status, text: await response.text() };
    };
    expect(await put(DO_SQLITE_MAX_ROW_BYTES)).toEqual({ status: 200, text: "ok" });
    const refused = await put(2_300_000);
    expect(refused.status).toBe(500);
    expect(refused.text).toContain("SQLITE_TOOBIG");
    await runtime.dispose();
  });
});
