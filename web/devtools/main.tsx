/** The bundled devtools page. Local sessions of the demo app get its registry, so recovery can be previewed. */
import { BrowserMailService, demoRegistry, streamingRegistry } from "../demo-app.ts";
import { mountDevtools } from "./app.tsx";

mountDevtools(document.getElementById("app") as HTMLElement, {
  registryFor: (database, sessionId) => {
    if (database !== "durable-agent-demo") return undefined;
    return sessionId === "stream-demo" ? streamingRegistry() : demoRegistry(new BrowserMailService());
  },
  // Illustrative prices (dollars per million tokens) for the demo's scripted model, not any provider's: a
  // real app passes its own, and says where they come from.
  prices: { scripted: { input: 3, output: 15 } },
  pricesFrom:
    "illustrative prices of $3 in / $15 out per million tokens (set in web/devtools/main.tsx, not a provider's)",
});
