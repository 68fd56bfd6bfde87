/**
 * The session of the worker/resume benchmark: the commit workload's document plus one probe task whose
 * phase announces (on a BroadcastChannel) the moment it starts and then runs until the page goes away.
 * Every page load re-enters it as a restart, so its restart limit is set out of reach.
 */

import { z } from "zod";
import { createRegistry, defineDocument, defineTask } from "../../src/index.ts";

export const PROBE = "resume-probe";

export function resumeChannel(database: string): BroadcastChannel {
  return new BroadcastChannel(`resume-bench:${database}`);
}

export function resumeRegistry(database: string) {
  const probe = defineTask({
    kind: PROBE,
    version: 1,
    maxRestarts: 1_000_000,
    input: z.object({}),
    phases: {
      work: async (ctx) => {
        resumeChannel(database).postMessage({ startedAt: performance.timeOrigin + performance.now() });
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
        return ctx.fail("stopped");
      },
    },
  });
  const progress = defineDocument({
    type: "progress",
    schema: z.object({ step: z.number().int(), label: z.string(), done: z.array(z.string()) }),
  });
  return createRegistry({ tasks: [probe], documents: [progress] });
}
