/**
 * The linked-session page's worker: the five-email campaign held in this tab's IndexedDB, linked to the
 * same session at the edge. The page sends its configuration as the first message; the worker then
 * exposes the session host (the kernel) and says so.
 */
import {
  approvedPlan,
  asyncCampaignRegistry,
  campaignModel,
  stampPageTool,
} from "../../examples/five-emails/app.ts";
import type { Receipt } from "../../examples/five-emails/mail-service.ts";
import { edgeReplica, type Json } from "../../src/index.ts";
import { exposeSessionWorker } from "../../worker/index.ts";

export interface LinkedConfig {
  readonly type: "linked-config";
  readonly edge: string;
  readonly token: string;
  readonly sessionId: string;
  readonly holder: string;
  /** `when-asked`: follow the edge's run live, and claim the session only on "Take back". */
  readonly takeBack: "at-once" | "when-asked";
}

/** The edge example's mail provider stand-in, reached over HTTP: the same provider the edge sends with. */
function edgeMail(config: LinkedConfig) {
  const call = async (path: string, body?: unknown) =>
    fetch(`${config.edge}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${config.token}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  return {
    send: async (message: { to: string; idempotencyKey: string }): Promise<Receipt> => {
      const response = await call("/mail/send", message);
      if (!response.ok) throw new Error(`mail provider: HTTP ${response.status}`);
      return (await response.json()) as Receipt;
    },
    lookup: async (operationId: string): Promise<Receipt | undefined> => {
      const response = await call(`/mail/lookup?op=${encodeURIComponent(operationId)}`);
      if (response.status === 404) return undefined;
      if (!response.ok) throw new Error(`mail provider: HTTP ${response.status}`);
      return (await response.json()) as Receipt;
    },
  };
}

self.addEventListener(
  "message",
  (event: MessageEvent<LinkedConfig>) => {
    const config = event.data;
    void exposeSessionWorker({
      database: "durable-agent-linked",
      sessionId: config.sessionId,
      durability: "relaxed",
      // The page stamp runs here, in the tab (the edge's copy of the tool never runs it).
      registry: () =>
        asyncCampaignRegistry(
          edgeMail(config),
          campaignModel(),
          stampPageTool(() => ({ stampedBy: "the linked tab" })),
        ),
      onLead: async (session) => {
        if (!session.view().documents.some((d) => d.id === "plan"))
          await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
      },
      link: {
        remote: edgeReplica({ baseUrl: config.edge, token: config.token, sessionId: config.sessionId }),
        holder: config.holder,
        takeBack: config.takeBack,
        followEveryMs: 300,
        onStatus: (status, error) => self.postMessage({ type: "link-status", status, error: error?.message }),
      },
    });
    self.postMessage({ type: "linked-ready" });
  },
  { once: true },
);
