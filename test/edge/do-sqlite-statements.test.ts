/**
 * How workerd's SQLite plans the Durable Object store's batched and combined statements, on the store's own
 * schema (its partial indexes included): each row is found by its primary key, never by scanning a
 * session's rows. A plan that scans costs nothing in a small test and seconds in a session of 100,000 rows
 * (the batched delete written as `session = ? AND (… OR …)` planned as such a scan: a 15,000-wait setup
 * went from 2.4 to 18 s, and workerd reset the object's isolate).
 */
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteRows, READ_WAITING_TREE, SCHEMA, upsertRows } from "../../edge/do-sqlite-sql.ts";

const script = /* js */ `
export class Planner {
  constructor(state) {
    this.sql = state.storage.sql;
  }
  async fetch(request) {
    const { schema, rows, statement, bindings, explain } = await request.json();
    for (const text of schema) this.sql.exec(text);
    this.sql.exec("DELETE FROM da_rows");
    for (const row of rows) this.sql.exec("INSERT INTO da_rows VALUES (?, ?, ?, ?, ?)", ...row);
    if (!explain) return Response.json(this.sql.exec(statement, ...bindings).toArray());
    const plan = this.sql.exec("EXPLAIN QUERY PLAN " + statement, ...bindings).toArray();
    return Response.json(plan.map((step) => step.detail));
  }
}
export default {
  fetch(request, env) {
    return env.PLANNER.get(env.PLANNER.idFromName("plans")).fetch(request);
  },
};
`;

let workerd: Miniflare;

beforeAll(async () => {
  workerd = new Miniflare({
    modules: true,
    script,
    compatibilityDate: "2026-04-01",
    durableObjects: { PLANNER: { className: "Planner", useSQLite: true } },
  });
  await workerd.ready;
});

afterAll(async () => {
  await workerd.dispose();
});

async function run(statement: string, bindings: unknown[], explain: boolean, rows: unknown[][] = []) {
  const response = await workerd.dispatchFetch("http://planner/", {
    method: "POST",
    body: JSON.stringify({ schema: SCHEMA, rows, statement, bindings, explain }),
  });
  expect(response.status).toBe(200);
  return response.json();
}

const planOf = async (statement: string, bindings: unknown[]) =>
  (await run(statement, bindings, true)) as string[];

/** The steps that read `da_rows`: each must seek by the primary key down to `id` at least. */
const rowSteps = (plan: string[]) => plan.filter((step) => step.includes("da_rows"));

describe("the Durable Object store's statements, as workerd plans them", () => {
  it("deletes a batch of rows by their whole keys", async () => {
    for (const count of [1, 2, 4, 8, 16]) {
      const bindings = Array.from({ length: count }, (_, i) => ["s", "waitKeys", `k:${i}`, -1]).flat();
      const steps = rowSteps(await planOf(deleteRows(count), bindings));
      expect(steps).toEqual(["SEARCH da_rows USING PRIMARY KEY (session=? AND tbl=? AND id=? AND n=?)"]);
    }
  });

  it("writes a batch of rows without reading any", async () => {
    const bindings = Array.from({ length: 16 }, (_, i) => ["s", "tasks", `t${i}`, -1, "{}"]).flat();
    expect(rowSteps(await planOf(upsertRows(16), bindings))).toEqual([]);
  });

  it("reads a parked wait's key index row, its task and children; a key row that is not JSON comes back as it is", async () => {
    const rows = [
      ["s", "waitKeys", "k:1", -1, JSON.stringify("t1")],
      ["s", "tasks", "t1", -1, '{"id":"t1"}'],
      ["s", "children", "t1", 0, '["c0","c1"]'],
      ["s", "children", "t2", 0, '["x"]'],
      ["s", "waitKeys", "k:bad", -1, "not json"],
    ];
    const read = async (key: string) =>
      ((await run(READ_WAITING_TREE, ["s", key], false, rows)) as { tbl: string; id: string }[]).map(
        (row) => `${row.tbl} ${row.id}`,
      );
    expect(await read("k:1")).toEqual(["waitKeys k:1", "tasks t1", "children t1"]);
    // Loaded as text (the store then reads no tree for it), not a failed statement: a read of many keys
    // together must not fail for one corrupt row.
    expect(await read("k:bad")).toEqual(["waitKeys k:bad"]);
    expect(await read("k:none")).toEqual([]);
  });

  it("plans the read of a parked wait's key, task and children by key", async () => {
    const steps = rowSteps(await planOf(READ_WAITING_TREE, ["s", "k:1"]));
    expect(steps.length).toBe(5);
    for (const step of steps)
      expect(step).toMatch(/^SEARCH da_rows USING PRIMARY KEY \(session=\? AND tbl=\? AND id=\?/);
  });
});
