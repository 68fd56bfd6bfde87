/**
 * Waits on people at the edge, on real workerd with the shipped example (`PLAN_APPROVAL=ask`): the
 * campaign's approval is pending over HTTP, answered by `POST …/signals/:key` or by a third party's
 * callback URL, refused with the right 4xx (nothing stored) when it is wrong, and it survives a runtime
 * restart — its deadline fired by the Durable Object's alarm with no request sent.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createParser } from "eventsource-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CommitRecord, PendingWait, SessionView, Submission } from "../../src/index.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const SECRET = "callback-secret-for-tests";
const KEY = "plan-approval:plan";
const notice = (requestId: string) => ({
  requestId,
  conversationId: "main",
  input: "Send the approved notice",
});

async function pendingOf(edge: EdgeExample, session: string): Promise<PendingWait[]> {
  for (let i = 0; i < 200; i++) {
    const { pending } = await edge.json<{ pending: PendingWait[] }>(`/sessions/${session}/pending`);
    if (pending.length > 0) return pending;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${session}: nothing became pending`);
}

const signal = (edge: EdgeExample, session: string, key: string, body: unknown) =>
  edge.request(`/sessions/${session}/signals/${encodeURIComponent(key)}`, { body });

describe("durable waits at the edge", () => {
  let edge: EdgeExample;
  beforeAll(async () => {
    edge = await EdgeExample.start(script, {
      vars: { PLAN_APPROVAL: "ask", SIGNAL_CALLBACK_SECRET: SECRET },
    });
  });
  afterAll(() => edge.dispose());

  it("lists the pending approval, refuses bad decisions with the right 4xx, and runs once approved", async () => {
    const accepted = await edge.json<Submission>("/sessions/ask/submissions", { body: notice("r1") });
    const [pending] = await pendingOf(edge, "ask");
    expect(pending).toMatchObject({ key: KEY, kind: "email-campaign", about: { plan: "plan" } });
    expect(await edge.deliveries()).toEqual([]);
    const before = (await edge.json<SessionView>("/sessions/ask/view")).version;

    const wrongShape = await signal(edge, "ask", KEY, { requestId: "a1", payload: { approved: "yes" } });
    expect(wrongShape.status).toBe(400);
    expect((await wrongShape.json()).errors).toEqual([
      { path: "payload.approved", message: expect.any(String) },
    ]);
    const noPayload = await signal(edge, "ask", KEY, { requestId: "a1" });
    expect(noPayload.status).toBe(400);
    expect((await noPayload.json()).errors[0].path).toBe("body.payload");
    const unknown = await signal(edge, "ask", "nobody:1", { requestId: "a1", payload: {} });
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).code).toBe("unknown-signal");
    // An approval key of a tool call this session never had: not found either.
    const noCall = await signal(edge, "ask", "approval:no-such-call", {
      requestId: "a1",
      payload: { approved: true },
    });
    expect(noCall.status).toBe(404);
    expect((await noCall.json()).code).toBe("wait-not-found");
    const long = await signal(edge, "ask", KEY, {
      requestId: "a1",
      payload: { approved: true, reason: "x".repeat(60_000) },
    });
    expect(long.status).toBe(400);
    expect((await long.json()).errors[0].path).toBe("payload.reason");
    // Over the body limit: refused with 413, or cut off (ECONNRESET) before the client finished sending.
    const huge = await signal(edge, "ask", KEY, {
      requestId: "a1",
      payload: { approved: true, reason: "x".repeat(70_000) },
    }).catch((error: Error) =>
      String(error.cause).includes("ECONNRESET") ? undefined : Promise.reject(error),
    );
    if (huge) expect(huge.status).toBe(413);
    const otherSession = await signal(edge, "nowhere", KEY, { requestId: "a1", payload: { approved: true } });
    expect(otherSession.status).toBe(404);
    expect((await edge.json<SessionView>("/sessions/ask/view")).version).toBe(before); // nothing stored

    const approved = await signal(edge, "ask", KEY, { requestId: "a1", payload: { approved: true } });
    expect(approved.status).toBe(201);
    expect(await approved.json()).toMatchObject({
      duplicate: false,
      signal: { key: KEY, payload: { approved: true } },
    });
    const repeat = await signal(edge, "ask", KEY, { requestId: "a1", payload: { approved: true } });
    expect(repeat.status).toBe(200);
    expect((await repeat.json()).duplicate).toBe(true);
    const conflict = await signal(edge, "ask", KEY, { requestId: "a2", payload: { approved: false } });
    expect(conflict.status).toBe(409);
    const refusal = await conflict.json();
    expect(refusal.code).toBe("signal-conflict");
    // The first signal's requestId is its sender's, not this caller's to learn.
    expect(refusal.detail).toContain("already received a different signal");
    expect(refusal.detail).not.toContain("a1");

    const done = await edge.json<Submission>(`/sessions/ask/submissions/${accepted.id}?wait=20000`);
    expect(done.status).toBe("succeeded");
    expect((await edge.deliveries()).length).toBe(5);
    expect((await edge.json<{ pending: PendingWait[] }>("/sessions/ask/pending")).pending).toEqual([]);
  });

  it("lets a third party resolve one wait by its callback URL, and nothing else", async () => {
    await edge.json<Submission>("/sessions/hook/submissions", { body: notice("r1") });
    await pendingOf(edge, "hook");
    const { path } = await edge.json<{ path: string }>(
      `/sessions/hook/signals/${encodeURIComponent(KEY)}/callback-url`,
      {
        method: "POST",
      },
    );
    const other = await edge.json<{ path: string }>(
      `/sessions/other/signals/${encodeURIComponent(KEY)}/callback-url`,
      {
        method: "POST",
      },
    );
    const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
      edge.raw(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
    const before = (await edge.json<SessionView>("/sessions/hook/view")).version;
    // The URL is the credential: a mac for another session, another key, or a tampered one is a plain 404.
    const foreign = other.path.replace("/hooks/other/", "/hooks/hook/");
    expect((await post(foreign, { approved: true })).status).toBe(404);
    const otherKey = path.replace(encodeURIComponent(KEY), encodeURIComponent("plan-approval:other"));
    expect((await post(otherKey, { approved: true })).status).toBe(404);
    expect((await post(`${path.slice(0, -2)}xx`, { approved: true })).status).toBe(404);
    const bad = await post(path, { approved: 1 });
    expect(bad.status).toBe(400);
    // A payload nested past what records hold (here 5,000 levels, 10 KB), and bytes that are not UTF-8:
    // 400 naming the body, never a 500 from handing it on, and never a payload read with U+FFFD in it.
    const deep = await edge.raw(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `${"[".repeat(5000)}1${"]".repeat(5000)}`,
    });
    expect(deep.status).toBe(400);
    expect((await deep.json()).errors[0].path).toBe("body");
    const latin1 = await edge.raw(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new Uint8Array([...new TextEncoder().encode('{"approved":true,"note":"'), 0xff, 0x22, 0x7d]),
    });
    expect(latin1.status).toBe(400);
    expect(await latin1.json()).toMatchObject({ errors: [{ path: "body", message: "not valid UTF-8" }] });
    expect((await edge.json<SessionView>("/sessions/hook/view")).version).toBe(before);

    const resolved = await post(path, { approved: true }, { "idempotency-key": "payment-77" });
    expect(resolved.status).toBe(201);
    expect((await resolved.json()).signal.requestId).toBe("payment-77");
    const redelivered = await post(path, { approved: true }, { "idempotency-key": "payment-77" });
    expect(redelivered.status).toBe(200);
    const view = await edge.json<SessionView>("/sessions/hook/view?atLeast=1");
    expect(view.documents.find((d) => d.id === "plan")?.value).toMatchObject({ approved: true });
  });
});

it("keeps a wait across a runtime restart, and passes its deadline on the alarm with no request sent", async () => {
  const persist = mkdtempSync(join(tmpdir(), "edge-deadline-"));
  const options = { persist, vars: { PLAN_APPROVAL: "ask", PLAN_APPROVAL_DEADLINE_MS: "4000" } };
  let edge = await EdgeExample.start(script, options);
  try {
    const accepted = await edge.json<Submission>("/sessions/late/submissions", { body: notice("r1") });
    const [pending] = await pendingOf(edge, "late");
    const until = pending?.until ?? 0;
    expect(until).toBeGreaterThan(Date.now());
    await edge.dispose(); // evicted while it waits: only the stored alarm remembers the deadline
    edge = await EdgeExample.start(script, options);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now()) + 2000));
    const askedAt = Date.now();
    const done = await edge.json<Submission>(`/sessions/late/submissions/${accepted.id}?wait=20000`);
    expect(done.status).toBe("succeeded");
    expect(await edge.deliveries()).toEqual([]);
    // The commit that passed the deadline was made at its time, before any request reached the session.
    const events = await edge.raw("/sessions/late/events?since=0", {
      headers: { authorization: `Bearer ${EdgeExample.token}` },
    });
    // Parsed as a client does; read until the commit that passed the deadline has arrived whole.
    const commitsIn = (text: string) => {
      const commits: CommitRecord[] = [];
      const parser = createParser({
        onEvent: (event) => {
          if (event.event === "commit") commits.push(JSON.parse(event.data) as CommitRecord);
        },
      });
      parser.feed(text);
      return commits;
    };
    const expired = (c: CommitRecord) =>
      c.tasks.some((t) => t.kind === "email-campaign" && t.checkpoint.phase === "expired");
    const text = await readUntil(events, (t) => commitsIn(t).some(expired));
    const passed = commitsIn(text).find(expired);
    expect(passed?.at).toBeGreaterThanOrEqual(until);
    expect(passed?.at).toBeLessThan(askedAt - 500);
  } finally {
    await edge.dispose();
    rmSync(persist, { recursive: true, force: true });
  }
}, 60_000);

async function readUntil(response: Response, done: (text: string) => boolean): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!done(text)) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    text += decoder.decode(value, { stream: true });
  }
  await reader.cancel();
  return text;
}
