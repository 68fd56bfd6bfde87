/** The demo's session worker: the kernel, the five-email app, and the tab-leadership host. */

import { approvedPlan } from "../examples/five-emails/app.ts";
import type { Json } from "../src/index.ts";
import { exposeSessionWorker } from "../worker/index.ts";
import { BrowserMailService, demoRegistry, streamingRegistry } from "./demo-app.ts";

const mail = new BrowserMailService();
// The page picks the scenario through the worker's name: "emails" (default) or "stream".
const scenario = self.name === "stream" ? "stream" : "emails";
void exposeSessionWorker({
  database: "durable-agent-demo",
  sessionId: scenario === "stream" ? "stream-demo" : "support-42",
  registry: () => (scenario === "stream" ? streamingRegistry() : demoRegistry(mail)),
  // The approved plan exists before this tab accepts any input.
  onLead: async (session) => {
    if (scenario === "stream" || session.view().documents.some((d) => d.id === "plan")) return;
    await session.commit((draft) =>
      draft.setDocument("plan", "email-plan", approvedPlan() as unknown as Json),
    );
  },
});
