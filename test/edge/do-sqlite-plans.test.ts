/**
 * How workerd's SQLite plans the Durable Object store's batched and combined statements, on the store's own
 * schema (its partial indexes included): each row is found by its primary key, never by scanning a
 * session's rows. A plan that scans costs nothing in a small test and seconds in a session of 100,000 rows
 * (the batched delete written as `session = ? AND (… OR …)` planned as such a scan: a 15,000-wait setup
 * went from 2.4 to 18 s, and workerd reset the object's isolate).
 */
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteRows, READ_WAITING_TREE, SCHEMA, upsertRows } from "../../edge/do-sqlite-storage.ts";

const script = /* js */ `
export class Planner {
  constructor(state) {
    this.sql = state.storage.sql;
  }
  async fetch(request) {
    const { schema, statement, bindings } = await request.json();
    for (const text of schema) this.sql.exec(text);
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

async function planOf(statement: string, bindings: unknown[]): Promise<string[]> {
  const response = await workerd.dispatchFetch("http://planner/", {
    method: "POST",
    body: JSON.stringify({ schema: SCHEMA, statement, bindings }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as string[];
}

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

  it("reads a parked wait's key, task and children by key", async () => {
    const steps = rowSteps(await planOf(READ_WAITING_TREE, ["s", "k:1"]));
    expect(steps.length).toBe(5);
    for (const step of steps)
      expect(step).toMatch(/^SEARCH da_rows USING PRIMARY KEY \(session=\? AND tbl=\? AND id=\?/);
  });
});
