/**
 * Retention at the edge (issue 16): the shipped example on real workerd with `KEEP_SETTLED=3` removes
 * finished Submissions from the Durable Object's SQLite as work finishes, while a retry of a removed
 * requestId is refused (never run again) and the kept ones stay readable.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Submission } from "../../src/index.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const notice = (requestId: string) => ({
  requestId,
  conversationId: "main",
  input: "Send the approved notice",
});

describe("retention in a Durable Object (workerd)", () => {
  let edge: EdgeExample;
  beforeAll(async () => {
    edge = await EdgeExample.start(script, { vars: { KEEP_SETTLED: "3" } });
  });
  afterAll(() => edge.dispose());

  it("keeps only the latest finished Submissions in storage; a removed requestId is not run again", async () => {
    const done: Submission[] = [];
    for (let n = 0; n < 20; n++) {
      const response = await edge.request("/sessions/kept/submissions?wait=20000", { body: notice(`r${n}`) });
      done.push((await response.json()) as Submission);
    }
    expect(done.map((s) => s.status)).toEqual(done.map(() => "succeeded"));
    // Automatic collection ran in the object once 16 had finished: the oldest are gone from its SQLite.
    const first = await edge.request(`/sessions/kept/submissions/${done[0]?.id}`);
    expect(first.status).toBe(404);
    const last = await edge.json<Submission>(`/sessions/kept/submissions/${done[19]?.id}`);
    expect(last).toEqual(done[19]);
    const deliveries = await edge.json<unknown[]>("/mail/deliveries");
    const retry = await edge.request("/sessions/kept/submissions?wait=20000", { body: notice("r0") });
    expect(retry.status).toBe(409);
    expect(await retry.json()).toMatchObject({ code: "duplicate-request" });
    expect(await edge.json<unknown[]>("/mail/deliveries")).toEqual(deliveries); // nothing sent again
  });
});
