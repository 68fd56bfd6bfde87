/**
 * The fuzz harness as a test: a seeded generator (fast-check) of malformed and hostile requests against the
 * shipped example on real workerd. No answer is a 5xx; every 4xx is problem+json with a code and a request
 * id; afterwards every accepted Submission is retrievable, versions only grew, every view equals the fold
 * of its event stream, and no session exists that only failed requests touched.
 *
 * `FUZZ_REQUESTS=20000 FUZZ_SEED=7 npx vitest run --project edge test/edge/edge-fuzz.test.ts` runs more.
 */
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  applyChangeToView,
  type CommitRecord,
  emptyView,
  type SessionView,
  type Submission,
} from "../../src/index.ts";
import { bundleWorker, EdgeExample, readEvents } from "../support/workerd.ts";

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2_000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));

const GOOD_SESSIONS = ["fz-a", "fz-b", "fz-c"];

/** Percent-encodes anything, a lone surrogate included (as the invalid UTF-8 a hostile client would send). */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return [...text].map((c) => (/[\ud800-\udfff]/.test(c) ? "%ED%A0%80" : encodeURIComponent(c))).join("");
  }
}
const weirdText = fc.oneof(
  fc.constantFrom(
    "",
    " ",
    "%2e%2e",
    "..",
    "a/b",
    "\u0000",
    "\ud800",
    "😀",
    "é",
    "x".repeat(300),
    "%zz",
    "a?b",
    "a#b",
  ),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 8 }),
);
const sessionSegment = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...GOOD_SESSIONS) },
  { weight: 1, arbitrary: fc.constantFrom("fz-ghost-1", "fz-ghost-2") },
  { weight: 3, arbitrary: weirdText.map(encode) },
  { weight: 1, arbitrary: fc.constantFrom("fz-a/%2e%2e/fz-b", "fz-a%2F..%2Ffz-b", "..%2Ffz-b") },
);
const queryValue = fc.oneof(
  fc.constantFrom("0", "1", "-1", "abc", "1e3", "999999999999999999", "25000", "25001", "", "12.5"),
  weirdText.map(encode),
);
const routeOf = (s: string) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constant(`/sessions/${s}/submissions`) },
    fc.constant(`/sessions/${s}/view`),
    fc.constant(`/sessions/${s}/events`),
    fc.constant(`/sessions/${s}/recovery`),
    fc.constant(`/sessions/${s}/stream-token`),
    fc.constantFrom("sub_1", "x", "%00").map((sub) => `/sessions/${s}/submissions/${sub}`),
    fc.constantFrom("sub_1", "x").map((sub) => `/sessions/${s}/submissions/${sub}/cancel`),
    weirdText.map((r) => `/sessions/${s}/requests/${encode(r)}`),
    weirdText.map((c) => `/sessions/${s}/conversations/${encode(c) || "main"}/entries`),
    fc.constantFrom("/", "/sessions", `/sessions/${s}`, "/mail/deliveries", "/nope"),
  );
