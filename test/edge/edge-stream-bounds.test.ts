/**
 * An event stream's backlog bound on real workerd: it cuts off a client that falls behind, never one commit
 * on its own. A commit larger than the bound (three entries of 1.5 MB, each in a row of its own) still
 * reaches the client, which then goes on to the commits after it.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MAX_QUEUED_BYTES } from "../../edge/sse.ts";
import type { CommitRecord, Submission } from "../../src/index.ts";
import { bundleWorker, EdgeExample, readEvents, startWorkerd } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/big-commit.ts", import.meta.url)));
const CHARS = 1_500_000;
let workerd: ReturnType<typeof startWorkerd>;
const auth = { authorization: `Bearer ${EdgeExample.token}`, "content-type": "application/json" };
const request = (path: string, init: { method?: string; body?: string } = {}) =>
  workerd.dispatchFetch(`http://edge.test${path}`, { ...init, headers: auth } as never);

beforeAll(async () => {
  workerd = startWorkerd(script, { SESSIONS: "AgentSession" }, undefined, { API_TOKEN: EdgeExample.token });
  await workerd.ready;
});
afterAll(() => workerd.dispose());

it("streams a commit larger than the backlog bound, then the ones after it", async () => {
  const submit = async (requestId: string, chars: number) => {
    const body = { requestId, conversationId: "main", input: { text: "write", data: { chars } } };
    const response = await request("/sessions/big/submissions?wait=20000", {
      method: "POST",
      body: JSON.stringify(body),
    });
    const submission = (await response.json()) as Submission;
    expect(submission.status).toBe("succeeded");
  };
  await submit("large", CHARS);
  await submit("small", 1);
  const { version } = (await (await request("/sessions/big/view?entries=0")).json()) as { version: number };

  // Followed as an EventSource does: each stream the server ends is opened again after the last id seen.
  const seen: CommitRecord[] = [];
  for (let connections = 0; connections < 5 && seen.at(-1)?.version !== version; connections++) {
    const last = seen.at(-1)?.version;
    const response = await workerd.dispatchFetch("http://edge.test/sessions/big/events?since=0", {
      headers: { ...auth, ...(last !== undefined && { "last-event-id": String(last) }) },
    });
    expect(response.status).toBe(200);
    await readEvents(response as unknown as Response, (event) => {
      if (event.event === "commit") seen.push(JSON.parse(event.data) as CommitRecord);
      return seen.at(-1)?.version === version;
    });
  }
  // Every commit once, in order, through the last one: no reconnect ended at the large commit again.
  expect(seen.map((commit) => commit.version)).toEqual(Array.from({ length: version }, (_, i) => i + 1));
  const large = seen.find((commit) => commit.entries.some((entry) => entry.content.kind === "note"));
  expect(JSON.stringify(large).length).toBeGreaterThan(MAX_QUEUED_BYTES);
  expect(large?.entries.filter((entry) => entry.content.kind === "note")).toHaveLength(3);
});
