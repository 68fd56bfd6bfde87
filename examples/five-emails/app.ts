/**
 * The five-email reference scenario (DESIGN §1) as an app on the kernel: an approved recipient plan
 * (a typed Document), a `send_email` tool that is unsafe to replay but confirmable by operation id, a
 * campaign task that sends one child task per email, one at a time, and — for contrast — the
 * naive black-box `send_batch_emails` tool.
 */
import { z } from "zod";
import {
  compiled,
  createAgent,
  createRegistry,
  defineDocument,
  defineSignal,
  defineTask,
  defineTool,
  type Json,
  type Model,
  type Received,
  scriptedModel,
  TOOL_TASK,
  type ToolDefinition,
} from "../../src/index.ts";
import type { MailService, Receipt } from "./mail-service.ts";

export const RECIPIENTS = [
  "ana@example.com",
  "bo@example.com",
  "cy@example.com",
  "di@example.com",
  "ed@example.com",
];

export const emailPlan = defineDocument({
  type: "email-plan",
  schema: z.object({
    recipients: z.array(z.string().email()),
    body: z.string(),
    approved: z.boolean(),
    /** A draft plan not approved by then is dropped: the campaign ends without sending anything. */
    approveBy: z.number().optional(),
    /** Recorded on the plan by the campaign once it has run: how many of its mails were delivered. */
    result: z.object({ delivered: z.number().int(), total: z.number().int() }).optional(),
    /** How many times a person rejected it: each ask after a rejection waits on a new key. */
    rejections: z.number().int().min(0).optional(),
  }),
});
type Plan = z.infer<typeof emailPlan.schema>;

/**
 * The email tools' arguments. The tools close over a mail client, so they are defined when a registry is
 * built, which at the edge happens inside a request, where workerd refuses to generate code; compiled here,
 * at module level, the schema keeps zod's compiled parser wherever the tools are defined.
 */
const EmailArgs = compiled(z.object({ to: z.string().email(), body: z.string() }));
const BatchArgs = compiled(z.object({ recipients: z.array(z.string().email()), body: z.string() }));

/** One email, sent with the tool call's operation id as the provider's idempotency key. */
export function sendEmailTool(mail: MailService) {
  return defineTool({
    name: "send_email",
    description: "Send one email",
    input: EmailArgs,
    replay: "unsafe",
    confirm: (operationId) => {
      const receipt = mail.lookup(operationId);
      return receipt === undefined ? undefined : receiptJson(receipt);
    },
    execute: ({ to, body }, { operationId }) =>
      receiptJson(mail.send({ to, body, idempotencyKey: operationId })),
  });
}

/** The whole campaign as one tool call backed by the campaign task. */
export const sendApprovedNotice = defineTool({
  name: "send_approved_notice",
  description: "Send the approved notice to every recipient of the approved plan, then summarise",
  input: z.object({ planId: z.string() }),
  replay: "unsafe",
  task: "email-campaign",
});

/** For contrast: one opaque call that sends everything; after a crash nobody knows how far it got. */
export function sendBatchTool(mail: MailService) {
  return defineTool({
    name: "send_batch_emails",
    description: "Send the same email to many recipients",
    input: BatchArgs,
    replay: "unsafe",
    execute: ({ recipients, body }, { operationId, reportProgress }) => {
      const sent: string[] = [];
      for (const [i, to] of recipients.entries()) {
        mail.send({ to, body, idempotencyKey: `${operationId}#${i}` });
        sent.push(to);
        reportProgress({ sent });
      }
      return { sent };
    },
  });
}

/**
 * The key a person approves (or rejects) a plan on: `plan-approval:<plan id>`, and after `rejections`
 * rejections `plan-approval:<plan id>:<rejections>` (a key takes one decision, so each ask has its own).
 */
export const planApprovalKey = (planId: string, rejections = 0) =>
  rejections === 0 ? `plan-approval:${planId}` : `plan-approval:${planId}:${rejections}`;

/** A decision on a plan. It may come before the campaign asks for it: it is kept until it does. */
export const planApproval = defineSignal({
  key: "plan-approval:*",
  schema: z.object({ approved: z.boolean(), reason: z.string().max(500).optional() }),
});
type PlanDecision = z.infer<typeof planApproval.schema>;

/**
 * Sends one child `send_email` tool task per recipient, one at a time, and writes the summary. A plan that
 * is not approved yet is waited on, durably: nothing is sent until a person decides. Each mail starts once
 * the one before has its receipt committed, so a process that dies mid-campaign leaves the article's
 * picture: the receipts so far committed, at most one mail in doubt (confirmed by its operation id on
 * recovery), and the rest not started.
 */
