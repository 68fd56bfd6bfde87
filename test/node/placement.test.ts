/**
 * Tools run where they can (issue 21): a browser-only tool called while the edge leads the session is a
 * visible, durable wait — not a failure, and never run at the edge — until a tab leads again and runs it.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createAgent,
  createRegistry,
  defineTool,
  type Session,
  scriptedModel,
  takePlacedCalls,
} from "../../src/index.ts";
import { TwoHosts } from "../support/two-hosts.ts";

const settle = async (rounds = 20) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A registry whose agent reads a file only the user's browser has; `ran` records where it ran. */
function fileAgent(ran: string[], where: string) {
  const pickFile = defineTool({
    name: "pick_file",
    description: "Read the file the user picked in the page",
    input: z.object({ purpose: z.string() }),
    replay: "safe",
    runsOn: "browser",
    execute: () => {
      ran.push(where);
      return { name: "notes.txt", text: "from the tab" };
    },
  });
  const model = scriptedModel([
    { toolCalls: [{ name: "pick_file", args: { purpose: "summary" } }] },
    (request) => {
      const tool = [...request.messages].reverse().find((m) => m.role === "tool");
      const result = tool ? (JSON.parse(tool.content) as { output?: { text?: string } }) : {};
      return { text: `Read: ${result.output?.text ?? "nothing"}` };
    },
  ]);
  return createRegistry({ ...createAgent({ model, tools: [pickFile] }) });
}

describe("tools that run only in a browser", () => {
  it("wait visibly while the edge leads, and run in the tab once it leads again", async () => {
    const ran: string[] = [];
    const hosts = new TwoHosts(
      10_000,
      () => fileAgent(ran, "edge"),
      () => fileAgent(ran, "tab"),
    );
    const first = await hosts.openTab();
    await first.linked.handOff(); // the tab goes away; the edge leads
    const edge = hosts.edgeSession as Session;
    const submission = await edge.submit({
      requestId: "r1",
      conversationId: "main",
      input: "Summarise my file",
    });
    await settle();
    // Pending, with what it waits for; not failed; not run at the edge.
    const [pending] = edge.pending();
    expect(pending?.key).toMatch(/^run-on:/);
    expect(pending?.about).toMatchObject({
      tool: "pick_file",
      runsOn: "browser",
      arguments: { purpose: "summary" },
    });
    expect(edge.submission(submission.id)?.status).toBe("running");
    expect(ran).toEqual([]);
    // A new edge instance (evicted meanwhile) does not take it either.
    hosts.killEdge();
    expect(await hosts.edgeAlarm()).toBe(true);
    await settle();
    expect(ran).toEqual([]);
    expect((hosts.edgeSession as Session).pending().map((p) => p.key)).toEqual([pending?.key]);

    // The tab leads again: it takes the call and runs it, once.
    const back = await hosts.openTab();
    await back.linked.session.resume();
    expect(await takePlacedCalls(back.linked.session, "browser")).toBe(1);
    const ended = await back.linked.session.wait(submission.id);
    expect(ended.status).toBe("succeeded");
    expect(ended.result).toMatchObject({ text: "Read: from the tab" });
    expect(ran).toEqual(["tab"]);
    expect(back.linked.session.pending()).toEqual([]);
  });
});
