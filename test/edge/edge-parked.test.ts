/**
 * Parked waits at the edge, in real workerd (DO SQLite, alarms): a session whose waits are parked opens
 * without them after a runtime restart, lists them over `GET …/pending` from storage a page at a time, hands
 * a signal to one it reads back by its key, and passes a parked deadline on the alarm with no request sent.
 * Signals no wait has taken are bounded, listed, dropped on request, and dropped on the alarm when their time
 * runs out.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import type { CommitRecord, PendingWait, SessionView, Submission, Task } from "../../src/index.ts";
import { bundleWorker, readEvents, startWorkerd } from "../support/workerd.ts";

interface PendingPage {
  version: number;
  pending: PendingWait[];
  parked: number;
  next: string | null;
}

it("lists parked waits from storage after a restart, signals one by key, and passes one's deadline on the alarm", async () => {
  const script = await bundleWorker(fileURLToPath(new URL("./fixtures/waiter.ts", import.meta.url)));
  const persist = mkdtempSync(join(tmpdir(), "edge-parked-"));
  const start = () =>
    startWorkerd(script, { SESSIONS: "AgentSession" }, persist, { API_TOKEN: "t", WAIT_DEADLINE_MS: "4000" });
  const call = async <T>(runtime: ReturnType<typeof start>, path: string, body?: unknown) => {
    const response = await runtime.dispatchFetch(`http://edge.test${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: "Bearer t", "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as T };
  };
  let runtime = start();
  try {
    const created = await call<Submission>(runtime, "/sessions/parked/submissions", {
      requestId: "r1",
      conversationId: "main",
      input: { text: "start" },
    });
    expect(created.status).toBe(202);
    await call<Submission>(runtime, `/sessions/parked/submissions/${created.body.id}?wait=10000`);
    const before = (await call<PendingPage>(runtime, "/sessions/parked/pending")).body;
    expect(before.pending.map((w) => w.key)).toEqual(["k:0", "k:1", "k:2", "k:3", "k:4"]);
    const until = before.pending.find((w) => w.key === "k:4")?.until ?? 0;
    expect(until).toBeGreaterThan(Date.now());
    // Still in this object's memory (parked while it ran): a page holds no more than asked all the same.
    const warm = (await call<PendingPage>(runtime, "/sessions/parked/pending?limit=2")).body;
    expect(warm.pending.map((w) => w.key)).toEqual(["k:3", "k:4"]);
    expect(warm.next).not.toBeNull();
    await runtime.dispose(); // evicted: the parked waits and the deadline's alarm are all that is left
    runtime = start();

    // Reopened, the session holds none of them in memory; they are listed from storage, two a page.
    const view = (await call<SessionView>(runtime, "/sessions/parked/view")).body;
    expect(view.tasks.filter((t) => t.kind === "waiter")).toEqual([]);
    // The view's ETag is weak: a parked wait read back (below) shows in the body at the same version.
    const viewed = await runtime.dispatchFetch("http://edge.test/sessions/parked/view", {
      headers: { authorization: "Bearer t" },
    });
    await viewed.arrayBuffer();
    expect(viewed.headers.get("etag")).toBe(`W/"v${view.version}"`);
    const listed: PendingWait[] = [];
    let page = (await call<PendingPage>(runtime, "/sessions/parked/pending?limit=2")).body;
    expect(page.parked).toBe(5);
    for (let n = 0; n < 10; n++) {
      listed.push(...page.pending);
      if (page.next === null) break;
      page = (
        await call<PendingPage>(
          runtime,
          `/sessions/parked/pending?limit=2&before=${encodeURIComponent(page.next)}`,
        )
      ).body;
    }
    expect(listed.map((w) => w.key).sort()).toEqual(["k:0", "k:1", "k:2", "k:3", "k:4"]);
    const only = (await call<PendingPage>(runtime, "/sessions/parked/pending?prefix=k%3A3")).body;
    expect(only.pending.map((w) => w.key)).toEqual(["k:3"]);
    expect(listed.find((w) => w.key === "k:2")).toEqual(before.pending.find((w) => w.key === "k:2"));
    const bad = await call<{ errors: { path: string }[] }>(runtime, "/sessions/parked/pending?limit=0");
    expect(bad.status).toBe(400);
    const badCursor = await call<{ errors: { path: string }[] }>(
      runtime,
      "/sessions/parked/pending?before=x",
    );
    expect(badCursor.status).toBe(400);
    // A version past what a page can name is refused the same way, naming the query field.
    const huge = await call<{ errors: { path: string }[] }>(
      runtime,
      `/sessions/parked/pending?before=${encodeURIComponent("99999999999999999999/x")}`,
    );
    expect(huge.status).toBe(400);
    expect(huge.body.errors[0]?.path).toBe(badCursor.body.errors[0]?.path);
    // Any id may end a page, a line break in it too.
    const odd = encodeURIComponent("1/a\nb");
    expect((await call<PendingPage>(runtime, `/sessions/parked/pending?before=${odd}`)).status).toBe(200);

    // Signals no wait has taken are bounded (this app keeps two): the next is refused, nothing stored.
    const early = { requestId: "e1", payload: { answer: "early" } };
    expect((await call(runtime, "/sessions/parked/signals/k%3A90", early)).status).toBe(201);
    const second = { requestId: "e3", payload: { answer: "second" } };
    expect((await call(runtime, "/sessions/parked/signals/k%3A92", second)).status).toBe(201);
    const version = (await call<SessionView>(runtime, "/sessions/parked/view")).body.version;
    const full = await call<{ code: string; detail: string }>(runtime, "/sessions/parked/signals/k%3A91", {
      requestId: "e2",
      payload: { answer: "too many" },
    });
    expect(full).toMatchObject({ status: 429, body: { code: "early-signals-full" } });
    expect(full.body.detail).toContain("k:91");
    expect((await call<SessionView>(runtime, "/sessions/parked/view")).body.version).toBe(version);
    // The kept ones are listed a page at a time, and dropped on request; a second drop finds none.
    type EarlyPage = { count: number; earlySignals: { key: string }[]; next: number | null };
    const first = await call<EarlyPage>(runtime, "/sessions/parked/early-signals?limit=1");
    expect(first.body).toMatchObject({ count: 2, earlySignals: [{ key: "k:90" }] });
    const rest = await call<EarlyPage>(
      runtime,
      `/sessions/parked/early-signals?limit=1&after=${first.body.next}`,
    );
    expect(rest.body).toMatchObject({ count: 2, earlySignals: [{ key: "k:92" }], next: null });
    expect((await call(runtime, "/sessions/parked/early-signals?limit=0")).status).toBe(400);
    const drop = async (key: string, token = "t") => {
      const response = await runtime.dispatchFetch(
        `http://edge.test/sessions/parked/signals/${encodeURIComponent(key)}`,
        { method: "DELETE", headers: { authorization: `Bearer ${token}` } },
      );
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    expect((await drop("k:90", "wrong")).status).toBe(401);
    expect(await drop("k:90")).toMatchObject({
      status: 200,
      body: { dropped: { key: "k:90", requestId: "e1" } },
    });
    expect(await drop("k:90")).toMatchObject({ status: 404, body: { code: "no-early-signal" } });
    expect((await drop("k:92")).status).toBe(200);
    expect((await drop("x".repeat(300))).status).toBe(400);
    // One kept a second at most: dropped by the alarm alone, below.
    const soon = { requestId: "g1", payload: { answer: "soon" } };
    expect((await call(runtime, "/sessions/parked/signals/gone%3A1", soon)).status).toBe(201);
    // A signal for a parked wait reads it back by its key and continues it, the bound full or not.
    const signalled = await call<{ takenBy: string }>(runtime, "/sessions/parked/signals/k%3A2", {
      requestId: "s2",
      payload: { answer: "two" },
    });
    expect(signalled).toMatchObject({ status: 201, body: { takenBy: "wait-2" } });
    const after = (await call<PendingPage>(runtime, "/sessions/parked/pending")).body;
    expect(after.pending.map((w) => w.key).sort()).toEqual(["k:0", "k:1", "k:3", "k:4"]);

    await runtime.dispose();
    runtime = start();
    // Nothing touches the session until well after the parked deadline: the alarm alone must pass it.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now()) + 2000));
    const askedAt = Date.now();
    const tasks = (await call<SessionView>(runtime, "/sessions/parked/view")).body.tasks;
    const late = tasks.find((t) => t.id === "wait-4") as Task;
    expect(late.state).toEqual({ status: "succeeded", result: { via: "deadline" } });
    expect(late.updatedAt).toBeGreaterThanOrEqual(until);
    expect(late.updatedAt).toBeLessThan(askedAt - 500);
    const left = (await call<PendingPage>(runtime, "/sessions/parked/pending")).body;
    expect(left.pending.map((w) => w.key).sort()).toEqual(["k:0", "k:1", "k:3"]);
    // The early signal's time ran out while nothing touched the session: the alarm dropped it then.
    const none = await call<{ earlySignals: unknown[] }>(runtime, "/sessions/parked/early-signals");
    expect(none.body.earlySignals).toEqual([]);
    let droppedAt: number | undefined;
    const events = await runtime.dispatchFetch("http://edge.test/sessions/parked/events?since=0", {
      headers: { authorization: "Bearer t" },
    });
    await readEvents({ body: events.body as ReadableStream<Uint8Array> | null }, (event) => {
      const commit = event.event === "commit" ? (JSON.parse(event.data) as CommitRecord) : undefined;
      if (commit?.droppedSignals?.some((d) => d.key === "gone:1")) droppedAt = commit.at;
      return droppedAt !== undefined;
    });
    expect(droppedAt).toBeLessThan(askedAt - 500);
  } finally {
    await runtime.dispose();
    rmSync(persist, { recursive: true, force: true });
  }
}, 90_000);

it('refuses the keys "." and ".." (no URL can name them), while other keys that start with "." work', async () => {
  const script = await bundleWorker(fileURLToPath(new URL("./fixtures/waiter.ts", import.meta.url)));
  const runtime = startWorkerd(script, { SESSIONS: "AgentSession" }, undefined, {
    API_TOKEN: "t",
    WAIT_DEADLINE_MS: "60000",
  });
  const call = async <T>(path: string, body?: unknown) => {
    const response = await runtime.dispatchFetch(`http://edge.test${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: "Bearer t", "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as T };
  };
  const waitOn = async (key: string, n: number) => {
    const input = { text: `wait on ${key}`, data: { wait: key } };
    const sub = await call<Submission>("/sessions/dots/submissions", {
      requestId: `w${n}`,
      conversationId: `c${n}`,
      input,
    });
    return (await call<Submission>(`/sessions/dots/submissions/${sub.body.id}?wait=2000`)).body;
  };
  try {
    await call("/sessions/dots/submissions", { requestId: "r0", conversationId: "main", input: "start" });
    // A URL's path drops such a segment (`…/signals/..` is `…/`, `%2E` too): the wait ends at once, saying so.
    for (const [n, key] of [".", ".."].entries()) {
      const ended = await waitOn(key, n);
      expect(ended.status).toBe("failed");
      expect(JSON.stringify(ended)).toContain("a URL");
    }
    const { pending } = (await call<PendingPage>("/sessions/dots/pending?limit=50")).body;
    expect(pending.map((w) => w.key)).not.toContain(".");
    expect(pending.map((w) => w.key)).not.toContain("..");
    // A key that only starts with a dot is a segment like any other: waited on and answered by its URL.
    const waiting = await call<Submission>("/sessions/dots/submissions", {
      requestId: "w9",
      conversationId: "c9",
      input: { text: "wait on .x", data: { wait: ".x" } },
    });
    const answered = await call("/sessions/dots/signals/.x", { requestId: "s1", payload: { answer: "yes" } });
    expect(answered.status).toBe(201);
    const ended = await call<Submission>(`/sessions/dots/submissions/${waiting.body.id}?wait=10000`);
    expect(ended.body.status).toBe("succeeded");
  } finally {
    await runtime.dispose();
  }
});