export const emailCampaign = defineTask({
  kind: "email-campaign",
  version: 1,
  input: z.object({ planId: z.string() }),
  phases: {
    send: (ctx) => {
      const plan = ctx.document(ctx.input.planId)?.value as Plan | undefined;
      if (!plan) return ctx.fail(`no plan "${ctx.input.planId}"`);
      if (!plan.approved) {
        const about = { plan: ctx.input.planId, recipients: plan.recipients, body: plan.body };
        const deadline =
          plan.approveBy === undefined ? {} : { deadline: { at: plan.approveBy, next: "expired" } };
        const key = planApprovalKey(ctx.input.planId, plan.rejections);
        return ctx.waitFor(
          key,
          { next: "decided", about, ...deadline },
          { rejections: plan.rejections ?? 0 },
        );
      }
      return ctx.next("mail", 0);
    },
    /** Mail number `data` (from 0), then the next one once it ended; the summary after the last. */
    mail: (ctx) => {
      const plan = ctx.document(ctx.input.planId)?.value as Plan;
      const i = ctx.data as number;
      const to = plan.recipients[i];
      if (to === undefined) return ctx.next("summarise");
      // Each mail is a tool call with its own stored operation id (its task id).
      const id = ctx.spawn(
        TOOL_TASK,
        {
          toolCallId: `${ctx.task.id}:mail-${i}`,
          name: "send_email",
          args: JSON.stringify({ to, body: plan.body }),
          conversationId: ctx.task.conversationId ?? "main",
        },
        { id: `${ctx.task.id}/mail-${i}` },
      );
      return ctx.wait([id], { policy: "allSettled", next: "mail" }, i + 1);
    },
    decided: (ctx) => {
      const got = ctx.data as unknown as Received<{ rejections: number } | null>;
      // A campaign that began waiting before rejections were counted passed no data: its key is the first.
      const asked = got.data?.rejections ?? 0;
      const decision = got.signals[planApprovalKey(ctx.input.planId, asked)] as PlanDecision;
      const conversationId = ctx.task.conversationId ?? "main";
      if (!decision.approved) {
        // Recorded on the plan, so the next ask for it waits on a key of its own.
        const rejections = asked + 1;
        ctx.patchDocument(ctx.input.planId, [{ op: "add", path: "/rejections", value: rejections }]);
        const text = `Campaign ${ctx.input.planId} was rejected${decision.reason ? `: ${decision.reason}` : ""}. Nothing was sent.`;
        ctx.appendEntry(conversationId, { kind: "note", text });
        return ctx.complete({ delivered: 0, total: 0, rejected: decision.reason ?? true });
      }
      // The approval is committed on the plan with the move to sending: one commit.
      ctx.patchDocument(ctx.input.planId, [{ op: "replace", path: "/approved", value: true }]);
      return ctx.next("send");
    },
    expired: (ctx) => {
      const text = `Campaign ${ctx.input.planId} was not approved in time. Nothing was sent.`;
      ctx.appendEntry(ctx.task.conversationId ?? "main", { kind: "note", text });
      return ctx.complete({ delivered: 0, total: 0, expired: true });
    },
    summarise: (ctx) => {
      const plan = ctx.document(ctx.input.planId)?.value as Plan;
      const results = ctx.children().map((child, i) => {
        const result =
          child.state.status === "succeeded"
            ? (child.state.result as { outcome: string; output: Json; via: string })
            : undefined;
        const output = result?.output as { to?: string; error?: string } | undefined;
        // A failed send has no receipt: its recipient is the plan's, its reason the tool's error.
        const error =
          output?.error ?? (child.state.status === "failed" ? child.state.error.message : undefined);
        return {
          to: output?.to ?? plan.recipients[i] ?? "?",
          outcome: result?.outcome ?? child.state.status,
          via: result?.via ?? "?",
          ...(error !== undefined && result?.outcome !== "ok" && { error }),
        };
      });
      const delivered = results.filter((r) => r.outcome === "ok").length;
      const text = `Campaign ${ctx.input.planId}: ${delivered} of ${results.length} emails delivered (${results
        .map(
          (r) =>
            `${r.to} ${r.outcome}${r.via === "confirm" ? " (confirmed by operation id)" : ""}${r.error ? `: ${r.error}` : ""}`,
        )
        .join(", ")}).`;
      ctx.appendEntry(ctx.task.conversationId ?? "main", { kind: "note", text });
      ctx.patchDocument(ctx.input.planId, [
        { op: "add", path: "/result", value: { delivered, total: results.length } },
      ]);
      return ctx.complete({ delivered, total: results.length, results });
    },
  },
});

/** What the campaign tool reports back to the model and the pages (see `emailCampaign`). */
export interface CampaignOutput {
  readonly delivered?: number;
  readonly total?: number;
  readonly rejected?: string | true;
  readonly expired?: true;
}

/**
 * The scripted model for the demo: asked (the user's message last), it starts the campaign; given the
 * campaign tool's result (a tool message last), it says what that result says — as a model answers what it
 * is given, so a second request in the same conversation starts its own call instead of summarising the
 * first one's.
 */
