/**
 * The hands apart from the brain (issue 21): a session owned at the edge calls a tool only a browser can
 * run; a tab that does not own the session takes the call as its executor. Each step is a committed mark —
 * accepted (the call records its executor and lease), completed (the executor's report), applied (the
 * result entry the model reads) — and an executor that stops reporting loses the call at its lease's end:
 * the call follows its replay rules with the next executor, and the late report is refused.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitRecord,
  createAgent,
  createRegistry,
  defineSignal,
  defineTask,
  defineTool,
  type ExecutorTarget,
  edgeExecutorTarget,
  executePlacedCalls,
  InvalidArgumentError,
  type Json,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  type Session,
  SignalRefusedError,
  scriptedModel,
  type ToolDefinition,
} from "../../src/index.ts";

/** The session as an executor sees it (over HTTP this is `GET …/pending` and `POST …/signals/:key`). */
const targetOf = (session: Session): ExecutorTarget => ({
  pending: () => session.pending(),
  signal: (key, payload, options) => session.signal(key, payload, options),
});

const settle = async (rounds = 30) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** An agent that signs a document in the user's browser (unsafe: signing twice is two signatures). */
function signing(world: { signed: string[]; ranAt: string[] }, where: string) {
  const sign = defineTool({
    name: "sign_document",
    description: "Signs the document with the user's key, held by the browser",
    input: z.object({ document: z.string() }),
    replay: "unsafe",
    runsOn: "browser",
    confirm: (operationId) =>
      world.signed.includes(operationId) ? { signed: true, confirmed: true } : undefined,
    execute: (_args, { operationId }) => {
      world.ranAt.push(where);
      world.signed.push(operationId);
      return { signed: true };
    },
  });
  const model = scriptedModel([
    { toolCalls: [{ name: "sign_document", args: { document: "lease.pdf" } }] },
    (request) => {
      const tool = [...request.messages].reverse().find((m) => m.role === "tool");
      return { text: `Done: ${tool?.content ?? "nothing"}` };
    },
  ]);
  return {
    sign: sign as ToolDefinition<unknown>,
    registry: createRegistry({ ...createAgent({ model, tools: [sign] }) }),
  };
}

/** An edge session on a manual clock whose "Sign it" submission waits for an executor to take its call. */
async function signingOnTheEdge(id: string) {
  const world = { signed: [] as string[], ranAt: [] as string[] };
  const clock = new ManualClock(1_000);
  const timers = new ManualTimers(clock);
  const edge = await openSession({
    id,
    storage: memoryStorage(),
    registry: signing(world, "edge").registry,
    host: "edge",
    clock,
    timers,
  });
  await edge.resume();
  const submission = await edge.submit({ requestId: "r1", conversationId: "main", input: "Sign it" });
  await settle();
  return { world, timers, edge, submission };
}

