/** The worker of the worker/commit benchmark: a session host with no tasks, so a submit is one commit. */
import { createRegistry } from "../../src/index.ts";
import { exposeSessionWorker } from "../../worker/index.ts";

void exposeSessionWorker({ database: self.name, sessionId: "bench", registry: () => createRegistry() });
