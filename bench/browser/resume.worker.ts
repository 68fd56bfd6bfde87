/** The worker of the worker/resume benchmark: the browser host, resuming the probe task on start. */
import { exposeSessionWorker } from "../../worker/index.ts";
import { resumeRegistry } from "./resume-registry.ts";

void exposeSessionWorker({
  database: self.name,
  sessionId: "bench",
  registry: () => resumeRegistry(self.name),
});
