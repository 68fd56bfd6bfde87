/**
 * Trust at the edge, on real workerd with the shipped example: every route × every action × an allowed and
 * a denied principal, path tricks that try to reach another session, stream tokens for EventSource, failed
 * requests that must write nothing, reads that must create nothing, limits, and errors that leak nothing.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { decodeJwt, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EDGE_ACTIONS, type EdgeAction } from "../../edge/index.ts";
import type { Submission } from "../../src/index.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const JWT_SECRET = "jwt-test-secret-that-is-long-enough-for-hs256";
const notice = (requestId: string) => ({
  requestId,
  conversationId: "main",
  input: "Send the approved notice",
});

async function jwt(claims: Record<string, unknown>, expiresIn = "10m", secret = JWT_SECRET): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(String(claims.sub ?? "user"))
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));
}

/** Every route, the action it needs, and how to call it on session `s` (submission `sub`). */
const ROUTES: {
  name: string;
  action: EdgeAction;
  call: (s: string, sub: string) => [string, RequestInit];
}[] = [
  {
    name: "submit",
    action: "submit",
    call: (s) => [`/sessions/${s}/submissions`, { method: "POST", body: JSON.stringify(notice("authz")) }],
  },
  { name: "submission", action: "read", call: (s, sub) => [`/sessions/${s}/submissions/${sub}`, {}] },
  { name: "by requestId", action: "read", call: (s) => [`/sessions/${s}/requests/r1`, {}] },
  {
    name: "cancel",
    action: "cancel",
    call: (s, sub) => [`/sessions/${s}/submissions/${sub}/cancel`, { method: "POST", body: "{}" }],
  },
  { name: "view", action: "read", call: (s) => [`/sessions/${s}/view`, {}] },
  { name: "entries", action: "read", call: (s) => [`/sessions/${s}/conversations/main/entries`, {}] },
  { name: "recovery", action: "admin", call: (s) => [`/sessions/${s}/recovery`, {}] },
  { name: "events", action: "read", call: (s) => [`/sessions/${s}/events`, {}] },
  { name: "stream token", action: "read", call: (s) => [`/sessions/${s}/stream-token`, { method: "POST" }] },
  { name: "pending", action: "read", call: (s) => [`/sessions/${s}/pending`, {}] },
  {
    name: "signal",
    action: "signal",
    call: (s) => [
      `/sessions/${s}/signals/nobody%3A1`,
      { method: "POST", body: JSON.stringify({ requestId: "authz", payload: {} }) },
    ],
  },
  {
    name: "early signals",
    action: "read",
    call: (s) => [`/sessions/${s}/early-signals`, { method: "GET" }],
  },
  {
    name: "drop early signal",
    action: "drop-signal",
    call: (s) => [`/sessions/${s}/signals/nobody%3A1`, { method: "DELETE" }],
  },
  {
    name: "callback url",
    action: "signal",
    call: (s) => [`/sessions/${s}/signals/nobody%3A1/callback-url`, { method: "POST" }],
  },
  {
    name: "replica changes",
    action: "replicate",
    call: (s) => [`/sessions/${s}/replica/changes?after=0`, {}],
  },
  { name: "replica snapshot", action: "replicate", call: (s) => [`/sessions/${s}/replica/snapshot`, {}] },
];

let edge: EdgeExample;
let persist: string;
let submission: Submission;

beforeAll(async () => {
  persist = mkdtempSync(join(tmpdir(), "edge-trust-"));
  edge = await EdgeExample.start(script, {
    persist,
    mailDelayMs: 5,
    vars: { JWT_SECRET, RATE_LIMIT_PER_MINUTE: "100000" },
  });
  submission = await edge.json<Submission>("/sessions/alpha/submissions", { body: notice("r1") });
  await edge.json(`/sessions/alpha/submissions/${submission.id}?wait=20000`);
  await edge.json<Submission>("/sessions/beta/submissions", { body: notice("secret") });
});
afterAll(async () => {
  await edge.dispose();
  rmSync(persist, { recursive: true, force: true });
});