describe("tool calls run by an executor that does not own the session", () => {
  it("are accepted, completed and applied, three commits in that order; the tool ran once, in the tab", async () => {
    const world = { signed: [] as string[], ranAt: [] as string[] };
    const edge = await openSession({
      id: "exec",
      storage: memoryStorage(),
      registry: signing(world, "edge").registry,
      host: "edge",
    });
    await edge.resume();
    const changes: CommitRecord[] = [];
    edge.subscribe(0, (change) => changes.push(change));
    const submission = await edge.submit({ requestId: "r1", conversationId: "main", input: "Sign it" });
    await expect.poll(() => edge.pending().map((p) => p.key.split(":")[0])).toEqual(["run-on"]);

    const tab = signing(world, "tab");
    const executed = await executePlacedCalls(targetOf(edge), {
      host: "browser",
      executor: "tab-1",
      tools: [tab.sign],
    });
    expect(executed).toEqual([
      expect.objectContaining({ tool: "sign_document", outcome: "ok", reported: true }),
    ]);
    const ended = await edge.wait(submission.id);
    expect(ended.status).toBe("succeeded");
    expect(world.ranAt).toEqual(["tab"]); // never at the edge, once in the tab
    expect((ended.result as { text?: string }).text).toContain('"signed":true');

    // The three marks, each its own commit, in order.
    const call = edge.view().tasks.find((t) => t.kind === "agent.tool");
    const accepted = changes.findIndex((c) =>
      c.tasks.some(
        (t) =>
          t.id === call?.id &&
          t.state.status === "awaiting" &&
          (t.state.about as { acceptedBy?: string } | undefined)?.acceptedBy === "tab-1",
      ),
    );
    const completed = changes.findIndex((c) =>
      (c.signals ?? []).some((s) => s.key.startsWith(`done:${call?.id}:`)),
    );
    const applied = changes.findIndex((c) =>
      c.entries.some((e) => e.content.kind === "tool-result" && e.content.outcome === "ok"),
    );
    expect(accepted).toBeGreaterThan(-1);
    expect(completed).toBeGreaterThan(accepted);
    expect(applied).toBeGreaterThan(completed);
    // The result says who ran it.
    expect(call?.state).toMatchObject({ status: "succeeded", result: { via: "run", executor: "tab-1" } });
    await edge.close();
  });

  it("a call cancelled once an executor took it is answered as possibly run, one no executor took as not run", async () => {
    const world = { signed: [] as string[], ranAt: [] as string[] };
    const edge = await openSession({
      id: "cancel-taken",
      storage: memoryStorage(),
      registry: signing(world, "edge").registry,
      host: "edge",
    });
    await edge.resume();
    // The call's answer, in the conversation of its turn.
    const resultOf = (conversationId: string) =>
      edge
        .view()
        .conversations.find((c) => c.id === conversationId)
        ?.entries.find((e) => e.content.kind === "tool-result")?.content;

    // Offered, never taken: it cannot have run anywhere.
    const untaken = await edge.submit({ requestId: "r1", conversationId: "a", input: "Sign it" });
    await expect.poll(() => edge.pending().map((p) => p.key.split(":")[0])).toEqual(["run-on"]);
    await edge.cancelSubmission(untaken.id, "not now");
    expect((await edge.wait(untaken.id)).status).toBe("cancelled");
    expect(resultOf("a")).toMatchObject({ outcome: "not-run" });

    // Taken by a tab (which may have signed already): unsafe to repeat, so unknown — never "not run".
    const taken = await edge.submit({ requestId: "r2", conversationId: "b", input: "Sign it" });
    await expect.poll(() => edge.pending().map((p) => p.key.split(":")[0])).toEqual(["run-on"]);
    const [offered] = edge.pending();
    await edge.signal(offered?.key as string, { host: "browser", executor: "tab-1" }, { requestId: "take" });
    await expect.poll(() => edge.pending().map((p) => p.key.split(":")[0])).toEqual(["done"]);
    await edge.cancelSubmission(taken.id, "not now");
    expect((await edge.wait(taken.id)).status).toBe("cancelled");
    const answer = resultOf("b");
    expect(answer).toMatchObject({ outcome: "unknown" });
    expect(JSON.stringify(answer)).toContain("cancelled while it ran (not now); it may have taken effect");
    await edge.close();
  });

  it("an executor that stops reporting loses the call at its lease's end: the next one confirms it, the late report is refused", async () => {
    const { world, timers, edge, submission } = await signingOnTheEdge("lease");
    const [offered] = edge.pending();
    expect(offered?.key).toMatch(/^run-on:/);

    // A tab accepts it for 5 s, signs (the effect happens), and dies before it reports.
    await edge.signal(
      offered?.key as string,
      { host: "browser", executor: "tab-dead", leaseMs: 5_000 },
      { requestId: "accept" },
    );
    await settle();
    const [held] = edge.pending();
    expect(held?.key).toMatch(/^done:/);
    expect(held?.about).toMatchObject({ acceptedBy: "tab-dead", leaseUntil: 6_000 });
    const operationId = String((held?.about as { operationId?: string } | undefined)?.operationId);
    world.signed.push(operationId);
    world.ranAt.push("tab-dead");
    // Only the executor that accepted it can report it.
    const impostor = await edge
      .signal(
        held?.key as string,
        { executor: "someone-else", outcome: "ok", output: { forged: true }, via: "run" },
        { requestId: "forged" },
      )
      .catch((e: unknown) => e);
    expect(impostor).toBeInstanceOf(InvalidArgumentError);
    expect(edge.pending().map((p) => p.key)).toEqual([held?.key]);

    // Its lease ends: the call waits again, marked as possibly run.
    timers.advance(5_001);
    await settle();
    const [again] = edge.pending();
    expect(again?.key).toMatch(/^run-on:/);
    expect(again?.key).not.toBe(offered?.key);
    expect(again?.about).toMatchObject({ recovering: true, operationId });
    // The dead tab's report, late, is refused: it never becomes the call's result.
    const late = await edge
      .signal(
        held?.key as string,
        { executor: "tab-dead", outcome: "ok", output: { late: true }, via: "run" },
        { requestId: "late" },
      )
      .catch((e: unknown) => e);
    expect(late).toBeInstanceOf(SignalRefusedError);
    expect((late as SignalRefusedError).code).toBe("signal-not-awaited");

    // The next tab confirms by operation id instead of signing again.
    const tab = signing(world, "tab-2");
    const executed = await executePlacedCalls(targetOf(edge), {
      host: "browser",
      executor: "tab-2",
      tools: [tab.sign],
    });
    expect(executed).toEqual([expect.objectContaining({ outcome: "ok", reported: true })]);
    expect((await edge.wait(submission.id)).status).toBe("succeeded");
    expect(world.ranAt).toEqual(["tab-dead"]); // signed once, never again
    const call = edge.view().tasks.find((t) => t.kind === "agent.tool");
    expect(call?.state).toMatchObject({
      result: { via: "confirm", executor: "tab-2", output: { confirmed: true } },
    });
    await edge.close();
  });

  it("an unsafe call stopped at 80% of its lease after it ran is not reported as an error: the next executor confirms it", async () => {
    const { world, timers, edge, submission } = await signingOnTheEdge("stopped");
    // The tab signs, then waits for the provider's receipt, honouring its signal.
    const { sign: confirming } = signing(world, "tab-2");
    const slow: ToolDefinition<unknown> = {
      ...confirming,
      execute: (_args, { operationId, signal }) => {
        world.ranAt.push("tab-1");
        world.signed.push(operationId);
        return new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      },
    };
    const tabTimers = new ManualTimers(new ManualClock(0));
    const executing = executePlacedCalls(targetOf(edge), {
      host: "browser",
      executor: "tab-1",
      tools: [slow],
      leaseMs: 5_000,
      timers: tabTimers,
    });
    for (let i = 0; i < 50 && world.signed.length === 0; i++) {
      await settle();
      tabTimers.advance(20);
    }
    expect(world.signed).toHaveLength(1);
    tabTimers.advance(4_000); // 80% of its lease: the tool is asked to stop, after its effect
    expect(await executing).toEqual([
      expect.objectContaining({ tool: "sign_document", outcome: "interrupted", reported: false }),
    ]);
    await settle();
    // Nothing was applied: the call still waits for tab-1's report, as long as the owner's lease runs.
    expect(edge.pending().map((p) => p.key.split(":")[0])).toEqual(["done"]);
    expect(edge.view().conversations[0]?.entries.some((e) => e.content.kind === "tool-result")).toBe(false);

    // Its lease ends: the call waits again as possibly run, and the next tab confirms instead of signing.
    timers.advance(5_001);
    await settle();
    expect(edge.pending()[0]?.about).toMatchObject({ recovering: true });
    const executed = await executePlacedCalls(targetOf(edge), {
      host: "browser",
      executor: "tab-2",
      tools: [confirming],
    });
    expect(executed).toEqual([expect.objectContaining({ outcome: "ok", reported: true })]);
    const ended = await edge.wait(submission.id);
    expect((ended.result as { text?: string }).text).toContain('"outcome":"ok"');
    expect(world.ranAt).toEqual(["tab-1"]); // signed once, never again
    const call = edge.view().tasks.find((t) => t.kind === "agent.tool");
    expect(call?.state).toMatchObject({ result: { outcome: "ok", via: "confirm", executor: "tab-2" } });
    await edge.close();
  });

  it("reports an unsafe call whose output JSON cannot hold as unknown (it ran), which the owner applies", async () => {
    const world = { signed: [] as string[], ranAt: [] as string[] };
    const edge = await openSession({
      id: "unstorable",
      storage: memoryStorage(),
      registry: signing(world, "edge").registry,
      host: "edge",
    });
    await edge.resume();
    const submission = await edge.submit({ requestId: "r1", conversationId: "main", input: "Sign it" });
    await edge.whenIdle();
    const { sign } = signing(world, "tab");
    const odd: ToolDefinition<unknown> = {
      ...sign,
      execute: () => ({ signature: 1n }) as unknown as Json,
    };
    const executed = await executePlacedCalls(targetOf(edge), {
      host: "browser",
      executor: "tab-1",
      tools: [odd],
    });
    expect(executed).toEqual([expect.objectContaining({ outcome: "unknown", reported: true })]);
    const ended = await edge.wait(submission.id);
    expect((ended.result as { text?: string }).text).toContain('"outcome":"unknown"');
    expect((ended.result as { text?: string }).text).toContain("ran, but its output could not be stored");
    await edge.close();
  });

  it("leaves a call the owner or another executor took first", async () => {
    const world = { signed: [] as string[], ranAt: [] as string[] };
    const edge = await openSession({
      id: "race",
      storage: memoryStorage(),
      registry: signing(world, "edge").registry,
      host: "edge",
    });
    await edge.resume();
    const submission = await edge.submit({ requestId: "r1", conversationId: "main", input: "Sign it" });
    await expect.poll(() => edge.pending().length).toBe(1);
    const tools = [signing(world, "tab").sign];
    const [first, second] = await Promise.all([
      executePlacedCalls(targetOf(edge), { host: "browser", executor: "tab-a", tools }),
      executePlacedCalls(targetOf(edge), { host: "browser", executor: "tab-b", tools }),
    ]);
    expect([...(first ?? []), ...(second ?? [])]).toHaveLength(1);
    expect((await edge.wait(submission.id)).status).toBe("succeeded");
    expect(world.ranAt).toEqual(["tab"]);
    // An edge executor takes nothing meant for a browser.
    expect(await executePlacedCalls(targetOf(edge), { host: "edge", executor: "e", tools })).toEqual([]);
    await edge.close();
  });
});

