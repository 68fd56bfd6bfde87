/**
 * `GET /sessions` on real workerd: the sessions the edge holds, in id order and paged, each listed only to
 * callers that may read it (a JWT scoped to one session sees that one); a caller with no valid token gets
 * 401 and nothing; a request that failed created nothing, so nothing is listed for it; the internal mark
 * of a creating call never reaches the client.
 */
import { fileURLToPath } from "node:url";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/edge-example.ts", import.meta.url)));
const JWT_SECRET = "jwt-test-secret-that-is-long-enough-for-hs256";

const jwt = (claims: Record<string, unknown>) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(String(claims.sub ?? "user"))
    .setIssuedAt()
    .setExpirationTime("10m")
    .sign(new TextEncoder().encode(JWT_SECRET));

type Listed = { sessions: { id: string; notedAt: number }[]; next: string | null };

describe("the session list of an edge", () => {
  let edge: EdgeExample;
  beforeAll(async () => {
    edge = await EdgeExample.start(script, { vars: { JWT_SECRET } });
  }, 60_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("lists the sessions it holds to whoever may read them, paged, and nothing a failed request made", async () => {
    for (const id of ["list-c", "list-a", "list-b"]) {
      const response = await edge.request(`/sessions/${id}/submissions`, {
        body: { requestId: `r-${id}`, conversationId: "main", input: "Send the approved notice" },
      });
      expect(response.status).toBe(202);
      expect(response.headers.has("x-session-created")).toBe(false);
    }
    // Refused before anything exists: no session, so nothing to list.
    const refused = await edge.request("/sessions/list-z/submissions", { body: { requestId: "r" } });
    expect(refused.status).toBe(400);

    const listed = async (query: string, token = EdgeExample.token) => {
      const response = await edge.raw(`/sessions${query}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: response.status, body: (await response.json()) as Listed };
    };
    // Noted after each response: wait until all three are there.
    let all = await listed("");
    for (let i = 0; i < 50 && all.body.sessions.length < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      all = await listed("");
    }
    expect(all.body.sessions.map((s) => s.id)).toEqual(["list-a", "list-b", "list-c"]);
    expect(all.body.next).toBeNull();

    const first = await listed("?limit=2");
    expect(first.body.sessions.map((s) => s.id)).toEqual(["list-a", "list-b"]);
    expect(first.body.next).toBe("list-b");
    const rest = await listed(`?limit=2&after=${first.body.next}`);
    expect(rest.body.sessions.map((s) => s.id)).toEqual(["list-c"]);
    expect(rest.body.next).toBeNull();

    // A user token scoped to one session lists that one only; one for writing only lists none.
    const reader = await jwt({ sub: "reader-b", sessions: ["list-b"], actions: ["read"] });
    expect((await listed("", reader)).body.sessions.map((s) => s.id)).toEqual(["list-b"]);
    const submitter = await jwt({ sub: "submitter", sessions: ["list-*"], actions: ["submit"] });
    expect((await listed("", submitter)).body.sessions).toEqual([]);

    // No valid credentials: 401 and no list; a bad page size: 400 naming it.
    const anonymous = await edge.raw("/sessions");
    expect(anonymous.status).toBe(401);
    expect(JSON.stringify(await anonymous.json())).not.toContain("list-a");
    const forged = await edge.raw("/sessions", { headers: { authorization: "Bearer not-the-token" } });
    expect(forged.status).toBe(401);
    const bad = await edge.raw("/sessions?limit=0", {
      headers: { authorization: `Bearer ${EdgeExample.token}` },
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain("query.limit");
  });
});