let deep: unknown = 1;
for (let i = 0; i < 400; i++) deep = { d: deep };
const goodBody = fc.record({
  requestId: fc.integer({ min: 1, max: 40 }).map((n) => `r${n}`),
  conversationId: fc.constantFrom("main", "side"),
  input: fc.constantFrom("Send the approved notice", "hi"),
});
const body = fc.oneof(
  { weight: 4, arbitrary: goodBody.map((b) => JSON.stringify(b)) },
  { weight: 1, arbitrary: goodBody.map((b) => JSON.stringify({ ...b, extra: 1 })) },
  { weight: 1, arbitrary: goodBody.map((b) => JSON.stringify({ ...b, conversationId: "\ud800" })) },
  { weight: 1, arbitrary: goodBody.map((b) => JSON.stringify({ ...b, input: { text: "x", data: deep } })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom("{", "null", "[]", "42", '"s"', "{}", '{"reason":5}', "x".repeat(70_000)),
  },
  { weight: 1, arbitrary: fc.json({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);
const request = sessionSegment.chain((s) =>
  fc.record({
    method: fc.constantFrom("GET", "GET", "POST", "POST", "PUT", "DELETE"),
    path: routeOf(s),
    query: fc.array(
      fc.tuple(
        fc.constantFrom("wait", "since", "atLeast", "limit", "before", "entries", "tasks"),
        queryValue,
      ),
      {
        maxLength: 3,
      },
    ),
    auth: fc.constantFrom(
      "good",
      "good",
      "good",
      "good",
      "none",
      "wrong",
      "Basic abc",
      "Bearer",
      "Bearer \u00e9",
    ),
    contentType: fc.constantFrom("application/json", "application/json", "text/plain", undefined),
    lastEventId: fc.option(queryValue, { nil: undefined }),
    body,
  }),
);

let edge: EdgeExample;
beforeAll(async () => {
  edge = await EdgeExample.start(script, { mailDelayMs: 1, vars: { RATE_LIMIT_PER_MINUTE: "1000000" } });
});
afterAll(() => edge.dispose());

describe("edge API under fuzzed hostile requests (workerd)", () => {
  it(`answers ${REQUESTS} seeded hostile requests without a 5xx, and keeps every invariant`, async () => {
    const requests = fc.sample(request, { numRuns: REQUESTS, seed: SEED });
    const accepted = new Map<string, Submission>(); // by session + requestId
    const touchedOk = new Set<string>();
    const touchedFailed = new Set<string>();
    const versions = new Map<string, number[]>();
    for (const [i, r] of requests.entries()) {
      const query = r.query.map(([k, v]) => `${k}=${v}`).join("&");
      const path = query ? `${r.path}?${query}` : r.path;
      const headers: Record<string, string> = {};
      if (r.auth === "good") headers.authorization = `Bearer ${EdgeExample.token}`;
      else if (r.auth === "wrong") headers.authorization = "Bearer not-the-token";
      else if (r.auth !== "none") headers.authorization = r.auth;
      if (r.contentType) headers["content-type"] = r.contentType;
      if (r.lastEventId !== undefined) headers["last-event-id"] = r.lastEventId;
      const label = `request ${i} (seed ${SEED}): ${r.method} ${path}`;
      let response: Response;
      try {
        response = await edge.raw(path, {
          method: r.method,
          headers,
          ...(r.body !== undefined && r.method !== "GET" && { body: r.body }),
        });
      } catch (error) {
        // A header the fetch client itself refuses to send (not a server answer).
        if (String(error).includes("header")) continue;
        // An oversize body the server refused (413) before the client had finished sending it.
        if ((r.body?.length ?? 0) > 64 * 1024 && String((error as Error).cause).includes("ECONNRESET"))
          continue;
        throw new Error(`${label}: ${String(error)}`, { cause: error });
      }
      expect(response.status, label).toBeLessThan(500);
      const type = response.headers.get("content-type") ?? "";
      // The session a request really reached: its path as the URL parser normalizes it (`a/%2e%2e/b` is b).
      const effective = new URL(r.path, "http://edge.test").pathname;
      const session = /^\/sessions\/(fz-[a-z0-9-]+)\//.exec(effective)?.[1];
      if (type.startsWith("text/event-stream")) await response.body?.cancel();
      else if (response.status >= 400) {
        expect(type, label).toContain("application/problem+json");
        const problem = (await response.json()) as { code?: unknown; requestId?: unknown; detail?: unknown };
        expect(typeof problem.code, label).toBe("string");
        expect(problem.requestId, label).toBe(response.headers.get("x-request-id"));
        expect(String(problem.detail), label).not.toMatch(/SQLITE|at \w+ \(|Unexpected token|da_rows/);
        if (session) touchedFailed.add(session);
      } else {
        const json = (await response.json().catch(() => undefined)) as
          | { version?: number }
          | Submission
          | undefined;
        // Minting a stream token proves nothing about the session; every other success does.
        if (session && !effective.endsWith("/stream-token")) touchedOk.add(session);
        if (session && effective.endsWith("/view") && typeof (json as SessionView)?.version === "number") {
          const list = versions.get(session) ?? [];
          list.push((json as SessionView).version);
          versions.set(session, list);
        }
        if (session && r.method === "POST" && effective.endsWith("/submissions")) {
          const submission = json as Submission;
          const known = accepted.get(`${session}/${submission.requestId}`);
          if (known)
            expect(submission.id, `${label}: the same requestId, the same Submission`).toBe(known.id);
          accepted.set(`${session}/${submission.requestId}`, submission);
        }
      }
    }
    expect(accepted.size).toBeGreaterThan(10);
    for (const [key, submission] of accepted) {
      const session = key.split("/")[0];
      const ended = await edge.json<Submission>(
        `/sessions/${session}/submissions/${submission.id}?wait=20000`,
      );
      expect(ended.requestId).toBe(submission.requestId);
    }
    for (const [session, seen] of versions)
      expect(seen, `${session}: versions only grow`).toEqual([...seen].sort((a, b) => a - b));
    for (const session of touchedOk) {
      const view = await edge.json<SessionView>(`/sessions/${session}/view`);
      let folded = emptyView(session);
      const stream = await edge.request(`/sessions/${session}/events?since=0`);
      await readEvents(stream, (event) => {
        if (event.event === "commit")
          folded = applyChangeToView(folded, JSON.parse(event.data) as CommitRecord);
        return folded.version >= view.version;
      });
      expect(folded.version, session).toBe(view.version);
      expect({ ...folded, blocked: [] }, `${session}: the view equals the fold of its events`).toEqual({
        ...view,
        blocked: [],
      });
    }
    for (const session of [...touchedFailed, "fz-ghost-1", "fz-ghost-2"].filter((s) => !touchedOk.has(s))) {
      const probe = await edge.request(`/sessions/${session}/view`);
      expect(probe.status, `${session} was only touched by failed requests: it must not exist`).toBe(404);
    }
  }, 600_000);
});
