/**
 * What a host needs to continue a session (issue 21): `checkEnvironment` tells before a deploy which stored
 * sessions a registry could not continue and why, without writing anything; an edge whose registry lacks
 * what a linked session's unfinished work uses refuses the hand-off, and the session stays with the tab.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  approvedPlan,
  campaignModel,
  campaignRegistry,
  emailCampaign,
  planApproval,
  sendApprovedNotice,
} from "../../examples/five-emails/app.ts";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import {
  checkEnvironment,
  createAgent,
  createRegistry,
  defineTool,
  EnvironmentError,
  type Json,
  memoryStorage,
  openSession,
  type ToolDefinition,
} from "../../src/index.ts";
import { CrashingStorage } from "../../src/testing/index.ts";
import { SESSION, TwoHosts } from "../support/two-hosts.ts";

const REQUEST = { requestId: "notice-1", conversationId: "main", input: "Send the approved notice" };

/** A store holding `stuck` (the campaign cut off after its second mail) and `done` (finished). */
async function storedSessions() {
  const disk = memoryStorage();
  const mail = new MailService();
  for (const id of ["stuck", "done"]) {
    const handle = new CrashingStorage(disk.reopen());
    mail.onAccepted = (_r, count) => {
      if (id === "stuck" && count === 2) handle.kill();
    };
    const session = await openSession({ id, storage: handle, registry: campaignRegistry(mail) });
    await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
    const submission = await session.submit({ ...REQUEST, requestId: `r-${id}` });
    await session.resume();
    if (id === "done") await session.wait(submission.id);
    else await session.whenIdle();
    mail.reachable = true;
  }
  return { disk, mail };
}

/** The campaign's registry with `send_email` replaced (or left out). */
// biome-ignore lint/suspicious/noExplicitAny: a tool of any argument type, as createAgent takes them
function registryWith(sendEmail: ToolDefinition<any> | undefined) {
  const agent = createAgent({
    model: campaignModel(),
    tools: [...(sendEmail ? [sendEmail] : []), sendApprovedNotice],
  });
  return createRegistry({ ...agent, tasks: [...agent.tasks, emailCampaign], signals: [planApproval] });
}

describe("checkEnvironment: can this registry continue these sessions?", () => {
  it("names every unfinished task a registry cannot continue, and writes nothing", async () => {
    const { disk, mail } = await storedSessions();
    const heads = async () =>
      Promise.all(
        ["stuck", "done"].map(
          async (id) => (await disk.open(id, { mode: "read", at: 0, entryTail: 0, settled: 0 }))?.meta.value,
        ),
      );
    const before = await heads();

    const [stuck, done, missing] = await checkEnvironment(
      disk,
      ["stuck", "done", "nobody"],
      campaignRegistry(mail),
    );
    expect(stuck).toMatchObject({ sessionId: "stuck", ok: true, problems: [] });
    expect(stuck?.kinds.map((k) => k.kind).sort()).toEqual(
      ["agent.generate", "agent.tool", "email-campaign"].sort(),
    );
    expect(done).toMatchObject({ ok: true, kinds: [] });
    expect(missing?.ok).toBe(false);
    expect(missing?.problems[0]?.reason).toContain("nobody");

    // The tool is gone: each of its unfinished calls is named.
    const [gone] = await checkEnvironment(disk, ["stuck"], registryWith(undefined));
    expect(gone?.ok).toBe(false);
    const toolProblems = gone?.problems.filter((p) => p.kind === "agent.tool") ?? [];
    // Mails go one at a time: the unfinished call is the second, in flight when the process died.
    expect(toolProblems.length).toBe(1);
    expect(toolProblems[0]?.reason).toBe('tool "send_email" is not registered here');

    // The tool is now declared safe to re-run: calls whose unsafe intent was saved would be re-run.
    const safe = defineTool({
      name: "send_email",
      description: "Send one email",
      input: z.object({ to: z.string(), body: z.string() }),
      replay: "safe",
      execute: () => ({ sent: true }),
    });
    const [turned] = await checkEnvironment(disk, ["stuck"], registryWith(safe));
    expect(turned?.ok).toBe(false);
    expect(
      turned?.problems.some((p) => p.reason.includes("was unsafe when this call's intent was saved")),
    ).toBe(true);

    // The task kind is gone.
    const agent = createAgent({ model: campaignModel(), tools: [] });
    const [noKind] = await checkEnvironment(disk, ["stuck"], createRegistry({ ...agent }));
    expect(noKind?.problems.map((p) => p.reason)).toContain('no task kind "email-campaign" is registered');
    // The finished session needs nothing, whatever the registry.
    expect((await checkEnvironment(disk, ["done"], createRegistry()))[0]?.ok).toBe(true);

    expect(await heads()).toEqual(before);
  });

  it("an edge that cannot continue the run refuses the hand-off; the session stays with the tab, which finishes it", async () => {
    const hosts = new TwoHosts(10_000, () => registryWith(undefined));
    const { linked } = await hosts.openTab();
    let handOff: Promise<unknown> | undefined;
    hosts.mail.onAccepted = (_r, count) => {
      if (count === 2) handOff = linked.handOff().catch((e: unknown) => e);
    };
    await linked.session.commit((d) =>
      d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
    await linked.session.submit(REQUEST);
    await linked.session.resume();
    for (let i = 0; i < 50 && !handOff; i++) await new Promise((r) => setImmediate(r));
    const refused = await handOff;
    expect(refused).toBeInstanceOf(EnvironmentError);
    expect((refused as EnvironmentError).message).toContain('tool "send_email" is not registered here');
    expect((await hosts.host.ownership(SESSION))?.holder).toBe("tab-1");
    // Its lease running out changes nothing: the edge still cannot continue it.
    hosts.clock.advance(10_001);
    expect(await hosts.host.expire(SESSION)).toBe(false);
    expect(hosts.edgeStarts).toBe(0);
    // The tab links again and finishes the run: each mail once.
    hosts.mail.onAccepted = undefined;
    const back = await hosts.openTab();
    await back.linked.session.resume();
    const ended = await back.linked.session.wait(
      (await back.linked.session.readSubmissionForRequest(REQUEST.requestId))?.id ?? "",
    );
    expect(ended.status).toBe("succeeded");
    expect([...hosts.mail.deliveryCounts().values()]).toEqual([1, 1, 1, 1, 1]);
  });
});
