/**
 * The react-chat example's session worker: an agent with one tool (a clock) and a scripted model that
 * streams its answer slowly, so a reload mid-answer is easy to try. Swap in `openAiCompatibleModel` or
 * `aiSdkModel` for a real one.
 */
import { z } from "zod";
import { createAgent, createRegistry, defineTool, scriptedModel, systemTimers } from "../../src/index.ts";
import { exposeSessionWorker } from "../../worker/index.ts";

const clock = defineTool({
  name: "local_time",
  description: "The time in a city",
  input: z.object({ city: z.string() }),
  replay: "safe",
  execute: ({ city }) => ({ city, time: "09:41" }),
});

const model = scriptedModel(
  [
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? {
            text: "It is 09:41 in Lisbon. This answer streams slowly on purpose: reload the page while it is being written, and the chat picks it up again from what was committed — the question is not sent twice and the tool does not run again.",
          }
        : { toolCalls: [{ name: "local_time", args: { city: "Lisbon" } }] },
  ],
  { chunkSize: 8, chunkDelayMs: 90, timers: systemTimers },
);

void exposeSessionWorker({
  database: "durable-agent-react-chat",
  sessionId: "chat",
  registry: () => createRegistry({ ...createAgent({ model, tools: [clock] }) }),
});
