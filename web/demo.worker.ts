/** The demo's session worker: the kernel, the five-email app, and the tab-leadership host. */

import { approvedPlan, draftPlan } from "../examples/five-emails/app.ts";
import type { Json } from "../src/index.ts";
import { exposeSessionWorker } from "../worker/index.ts";
import { BrowserMailService, demoRegistry, streamingRegistry } from "./demo-app.ts";

// The page picks the scenario through the worker's name: "emails" (default) or "stream", optionally with
// the mail provider's delay per send and whether the plan waits for a person: "emails:3000:ask".
const [scenarioName, delay, approval] = self.name.split(":");
const scenario = scenarioName === "stream" ? "stream" : "emails";
const mail = new BrowserMailService(undefined, delay ? Number(delay) : undefined);
void exposeSessionWorker({
  database: "durable-agent-demo",
  sessionId: scenario === "stream" ? "stream-demo" : "support-42",
  registry: () => (scenario === "stream" ? streamingRegistry() : demoRegistry(mail)),
  // The plan exists before this tab accepts any input: a draft the campaign asks a person to approve
  // ("ask", the page's default), or an approved one ("auto").
  onLead: async (session) => {
    if (scenario === "stream" || session.view().documents.some((d) => d.id === "plan")) return;
    const plan = approval === "auto" ? approvedPlan() : draftPlan();
    await session.commit((draft) => draft.setDocument("plan", "email-plan", plan as unknown as Json));
  },
});