export function campaignModel(): Model {
  // A conversation asking to stamp the page gets the browser-only `stamp_page` tool (see `stampPageTool`).
  const stamping = (request: { messages: readonly { role: string; content: string }[] }) =>
    /stamp/i.test(request.messages.findLast((m) => m.role === "user")?.content ?? "");
  return scriptedModel([
    (request) => {
      const last = request.messages.at(-1);
      if (last?.role !== "tool")
        return stamping(request)
          ? { toolCalls: [{ name: "stamp_page", args: {} }] }
          : {
              text: "Sending the approved notice.",
              toolCalls: [{ name: "send_approved_notice", args: { planId: "plan" } }],
            };
      const result = JSON.parse(last.content) as { outcome?: string; output?: unknown };
      if (stamping(request))
        return { text: `Stamped by ${(result.output as { stampedBy?: string })?.stampedBy ?? "nobody"}.` };
      return { text: campaignAnswer(result.outcome, (result.output ?? {}) as CampaignOutput) };
    },
  ]);
}

/** The model's answer to the campaign tool's result: what happened, never more. */
function campaignAnswer(outcome: string | undefined, output: CampaignOutput): string {
  if (outcome !== "ok")
    return `The campaign did not finish (${outcome ?? "no result"}); nothing more is known.`;
  if (output.rejected !== undefined)
    return `Not sent: the plan was rejected${typeof output.rejected === "string" ? ` (${output.rejected})` : ""}.`;
  if (output.expired) return "Not sent: nobody approved the plan in time.";
  const delivered = output.delivered ?? 0;
  const total = output.total ?? 0;
  const failed = total - delivered;
  return `Done: ${delivered} of ${total} notices delivered${failed > 0 ? `; ${failed} failed` : ""}.`;
}

/**
 * A tool only a browser tab can run (`runsOn: "browser"`): it stamps the page the user has open. A host
 * of another kind (the edge) never runs it: the call waits, listed as pending, until a tab takes it.
 */
export function stampPageTool(
  stamp: () => Json = () => {
    throw new Error("there is no page to stamp on this host");
  },
) {
  return defineTool({
    name: "stamp_page",
    description: "Stamps the page the user has open (only a browser tab can)",
    input: z.object({}),
    replay: "safe",
    runsOn: "browser",
    execute: () => stamp(),
  });
}

/** The contrast model: one black-box batch call. */
export function batchModel(): Model {
  return scriptedModel([
    { toolCalls: [{ name: "send_batch_emails", args: { recipients: RECIPIENTS, body: "Approved notice" } }] },
    (request) => {
      const last = [...request.messages].reverse().find((m) => m.role === "tool");
      const outcome = last ? (JSON.parse(last.content) as { outcome: string }).outcome : "none";
      return { text: `The batch call ended ${outcome}; I cannot tell who got the notice without checking.` };
    },
  ]);
}

/** A mail provider reached over the network (the browser demo's IndexedDB stand-in, the edge demo's DO). */
export interface AsyncMailService {
  send(message: { to: string; idempotencyKey: string }): Promise<Receipt>;
  lookup(operationId: string): Promise<Receipt | undefined>;
}

/** The campaign with an asynchronous mail provider: what the browser and edge demos run. */
export function asyncCampaignRegistry(
  mail: AsyncMailService,
  model: Model = campaignModel(),
  // biome-ignore lint/suspicious/noExplicitAny: a tool of any argument type
  stampPage: ToolDefinition<any> = stampPageTool(),
) {
  const sendEmail = defineTool({
    name: "send_email",
    description: "Send one email",
    input: EmailArgs,
    replay: "unsafe",
    confirm: async (operationId) => {
      const receipt = await mail.lookup(operationId);
      return receipt === undefined ? undefined : receiptJson(receipt);
    },
    execute: async ({ to }, { operationId }) =>
      receiptJson(await mail.send({ to, idempotencyKey: operationId })),
  });
  const agent = createAgent({ model, tools: [sendEmail, sendApprovedNotice, stampPage] });
  return createRegistry({
    ...agent,
    tasks: [...agent.tasks, emailCampaign],
    documents: [emailPlan],
    signals: [planApproval],
  });
}

export function campaignRegistry(
  mail: MailService,
  model: Model = campaignModel(),
  // biome-ignore lint/suspicious/noExplicitAny: a tool of any argument type
  stampPage: ToolDefinition<any> = stampPageTool(),
) {
  const agent = createAgent({
    model,
    tools: [sendEmailTool(mail), sendApprovedNotice, sendBatchTool(mail), stampPage],
  });
  return createRegistry({
    ...agent,
    tasks: [...agent.tasks, emailCampaign],
    documents: [emailPlan],
    signals: [planApproval],
  });
}

export const approvedPlan = (): Plan => ({ recipients: RECIPIENTS, body: "Approved notice", approved: true });
/** The same plan before anyone approved it: the campaign waits for `plan-approval:<plan id>`. */
export const draftPlan = (approveBy?: number): Plan => ({
  ...approvedPlan(),
  approved: false,
  ...(approveBy !== undefined && { approveBy }),
});

function receiptJson(receipt: Receipt): Json {
  return { messageId: receipt.messageId, to: receipt.to, operationId: receipt.operationId };
}