describe("an executor over HTTP in a session with many waits", () => {
  /** Serves `GET …/pending` as the edge does (`readPending`, `prefix` and all) and `POST …/signals/:key`. */
  function edgeFetch(session: Session): typeof fetch {
    return (async (input: string, init?: RequestInit) => {
      const url = new URL(input);
      if (url.pathname.endsWith("/pending")) {
        const query = (name: string) => url.searchParams.get(name) ?? undefined;
        const prefix = query("prefix");
        const page = await session.readPending({
          limit: Number(query("limit") ?? 100),
          ...(prefix !== undefined && { prefix }),
        });
        return Response.json({ pending: page.waits, next: page.next ?? null });
      }
      const key = decodeURIComponent(url.pathname.split("/signals/")[1] ?? "");
      const body = JSON.parse(String(init?.body)) as { requestId: string; payload: unknown };
      const receipt = await session.signal(key, body.payload, { requestId: body.requestId });
      return Response.json(receipt, { status: receipt.duplicate ? 200 : 201 });
    }) as typeof fetch;
  }

  it("finds the placed call however many newer waits of the app the session holds", async () => {
    const signed: string[] = [];
    const sign = defineTool({
      name: "sign_document",
      description: "Signs in the browser",
      input: z.object({ document: z.string() }),
      replay: "unsafe",
      runsOn: "browser",
      execute: ({ document }) => {
        signed.push(document);
        return { signed: true };
      },
    });
    const model = scriptedModel([
      { toolCalls: [{ name: "sign_document", args: { document: "lease.pdf" } }] },
      { text: "Done." },
    ]);
    const order = defineTask({
      kind: "order",
      version: 1,
      input: z.object({ key: z.string() }),
      phases: {
        pay: (ctx) => ctx.waitFor(ctx.input.key, { next: "paid" }),
        paid: (ctx) => ctx.complete(null),
      },
    });
    const agent = createAgent({ model, tools: [sign] });
    const registry = createRegistry({
      ...agent,
      tasks: [...agent.tasks, order],
      signals: [defineSignal({ key: "order:*", schema: z.object({ paid: z.boolean() }) })],
    });
    const edge = await openSession({ id: "many", storage: memoryStorage(), registry, host: "edge" });
    await edge.resume();
    const submission = await edge.submit({ requestId: "r1", conversationId: "main", input: "Sign it" });
    await edge.whenIdle();
    expect(edge.pending().map((wait) => wait.key.split(":")[0])).toEqual(["run-on"]);
    // Then 1,100 orders wait for their payment webhooks: newer than the call, more than the largest page.
    await edge.commit((draft) => {
      for (let i = 0; i < 1_100; i++) draft.spawn("order", { key: `order:${i}` });
    });
    await edge.whenIdle();
    expect((await edge.readPending()).waits.some((wait) => wait.key.startsWith("run-on:"))).toBe(false);
    const target = edgeExecutorTarget({
      baseUrl: "https://edge.test",
      token: "t",
      sessionId: "many",
      fetch: edgeFetch(edge),
    });
    const executed = await executePlacedCalls(target, {
      host: "browser",
      executor: "tab-a",
      tools: [sign],
      acceptWaitMs: 1_000,
    });
    expect(executed).toEqual([expect.objectContaining({ outcome: "ok", reported: true })]);
    expect((await edge.wait(submission.id)).status).toBe("succeeded");
    expect(signed).toEqual(["lease.pdf"]);
    await edge.close();
  });
});
