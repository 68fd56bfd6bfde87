/**
 * The react-chat example's session worker: an agent with a clock and a booking tool that asks for approval,
 * and a scripted model that streams its answer slowly, so a reload mid-answer (or while an approval is
 * pending) is easy to try. Swap in `openAiCompatibleModel` or
 * `aiSdkModel` for a real one.
 */

import {
  createAgent,
  createRegistry,
  defineTool,
  type ModelRequest,
  scriptedModel,
  systemTimers,
} from "durable-agent";
import { exposeSessionWorker } from "durable-agent/worker";
import { z } from "zod";

const clock = defineTool({
  name: "local_time",
  description: "The time in a city",
  input: z.object({ city: z.string() }),
  replay: "safe",
  execute: ({ city }) => ({ city, time: "09:41" }),
});

/** Irreversible, so it asks first: the call waits, durably, for the person's Approve or Reject. */
const book = defineTool({
  name: "book_table",
  description: "Books a table for a number of people",
  input: z.object({ people: z.number().int().positive() }),
  replay: "safe",
  approval: true,
  execute: ({ people }) => ({ booked: people, at: "20:00" }),
});

const lastUserText = (request: ModelRequest) =>
  String(request.messages.findLast((m) => m.role === "user")?.content ?? "");

const WORDS = [
  "one",
  "two",
  "three",
  "four",
  "five",
  "six",
  "seven",
  "eight",
  "nine",
  "ten",
  "eleven",
  "twelve",
];

/** How many people the user asked a table for ("… for 4 …", "… for four …"; 2 when it does not say). */
function partySize(text: string): number {
  const said = /\bfor (\d{1,2}|[a-z]+)\b/i.exec(text)?.[1]?.toLowerCase() ?? "";
  const size = /^\d+$/.test(said) ? Number(said) : WORDS.indexOf(said) + 1;
  return size >= 1 ? size : 2;
}

/** The booking tool's result as the model reads it: what was booked, or nothing (rejected, failed). */
function bookingAnswer(content: string): string {
  const result = JSON.parse(content) as { outcome?: string; output?: { booked?: number; at?: string } };
  const booked = result.output?.booked;
  if (result.outcome !== "ok" || booked === undefined) return "Understood, I did not book anything.";
  return `Done: a table for ${booked} at ${result.output?.at ?? "the time given"}.`;
}

const model = scriptedModel(
  [
    (request) => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") {
        if (lastUserText(request).toLowerCase().includes("book"))
          return { text: bookingAnswer(last.content) };
        return {
          text: "It is 09:41 in Lisbon. This answer streams slowly on purpose: reload the page while it is being written, and the chat picks it up again from what was committed — the question is not sent twice and the tool does not run again.",
        };
      }
      if (lastUserText(request).toLowerCase().includes("book"))
        return { toolCalls: [{ name: "book_table", args: { people: partySize(lastUserText(request)) } }] };
      return { toolCalls: [{ name: "local_time", args: { city: "Lisbon" } }] };
    },
  ],
  { chunkSize: 8, chunkDelayMs: 90, timers: systemTimers },
);

void exposeSessionWorker({
  database: "durable-agent-react-chat",
  sessionId: "chat",
  registry: () => createRegistry({ ...createAgent({ model, tools: [clock, book] }) }),
});