/** Calls `route` on session `s` with `token` (none: no Authorization header), dropping any stream body. */
async function call(route: (typeof ROUTES)[number], s: string, token: string | undefined): Promise<Response> {
  const [path, init] = route.call(s, submission.id);
  const response = await edge.raw(path, {
    ...init,
    headers: {
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
      ...(init.body !== undefined && { "content-type": "application/json" }),
    },
  });
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) await response.body?.cancel();
  return response;
}

describe("authorization per session and action (workerd)", () => {
  it("grants each action only to principals that hold it, for their sessions only", async () => {
    for (const action of EDGE_ACTIONS) {
      const holder = await jwt({ sub: `u-${action}`, sessions: ["alpha"], actions: [action] });
      for (const route of ROUTES) {
        const response = await call(route, "alpha", holder);
        const label = `${action} token on ${route.name}`;
        if (route.action === action) expect([401, 403], label).not.toContain(response.status);
        else {
          expect(response.status, label).toBe(403);
          expect((await response.json()) as { code: string }, label).toMatchObject({ code: "forbidden" });
        }
      }
    }
    const everythingOnBeta = await jwt({ sub: "b", sessions: ["beta"], actions: [...EDGE_ACTIONS] });
    const prefix = await jwt({ sub: "p", sessions: ["alp*"], actions: ["read"] });
    for (const route of ROUTES) {
      expect((await call(route, "alpha", everythingOnBeta)).status, `beta token on ${route.name}`).toBe(403);
      expect((await call(route, "alpha", undefined)).status, `no token on ${route.name}`).toBe(401);
      const expired = await jwt({ sub: "e", sessions: ["alpha"], actions: [route.action] }, "-1m");
      expect((await call(route, "alpha", expired)).status, `expired on ${route.name}`).toBe(401);
      const forged = await jwt(
        { sub: "f", sessions: ["alpha"], actions: [route.action] },
        "10m",
        "other-secret-x",
      );
      expect((await call(route, "alpha", forged)).status, `forged on ${route.name}`).toBe(401);
      expect([401, 403], `root token on ${route.name}`).not.toContain(
        (await call(route, "alpha", EdgeExample.token)).status,
      );
      if (route.action === "read")
        expect([401, 403], `prefix on ${route.name}`).not.toContain(
          (await call(route, "alpha", prefix)).status,
        );
    }
    // A token that names no actions holds every one but those that change what others gave, or the host.
    const unnamed = await jwt({ sub: "u", sessions: ["alpha"] });
    for (const route of ROUTES) {
      const status = (await call(route, "alpha", unnamed)).status;
      const held = !["drop-signal", "replicate", "admin"].includes(route.action);
      if (held) expect([401, 403], `unnamed on ${route.name}`).not.toContain(status);
      else expect(status, `unnamed on ${route.name}`).toBe(403);
    }
  });

  it("grants nothing for a malformed actions claim, and reads the scheme of Authorization in any case", async () => {
    // Only an absent claim means the default actions: "read" for ["read"], or a list with a number in it,
    // must not turn a reader's token into one that submits.
    for (const actions of ["read", ["read", 1], { read: true }, null]) {
      const token = await jwt({ sub: "malformed", sessions: ["alpha"], actions });
      const submit = ROUTES.find((r) => r.name === "submit") as (typeof ROUTES)[number];
      const view = ROUTES.find((r) => r.name === "view") as (typeof ROUTES)[number];
      expect((await call(submit, "alpha", token)).status, JSON.stringify(actions)).toBe(403);
      expect((await call(view, "alpha", token)).status, JSON.stringify(actions)).toBe(403);
    }
    for (const header of [
      `bearer ${EdgeExample.token}`,
      `BEARER ${EdgeExample.token}`,
      `Bearer  ${EdgeExample.token}`,
    ])
      expect(
        (await edge.raw("/sessions/alpha/view?entries=0", { headers: { authorization: header } })).status,
        header,
      ).toBe(200);
    expect((await edge.raw("/sessions/alpha/view", { headers: { authorization: "Basic abc" } })).status).toBe(
      401,
    );
  });

  it("never lets a path trick reach another session", async () => {
    const alphaOnly = await jwt({ sub: "a", sessions: ["alpha"], actions: [...EDGE_ACTIONS] });
    const tricks = [
      "/sessions/alpha/%2e%2e/beta/view",
      "/sessions/alpha/../beta/view",
      "/sessions/alpha%2F..%2Fbeta/view",
      "/sessions/./beta/view",
      "//sessions/beta/view",
      "/sessions/alpha/%2E%2E/%2E%2E/sessions/beta/view",
      "/sessions/be%74a/view",
      "/sessions/beta%00/view",
      "/sessions/alpha%2fbeta/view",
    ];
    for (const path of tricks) {
      const response = await edge.raw(path, { headers: { authorization: `Bearer ${alphaOnly}` } });
      const text = await response.text();
      expect(response.status, path).toBeGreaterThanOrEqual(400);
      expect(text, path).not.toContain("secret"); // beta's only Submission has requestId "secret"
    }
  });

  it("streams to an EventSource with a short-lived read-only token, never the root token in a URL", async () => {
    const reader = await jwt({ sub: "viewer", sessions: ["alpha"], actions: ["read"] });
    const minted = (await (
      await edge.raw("/sessions/alpha/stream-token", {
        method: "POST",
        headers: { authorization: `Bearer ${reader}` },
      })
    ).json()) as { token: string; url: string; expiresAt: number };
    expect(minted.url).toContain("access_token=");
    const stream = await edge.raw(minted.url);
    expect(stream.status).toBe(200);
    expect(stream.headers.get("content-type")).toContain("text/event-stream");
    await stream.body?.cancel();
    // Only for that session's stream, and only for reading it.
    const token = encodeURIComponent(minted.token);
    expect((await edge.raw(`/sessions/beta/events?access_token=${token}`)).status).toBe(401);
    expect((await edge.raw(`/sessions/alpha/view?access_token=${token}`)).status).toBe(401);
    expect((await edge.raw(`/sessions/alpha/events?access_token=${EdgeExample.token}`)).status).toBe(401);
    const submit = await edge.raw(`/sessions/alpha/submissions?access_token=${token}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(notice("via-url")),
    });
    expect(submit.status).toBe(401);
  });

  it("never mints a stream token that outlives the token it was minted with", async () => {
    const mint = async (expiresIn: string) => {
      const reader = await jwt({ sub: "viewer", sessions: ["alpha"], actions: ["read"] }, expiresIn);
      const response = await edge.raw("/sessions/alpha/stream-token", {
        method: "POST",
        headers: { authorization: `Bearer ${reader}` },
      });
      const minted = (await response.json()) as { token: string; expiresAt: number };
      return { ...minted, exp: decodeJwt(minted.token).exp, readerExp: decodeJwt(reader).exp as number };
    };
    // A JWT with a minute left: the stream token ends with it, not five minutes on.
    const short = await mint("60s");
    expect(short.exp).toBe(short.readerExp);
    expect(short.expiresAt).toBe(short.readerExp * 1000);
    // One with an hour left: the stream token's own (short) life.
    const long = await mint("1h");
    expect(long.exp).toBeLessThan(long.readerExp);
  });
});

describe("requests that fail write nothing; reads create nothing (workerd)", () => {
  it("refuses a lone surrogate, a body nested too deep and junk with 400 naming the field, creating no session", async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 300; i++) deep = [deep];
    const bodies: [string, string, string][] = [
      [
        "surrogate",
        JSON.stringify({ requestId: "a", conversationId: "\ud800", input: "hello" }),
        "body.conversationId",
      ],
      [
        "deep",
        JSON.stringify({ requestId: "a", conversationId: "main", input: { text: "x", data: deep } }),
        "body.input",
      ],
      ["junk", "{not json", "body"],
      ["extra", JSON.stringify({ ...notice("a"), admin: true }), "body"],
    ];
    for (const [name, body, path] of bodies) {
      const id = `fail-${name}`;
      const response = await edge.raw(`/sessions/${id}/submissions`, {
        method: "POST",
        headers: { authorization: `Bearer ${EdgeExample.token}`, "content-type": "application/json" },
        body,
      });
      expect(response.status, name).toBe(400);
      const problem = (await response.json()) as {
        code: string;
        errors?: { path: string }[];
        detail: string;
        requestId: string;
      };
      expect(problem.code, name).toBe("invalid-argument");
      expect(
        problem.errors?.some((e) => e.path.startsWith(path)),
        name,
      ).toBe(true);
      expect(problem.detail, name).not.toMatch(/submissions\/|entries\/|sub_|Unexpected token/);
      expect(problem.requestId, name).toBe(response.headers.get("x-request-id"));
      expect((await edge.request(`/sessions/${id}/view`)).status, `${name}: no session`).toBe(404);
    }
  });

  it("refuses a bad signal key, payload, body encoding, cancel reason or Last-Event-ID with 400 naming it, storing nothing", async () => {
    const root = { authorization: `Bearer ${EdgeExample.token}`, "content-type": "application/json" };
    const before = await edge.json<{ version: number }>("/sessions/alpha/view?entries=0");
    const early = await edge.json<unknown>("/sessions/alpha/early-signals");
    const refused = async (label: string, response: Response, path: string) => {
      expect(response.status, label).toBe(400);
      const problem = (await response.json()) as { code: string; errors?: { path: string }[] };
      expect(problem.code, label).toBe("invalid-argument");
      expect(problem.errors?.[0]?.path, label).toBe(path);
    };
    // A malformed escape in the key is not taken as its text (Hono's param() keeps it as "%FF").
    for (const key of ["plan-approval:%FF", "plan-approval%3A%FF", "plan-approval:%ED%A0%80"]) {
      const body = JSON.stringify({ requestId: "k1", payload: { approved: true } });
      await refused(
        key,
        await edge.raw(`/sessions/alpha/signals/${key}`, { method: "POST", headers: root, body }),
        "params.key",
      );
      await refused(
        `${key} drop`,
        await edge.raw(`/sessions/alpha/signals/${key}`, { method: "DELETE", headers: root }),
        "params.key",
      );
    }
    // 5,000 levels (10 KB) would overflow the stack of the call that hands the payload to the session.
    const deep = `{"requestId":"d1","payload":${"[".repeat(5000)}1${"]".repeat(5000)}}`;
    await refused(
      "deep",
      await edge.raw("/sessions/alpha/signals/plan-approval%3Adeep", {
        method: "POST",
        headers: root,
        body: deep,
      }),
      "body.payload",
    );
    // Bytes that are not UTF-8 are refused, never read as U+FFFD: two requestIds that differ only there are two.
    const latin1 = new Uint8Array([
      ...new TextEncoder().encode('{"requestId":"r-'),
      0xff,
      ...new TextEncoder().encode('","conversationId":"main","input":"x"}'),
    ]);
    const submitted = await edge.raw("/sessions/alpha/submissions", {
      method: "POST",
      headers: root,
      body: latin1,
    });
    expect(submitted.status).toBe(400);
    expect(await submitted.json()).toMatchObject({ errors: [{ path: "body", message: "not valid UTF-8" }] });
    const cancel = await edge.raw(`/sessions/alpha/submissions/${submission.id}/cancel`, {
      method: "POST",
      headers: root,
      body: '{"reason":"\\ud800"}',
    });
    await refused("cancel reason", cancel, "body.reason");
    const ahead = await edge.raw("/sessions/alpha/events", {
      headers: { ...root, "last-event-id": "99999999" },
    });
    await refused("last-event-id", ahead, "headers.last-event-id");
    const aheadQuery = await edge.raw("/sessions/alpha/events?since=99999999", { headers: root });
    await refused("since", aheadQuery, "query.since");
    expect(await edge.json<{ version: number }>("/sessions/alpha/view?entries=0")).toMatchObject({
      version: before.version,
    });
    expect(await edge.json<unknown>("/sessions/alpha/early-signals")).toEqual(early);
  });

  it("answers reads, streams and previews of unknown sessions with 404 and stores nothing", async () => {
    const reads = [
      "view",
      "events",
      "recovery",
      "requests/x",
      "submissions/sub_1",
      "conversations/main/entries",
      "submissions",
      "tree?root=x",
      "pending",
      "early-signals",
      "replica",
      "replica/snapshot",
    ];
    for (let i = 0; i < 20; i++) {
      for (const path of reads) {
        const response = await edge.request(`/sessions/ghost-${i}/${path}`);
        expect(response.status, path).toBe(404);
        await response.body?.cancel();
      }
      // workerd gives every object it starts a database of its own; ours must stay empty: no table, no row.
      expect(await edge.json<string[]>(`/__tables/ghost-${i}`)).toEqual([]);
    }
    expect(await edge.json<string[]>("/__tables/alpha")).toEqual(["da_sessions", "da_rows"]);
    for (const name of ["surrogate", "deep", "junk", "extra"])
      expect(await edge.json<string[]>(`/__tables/fail-${name}`), name).toEqual([]);
  });
});

describe("limits per session and caller (workerd)", () => {
  it("caps open streams and waiting requests per session with 429 + Retry-After", async () => {
    await edge.json("/sessions/streams/submissions", { body: notice("s1") });
    // Real connections (a client that goes away closes its own), not the runtime's in-process dispatch.
    const aborts: AbortController[] = [];
    const open = () => {
      const abort = new AbortController();
      aborts.push(abort);
      return fetch(`${edge.url}/sessions/streams/events`, {
        headers: { authorization: `Bearer ${EdgeExample.token}` },
        signal: abort.signal,
      });
    };
    for (let i = 0; i < 16; i++) expect((await open()).status).toBe(200);
    const refused = await open();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    expect(((await refused.json()) as { code: string }).code).toBe("rate-limited");
    // Clients that go away free their slots (found out at the latest by the next heartbeats, 5 s apart).
    for (const abort of aborts.splice(0)) abort.abort();
    let again = await open();
    for (let attempt = 0; attempt < 100 && again.status !== 200; attempt++) {
      await again.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 250));
      again = await open();
    }
    expect(again.status).toBe(200);
    for (const abort of aborts) abort.abort();

    const waiting = Array.from({ length: 32 }, () =>
      edge.request("/sessions/streams/view?atLeast=999999&wait=3000"),
    );
    await new Promise((resolve) => setTimeout(resolve, 300)); // let them all arrive and start waiting
    const extra = await edge.request("/sessions/streams/view?atLeast=999999&wait=3000");
    expect(extra.status).toBe(429);
    expect((await Promise.all(waiting)).map((r) => r.status)).toEqual(Array(32).fill(200));
  });

  it("reads no body of a request before it is authorized: a stranger's endless replica push is refused at once", async () => {
    // Real connections, sending a body with no length (the push route takes 4 MiB) that never ends.
    const push = (authorization: Record<string, string>, chunks: number) => {
      let pulled = 0;
      const body = new ReadableStream<Uint8Array>({
        pull: async (controller) => {
          if (pulled++ < chunks) controller.enqueue(new Uint8Array(64 * 1024).fill(0x20));
          else await new Promise(() => undefined);
        },
      });
      return fetch(`${edge.url}/sessions/alpha/replica/push`, {
        method: "POST",
        headers: { "content-type": "application/json", ...authorization },
        body,
        duplex: "half",
        signal: AbortSignal.timeout(5_000),
      } as RequestInit);
    };
    const stranger = await push({}, 1);
    expect(stranger.status).toBe(401);
    await stranger.body?.cancel();
    // Authorized, the push's own bound still holds for a body without a length.
    const tooLarge = await push({ authorization: `Bearer ${EdgeExample.token}` }, 80);
    expect(tooLarge.status).toBe(413);
    expect(((await tooLarge.json()) as { code: string }).code).toBe("body-too-large");
  });

  it("holds a session's cap on unfinished submissions after a restart, and for submissions sent at once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edge-trust-cap-"));
    const start = () =>
      EdgeExample.start(script, {
        persist: dir,
        mailDelayMs: 60_000,
        vars: { RATE_LIMIT_PER_MINUTE: "100000" },
      });
    const submit = (runtime: EdgeExample, session: string, i: number) =>
      runtime.request(`/sessions/${session}/submissions`, {
        body: { ...notice(`q${i}`), conversationId: `c${i}` },
      });
    let runtime = await start();
    try {
      // Sent at once to a new session: no more than the cap are accepted.
      const burst = await Promise.all(Array.from({ length: 70 }, (_, i) => submit(runtime, "burst", i)));
      const accepted = burst.filter((r) => r.status === 202).length;
      expect(burst.every((r) => r.status === 202 || r.status === 429)).toBe(true);
      expect(accepted).toBe(64);
      await Promise.all(burst.map((r) => r.body?.cancel()));
      await runtime.dispose(); // evicted with 64 unfinished: the object that comes back has not opened it yet
      runtime = await start();
      const after = await Promise.all([100, 101, 102].map((i) => submit(runtime, "burst", i)));
      expect(after.map((r) => r.status)).toEqual([429, 429, 429]);
      // A retry of an accepted requestId is still answered.
      const retried = burst.findIndex((r) => r.status === 202);
      expect((await submit(runtime, "burst", retried)).status).toBe(202);
    } finally {
      await runtime.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("limits each caller's request rate and refuses new work past a session's unfinished submissions", async () => {
    const slow = await EdgeExample.start(script, {
      mailDelayMs: 60_000,
      vars: { RATE_LIMIT_PER_MINUTE: "100", JWT_SECRET },
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 70; i++) {
        // Each in its own conversation, so none is answered by the previous turn: all stay unfinished.
        const body = { ...notice(`q${i}`), conversationId: `c${i}` };
        const response = await slow.request("/sessions/busy/submissions", { body });
        statuses.push(response.status);
        if (response.status === 429) {
          const problem = (await response.json()) as { code: string; detail: string };
          expect(problem.detail).toContain("unfinished submissions");
        }
      }
      expect(statuses.slice(0, 64).every((s) => s === 202)).toBe(true);
      expect(statuses.slice(64).every((s) => s === 429)).toBe(true);
      // A retry of an accepted requestId is always answered, however full the session is.
      const retry = { ...notice("q3"), conversationId: "c3" };
      expect((await slow.request("/sessions/busy/submissions", { body: retry })).status).toBe(202);
      let limited: Response | undefined;
      for (let i = 0; i < 40 && limited === undefined; i++) {
        const response = await slow.request("/sessions/busy/view");
        if (response.status === 429) limited = response;
        else await response.body?.cancel();
      }
      if (!limited) throw new Error("the caller was never rate-limited");
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(((await limited.json()) as { detail: string }).detail).toContain("this caller");
      // Listing sessions is counted too, before the directory is read, for a token scoped to a few sessions
      // (it is no principal of the directory's: its bucket is its own).
      const scoped = await jwt({ sub: "lister", sessions: ["busy"], actions: ["read"] });
      const lists: number[] = [];
      for (let i = 0; i < 110 && !lists.includes(429); i++) {
        const response = await slow.raw("/sessions?limit=500", {
          headers: { authorization: `Bearer ${scoped}` },
        });
        lists.push(response.status);
        await response.body?.cancel();
      }
      expect(lists.at(-1)).toBe(429);
      expect(lists.slice(0, -1).every((s) => s === 200)).toBe(true);
    } finally {
      await slow.dispose();
    }
  });
});
