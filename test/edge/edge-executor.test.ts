/**
 * A tool only a browser can run, in a session a Durable Object owns, on real workerd: the object never runs
 * it; the call waits, listed as pending, until an executor that does not own the session (a tab, here a
 * client of the HTTP API) accepts it, runs it and reports back — and the object applies the report.
 */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool, edgeExecutorTarget, executePlacedCalls, type Submission } from "../../src/index.ts";
import { bundleWorker, startWorkerd } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/signing.ts", import.meta.url)));
const token = "signing-token";

describe("an executor for a Durable Object's session", () => {
  let workerd: ReturnType<typeof startWorkerd>;
  let url = "";
  beforeAll(async () => {
    workerd = startWorkerd(script, { SESSIONS: "AgentSession" }, undefined, { API_TOKEN: token });
    url = (await workerd.ready).origin;
  }, 60_000);
  afterAll(async () => {
    await workerd?.dispose();
  });

  it("takes the browser-only call over HTTP, runs it once and the object applies its report", async () => {
    const api = async <T>(path: string, body?: unknown): Promise<T> => {
      const response = await fetch(`${url}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      expect(response.ok, `${path}: ${response.status}`).toBe(true);
      return (await response.json()) as T;
    };
    const submission = await api<Submission>("/sessions/sign-1/submissions", {
      requestId: "r1",
      conversationId: "main",
      input: "Sign the lease",
    });
    const target = edgeExecutorTarget({ baseUrl: url, token, sessionId: "sign-1" });
    await expect
      .poll(async () => (await target.pending()).map((p) => p.key.split(":")[0]), { timeout: 20_000 })
      .toEqual(["run-on"]);
    const signed: string[] = [];
    const sign = defineTool({
      name: "sign_document",
      description: "Signs the document with the user's key",
      input: z.object({ document: z.string() }),
      replay: "unsafe",
      runsOn: "browser",
      execute: ({ document }, { operationId }) => {
        signed.push(operationId);
        return { signed: document };
      },
    });
    const executed = await executePlacedCalls(target, { host: "browser", executor: "tab-1", tools: [sign] });
    expect(executed).toEqual([expect.objectContaining({ outcome: "ok", reported: true })]);
    const ended = await api<Submission>(`/sessions/sign-1/submissions/${submission.id}?wait=20000`);
    expect(ended.status).toBe("succeeded");
    expect((ended.result as { text?: string }).text).toContain("lease.pdf");
    expect(signed).toHaveLength(1);
    // The call's result says the tab ran it; nothing waits any more, and a second executor finds nothing.
    const view = await api<{ tasks: { kind: string; state: { result?: unknown } }[] }>(
      "/sessions/sign-1/view",
    );
    const call = view.tasks.find((t) => t.kind === "agent.tool");
    expect(call?.state.result).toMatchObject({ outcome: "ok", via: "run", executor: "tab-1" });
    expect(await target.pending()).toEqual([]);
    expect(await executePlacedCalls(target, { host: "browser", executor: "tab-2", tools: [sign] })).toEqual(
      [],
    );
  }, 60_000);
});
