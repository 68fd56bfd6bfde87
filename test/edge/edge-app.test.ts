/**
 * The shipped edge example (examples/edge/worker.ts: Hono router + one Durable Object per session + a
 * mail provider DO) on real workerd through miniflare: runtime kills mid-run resumed by the alarm,
 * idempotent submissions under concurrent duplicates, SSE resume with Last-Event-ID, bad input, and
 * duplicate alarms.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  applyChangeToView,
  type CommitRecord,
  emptyView,
  type SessionView,
  type Submission,
} from "../../src/index.ts";
import { bundleWorker, EdgeExample, readEvents, startWorkerd } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const notice = (requestId: string) => ({
  requestId,
  conversationId: "main",
  input: "Send the approved notice",
});

/** Polls `check` every 25 ms until it holds (or fails the test after `timeoutMs`). */
async function until(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const ofTask = (deliveries: { to: string; operationId: string }[], taskId: string | undefined) =>
  deliveries.filter((d) => taskId !== undefined && d.operationId.startsWith(`${taskId}/`));

describe("edge host on workerd", () => {
  it("resumes on its alarm after the runtime is killed mid-run: five deliveries, each once, across two kills", async () => {
    const persist = mkdtempSync(join(tmpdir(), "edge-kill-"));
    const options = { persist, watchdogMs: 300, mailDelayMs: 300 };
    let edge = await EdgeExample.start(script, options);
    try {
      const accepted = await edge.json<Submission>("/sessions/kill/submissions", { body: notice("r1") });
      for (const killAfter of [1, 3]) {
        let delivered = 0;
        await until(async () => {
          delivered = (await edge.deliveries()).length;
          return delivered >= killAfter;
        });
        expect(delivered).toBeLessThan(5); // the run is really cut in the middle
        await edge.dispose(); // the whole runtime dies mid-run, with phases and a mail send in flight
        edge = await EdgeExample.start(script, options);
      }
      // Nothing calls the session any more: only its persisted alarm can bring it back.
      await until(async () => (await edge.deliveries()).length >= 5);
      const done = await edge.json<Submission>(`/sessions/kill/submissions/${accepted.id}?wait=20000`);
      expect(done.status).toBe("succeeded");
      expect(done.result).toMatchObject({ text: "Done: 5 of 5 notices delivered." });
      const deliveries = await edge.deliveries();
      expect(deliveries.map((d) => d.to).sort()).toEqual([
        "ana@example.com",
        "bo@example.com",
        "cy@example.com",
        "di@example.com",
        "ed@example.com",
      ]);
      const view = await edge.json<SessionView>("/sessions/kill/view");
      expect(view.epoch).toBeGreaterThanOrEqual(3); // three instances owned it in turn
      expect(view.tasks.every((task) => task.state.status === "succeeded")).toBe(true);
    } finally {
      await edge.dispose();
      rmSync(persist, { recursive: true, force: true });
    }
  }, 90_000);

  it("previews the recovery of a session that is not running without resuming it; resume then does just that", async () => {
    const persist = mkdtempSync(join(tmpdir(), "edge-preview-"));
    const options = { persist, watchdogMs: 600_000, mailDelayMs: 300 }; // no alarm comes back by itself
    let edge = await EdgeExample.start(script, options);
    try {
      const accepted = await edge.json<Submission>("/sessions/preview/submissions", { body: notice("r1") });
      await until(async () => (await edge.deliveries()).length >= 1);
      await edge.dispose();
      edge = await EdgeExample.start(script, options);

      type Plan = { events: { type: string; taskId: string; detail?: string }[] };
      const preview = await edge.json<Plan>("/sessions/preview/recovery");
      expect(await edge.json<Plan>("/sessions/preview/recovery")).toEqual(preview); // asking changed nothing
      const restarted = preview.events.filter((a) => a.type === "restarted").map((a) => a.taskId);
      expect(restarted.length).toBeGreaterThan(0);
      expect(
        preview.events.some(
          (a) => a.type === "restarted" && a.detail?.startsWith("send_email: confirm by operation id"),
        ),
      ).toBe(true);
      const deliveredBefore = (await edge.deliveries()).length;
      expect(deliveredBefore).toBeLessThan(5);

      expect(await (await edge.request("/__alarm/preview")).text()).toBe("alarm handled"); // the late alarm
      const done = await edge.json<Submission>(`/sessions/preview/submissions/${accepted.id}?wait=20000`);
      expect(done.status).toBe("succeeded");
      const view = await edge.json<SessionView>("/sessions/preview/view");
      const counted = view.tasks.filter((t) => t.restarts > 0).map((t) => t.id);
      expect(counted.sort()).toEqual(restarted.sort());
      expect(ofTask(await edge.deliveries(), accepted.taskId)).toHaveLength(5);
    } finally {
      await edge.dispose();
      rmSync(persist, { recursive: true, force: true });
    }
  }, 90_000);

  it("wakes a sleeping task on its alarm after the runtime restarted, with no request to the session", async () => {
    const sleeper = await bundleWorker(fileURLToPath(new URL("./fixtures/sleeper.ts", import.meta.url)));
    const persist = mkdtempSync(join(tmpdir(), "edge-sleep-"));
    const start = () => startWorkerd(sleeper, { SESSIONS: "AgentSession" }, persist, { API_TOKEN: "t" });
    const call = async (runtime: ReturnType<typeof start>, path: string, body?: unknown) => {
      const response = await runtime.dispatchFetch(`http://edge.test${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: "Bearer t", "content-type": "application/json" },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      return (await response.json()) as Submission & SessionView;
    };
    let runtime = start();
    try {
      const input = { text: "nap", data: { ms: 1500 } };
      const accepted = await call(runtime, "/sessions/nap/submissions", {
        requestId: "r1",
        conversationId: "main",
        input,
      });
      const sleeping = await call(runtime, "/sessions/nap/view?atLeast=2&wait=5000");
      expect(sleeping.tasks.map((t) => t.state.status)).toEqual(["sleeping"]);
      await runtime.dispose(); // evicted while the task sleeps: only the stored alarm remembers it
      runtime = start();
      const until = sleeping.tasks[0]?.state.status === "sleeping" ? sleeping.tasks[0].state.until : 0;
      // Nothing touches the session until well after its wake time.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now()) + 1500));
      const askedAt = Date.now();
      const done = await call(runtime, `/sessions/nap/submissions/${accepted.id}`);
      expect(done.status).toBe("succeeded");
      const task = (await call(runtime, "/sessions/nap/view")).tasks[0];
      expect(task?.state.status).toBe("succeeded");
      // It woke at its time and finished before any request reached the session: the alarm woke it.
      expect(task?.updatedAt).toBeGreaterThanOrEqual(until);
      expect(task?.updatedAt).toBeLessThan(askedAt - 500);
      expect(task?.restarts).toBe(0); // sleeping is not running: no restart is counted
    } finally {
      await runtime.dispose();
      rmSync(persist, { recursive: true, force: true });
    }
  }, 60_000);

  describe("one runtime", () => {
    let edge: EdgeExample;
    beforeAll(async () => {
      edge = await EdgeExample.start(script);
    });
    afterAll(() => edge.dispose());

    it("turns concurrent duplicate posts of one requestId into one Submission", async () => {
      const responses = await Promise.all(
        Array.from({ length: 16 }, () =>
          edge.request("/sessions/idem/submissions", { body: notice("same") }),
        ),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(16).fill(202));
      const submissions = (await Promise.all(responses.map((r) => r.json()))) as Submission[];
      expect(new Set(submissions.map((s) => s.id)).size).toBe(1);
      const other = await edge.json<Submission>("/sessions/idem/submissions", { body: notice("other") });
      expect(other.id).not.toBe(submissions[0]?.id);

      await edge.json(`/sessions/idem/submissions/${other.id}?wait=20000`);
      const view = await edge.json<SessionView>(`/sessions/idem/view`);
      expect(view.submissions.map((s) => s.requestId).sort()).toEqual(["other", "same"]);
      const userEntries = view.conversations[0]?.entries.filter((e) => e.content.kind === "user") ?? [];
      expect(userEntries).toHaveLength(2);
    });

    it("answers a submission in one call when asked to wait: 200 with the ended Submission, the same for a retry", async () => {
      const first = await edge.request("/sessions/one-call/submissions?wait=20000", { body: notice("once") });
      expect(first.status).toBe(200);
      const done = (await first.json()) as Submission;
      expect(done.status).toBe("succeeded");
      expect(done.result).toMatchObject({ text: "Done: 5 of 5 notices delivered." });
      // A retry of the same request waits for nothing more: the same ended Submission, no new work.
      const retry = await edge.request("/sessions/one-call/submissions?wait=20000", { body: notice("once") });
      expect(retry.status).toBe(200);
      expect(await retry.json()).toEqual(done);
      // Without `wait` the answer is as before: accepted, still running.
      const accepted = await edge.request("/sessions/one-call/submissions", { body: notice("later") });
      expect(accepted.status).toBe(202);
      expect(((await accepted.json()) as Submission).status).not.toBe("succeeded");
    });

    it("streams commits as SSE; a client that reconnects with Last-Event-ID assembles the server's view", async () => {
      const accepted = await edge.json<Submission>("/sessions/sse/submissions", { body: notice("r1") });
      let view = emptyView("sse");
      let lastId = "0";
      const apply = (event: { id?: string; event: string; data: string }) => {
        expect(event.event).toBe("commit");
        view = applyChangeToView(view, JSON.parse(event.data) as CommitRecord); // throws on a gap or a repeat
        lastId = event.id ?? lastId;
      };
      let seen = 0;
      await readEvents(await edge.request("/sessions/sse/events?since=0"), (event) => {
        apply(event);
        return ++seen === 3; // drop the connection mid-run
      });
      expect(view.version).toBe(3);
      const finished = () => view.submissions.find((s) => s.id === accepted.id)?.status === "succeeded";
      await readEvents(
        await edge.request("/sessions/sse/events?since=0", { headers: { "last-event-id": lastId } }),
        (event) => {
          apply(event);
          return finished();
        },
      );
      const server = await edge.json<SessionView>(`/sessions/sse/view?atLeast=${view.version}`);
      if (server.version > view.version) {
        await readEvents(
          await edge.request("/sessions/sse/events", { headers: { "last-event-id": String(view.version) } }),
          (event) => {
            apply(event);
            return view.version === server.version;
          },
        );
      }
      expect(view).toEqual(server);
    });

    it("pages a session's Submissions newest first from storage, and reads a task tree by its root", async () => {
      const accepted: Submission[] = [];
      for (const requestId of ["s1", "s2", "s3", "s4", "s5"]) {
        const s = await edge.json<Submission>("/sessions/subs/submissions?wait=20000", {
          body: notice(requestId),
        });
        accepted.push(s);
      }
      type Page = { submissions: Submission[]; next: number | null };
      const seen: string[] = [];
      let next: number | null = null;
      do {
        const query: string = next === null ? "limit=2" : `limit=2&before=${next}`;
        const page: Page = await edge.json<Page>(`/sessions/subs/submissions?${query}`);
        seen.push(...page.submissions.map((s) => s.requestId));
        next = page.next;
      } while (next !== null);
      expect(seen).toEqual(["s5", "s4", "s3", "s2", "s1"]);
      const root = accepted[0]?.taskId ?? "";
      const tree = await edge.json<{ id: string; parentId?: string }[]>(
        `/sessions/subs/tree?root=${encodeURIComponent(root)}`,
      );
      expect(tree[0]?.id).toBe(root);
      expect(tree.length).toBeGreaterThan(5); // the turn, its tool call, the campaign and its five sends
      expect(tree.every((t, i) => i === 0 || tree.some((p) => p.id === t.parentId))).toBe(true);
      // Bad queries are refused by name; an unknown session is not created by a read.
      const bad = await edge.request("/sessions/subs/submissions?limit=0");
      expect([bad.status, ((await bad.json()) as { errors?: { path: string }[] }).errors?.[0]?.path]).toEqual(
        [400, "query.limit"],
      );
      expect((await edge.request("/sessions/subs/tree")).status).toBe(400);
      expect((await edge.request("/sessions/nobody-here/submissions")).status).toBe(404);
    });

    it("trims the view for display and pages a conversation's entries back to its start", async () => {
      for (const requestId of ["r1", "r2"]) {
        const accepted = await edge.json<Submission>("/sessions/pages/submissions", {
          body: notice(requestId),
        });
        await edge.json(`/sessions/pages/submissions/${accepted.id}?wait=20000`);
      }
      const full = await edge.json<SessionView>("/sessions/pages/view");
      const all = full.conversations[0]?.entries ?? [];
      expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i));
      expect(full.tasks.length).toBeGreaterThan(0);

      const trimmed = await edge.json<SessionView>(
        "/sessions/pages/view?entries=2&submissions=1&tasks=active",
      );
      expect(trimmed.version).toBe(full.version);
      expect(trimmed.conversations[0]?.entries).toEqual(all.slice(-2));
      expect(trimmed.submissions.map((s) => s.requestId)).toEqual(["r2"]);
      expect(trimmed.tasks).toEqual([]); // every task has ended
      const firstDocument = await edge.json<SessionView>("/sessions/pages/view?documents=1");
      expect(firstDocument.documents).toEqual(full.documents.slice(0, 1));
      const rest = await edge.json<SessionView>(
        `/sessions/pages/view?documentsAfter=${encodeURIComponent(full.documents[0]?.id ?? "")}`,
      );
      expect(rest.documents).toEqual(full.documents.slice(1));

      type Page = { conversationId: string; entries: typeof all; next: number | null };
      const pages: Page[] = [];
      let next: number | null = null;
      do {
        const query: string = next === null ? "limit=3" : `limit=3&before=${next}`;
        const page: Page = await edge.json<Page>(`/sessions/pages/conversations/main/entries?${query}`);
        pages.push(page);
        next = page.next;
      } while (next !== null);
      expect(pages.length).toBe(Math.ceil(all.length / 3));
      expect(pages.length).toBeGreaterThan(2);
      expect(pages[0]?.entries).toEqual(all.slice(-3));
      expect(pages.reverse().flatMap((p) => p.entries)).toEqual(all);

      const problem = async (path: string) => {
        const response = await edge.request(path);
        return {
          status: response.status,
          body: (await response.json()) as { code: string; errors?: { path: string }[] },
        };
      };
      const tooMany = await problem("/sessions/pages/conversations/main/entries?limit=501");
      expect(tooMany).toMatchObject({
        status: 400,
        body: { code: "invalid-argument", errors: [{ path: "query.limit" }] },
      });
      const none = await problem("/sessions/pages/conversations/main/entries?limit=0");
      expect(none).toMatchObject({ status: 400, body: { errors: [{ path: "query.limit" }] } });
      const badFilter = await problem("/sessions/pages/view?tasks=finished");
      expect(badFilter).toMatchObject({ status: 400, body: { errors: [{ path: "query.tasks" }] } });
      const unknown = await problem("/sessions/pages/conversations/elsewhere/entries");
      expect(unknown).toMatchObject({ status: 404, body: { code: "conversation-not-found" } });
      const noSession = await problem("/sessions/never-created/conversations/main/entries");
      expect(noSession).toMatchObject({ status: 404, body: { code: "session-not-found" } });
    });

    it("answers bad input with the right 4xx problem, never a 5xx, and stores nothing", async () => {
      const good = await edge.json<Submission>("/sessions/bad-existing/submissions", { body: notice("r1") });
      await edge.json(`/sessions/bad-existing/submissions/${good.id}?wait=20000`);
      const before = await edge.json<SessionView>("/sessions/bad-existing/view");
      const raw = (path: string, init: RequestInit) => edge.raw(path, init);
      const auth = { authorization: `Bearer ${EdgeExample.token}` };
      const json = { ...auth, "content-type": "application/json" };
      const cases: [string, Promise<Response>, number, string, string?][] = [
        [
          "no token",
          raw("/sessions/bad/submissions", { method: "POST", body: JSON.stringify(notice("x")) }),
          401,
          "unauthorized",
        ],
        [
          "wrong token",
          raw("/sessions/bad/view", { headers: { authorization: "Bearer nope" } }),
          401,
          "unauthorized",
        ],
        [
          "basic auth",
          raw("/sessions/bad/view", { headers: { authorization: "Basic dGVzdA==" } }),
          401,
          "unauthorized",
        ],
        [
          "malformed JSON",
          raw("/sessions/bad/submissions", { method: "POST", headers: json, body: "{oops" }),
          400,
          "invalid-argument",
          "body",
        ],
        [
          "empty body",
          raw("/sessions/bad/submissions", { method: "POST", headers: json }),
          400,
          "invalid-argument",
          "body",
        ],
        [
          "wrong type",
          edge.request("/sessions/bad/submissions", { body: { ...notice("x"), requestId: 5 } }),
          400,
          "invalid-argument",
          "body.requestId",
        ],
        [
          "missing field",
          edge.request("/sessions/bad/submissions", { body: { requestId: "x", input: "hi" } }),
          400,
          "invalid-argument",
          "body.conversationId",
        ],
        [
          "unknown field",
          edge.request("/sessions/bad/submissions", { body: { ...notice("x"), admin: true } }),
          400,
          "invalid-argument",
          "body",
        ],
        [
          "oversize body",
          edge.request("/sessions/bad/submissions", { body: { ...notice("x"), input: "x".repeat(70_000) } }),
          413,
          "body-too-large",
        ],
        [
          "not JSON",
          raw("/sessions/bad/submissions", {
            method: "POST",
            headers: { ...auth, "content-type": "text/plain" },
            body: "hi",
          }),
          415,
          "unsupported-media-type",
        ],
        ["bad session id", edge.request("/sessions/%20bad%20/view"), 400, "invalid-argument", "params.id"],
        ["unknown session", edge.request("/sessions/bad/view"), 404, "session-not-found"],
        [
          "unknown session's submission",
          edge.request("/sessions/bad/submissions/sub_1"),
          404,
          "session-not-found",
        ],
        [
          "unknown submission",
          edge.request("/sessions/bad-existing/submissions/sub_nope"),
          404,
          "submission-not-found",
        ],
        [
          "cancel unknown submission",
          edge.request("/sessions/bad-existing/submissions/sub_nope/cancel", { body: {} }),
          404,
          "submission-not-found",
        ],
        [
          "cancel with a bad reason",
          edge.request(`/sessions/bad-existing/submissions/${good.id}/cancel`, { body: { reason: 7 } }),
          400,
          "invalid-argument",
          "body.reason",
        ],
        [
          "a submission with a negative wait",
          edge.request("/sessions/bad-existing/submissions?wait=-1", { body: notice("neg-wait") }),
          400,
          "invalid-argument",
          "query.wait",
        ],
        [
          "negative wait",
          edge.request(`/sessions/bad-existing/submissions/${good.id}?wait=-1`),
          400,
          "invalid-argument",
          "query.wait",
        ],
        [
          "wait too long",
          edge.request(`/sessions/bad-existing/submissions/${good.id}?wait=99999999`),
          400,
          "invalid-argument",
          "query.wait",
        ],
        [
          "since ahead",
          edge.request("/sessions/bad-existing/events?since=100000"),
          400,
          "invalid-argument",
          "query.since",
        ],
        [
          "bad Last-Event-ID",
          edge.request("/sessions/bad-existing/events", { headers: { "last-event-id": "x" } }),
          400,
          "invalid-argument",
          "headers.last-event-id",
        ],
        ["unknown route", edge.request("/nowhere"), 404, "not-found"],
        ["recovery of an unknown session", edge.request("/sessions/bad/recovery"), 404, "session-not-found"],
      ];
      for (const [name, pending, status, code, path] of cases) {
        const response = await pending;
        const problem = (await response.json()) as {
          status: number;
          code: string;
          errors?: { path: string }[];
        };
        expect({ name, status: response.status, code: problem.code }).toEqual({ name, status, code });
        expect(response.headers.get("content-type")).toBe("application/problem+json");
        if (path !== undefined) expect(problem.errors?.map((e) => e.path)).toContain(path);
      }
      // Nothing was stored: the unknown session still does not exist, the existing one did not move.
      expect((await edge.request("/sessions/bad/view")).status).toBe(404);
      expect((await edge.json<SessionView>("/sessions/bad-existing/view")).version).toBe(before.version);
    });

    it("shrugs off duplicate and late alarms: no second delivery, no extra commit", async () => {
      const accepted = await edge.json<Submission>("/sessions/alarms/submissions", { body: notice("r1") });
      // Alarms firing while the run is in flight (duplicates of the watchdog) …
      await Promise.all(
        Array.from({ length: 5 }, () => edge.request("/__alarm/alarms").then((r) => r.text())),
      );
      const done = await edge.json<Submission>(`/sessions/alarms/submissions/${accepted.id}?wait=20000`);
      expect(done.status).toBe("succeeded");
      const settled = await edge.json<SessionView>("/sessions/alarms/view");
      // … and late ones after it ended.
      for (let i = 0; i < 3; i++)
        expect(await (await edge.request("/__alarm/alarms")).text()).toBe("alarm handled");
      expect((await edge.json<SessionView>("/sessions/alarms/view")).version).toBe(settled.version);
      const mine = ofTask(await edge.deliveries(), accepted.taskId);
      expect(mine).toHaveLength(5);
      expect(new Set(mine.map((d) => d.to)).size).toBe(5);
    });
  });
});
