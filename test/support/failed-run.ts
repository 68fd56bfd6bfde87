/**
 * A run that goes wrong in every way a tool call can, for the devtools to show truthfully: one Submission
 * whose model calls three tools at once — `lookup_price` answers 503, `charge_card` (unsafe, no way to
 * confirm) and `send_receipt` (unsafe, confirmable by operation id) are cut off by a process death after
 * their intent committed. A second process resumes: the charge is recorded as interrupted, the receipt is
 * confirmed to have been sent, and the model answers. Runs in Node (memory store) and in a page (IndexedDB).
 */
import { z } from "zod";
import {
  createAgent,
  createRegistry,
  defineTool,
  openSession,
  type Session,
  type Storage,
  scriptedModel,
} from "../../src/index.ts";

export const FAILED_SESSION = "failures";

function registry(started: () => void) {
  const lookupPrice = defineTool({
    name: "lookup_price",
    description: "Looks a price up",
    input: z.object({ sku: z.string() }),
    replay: "safe",
    execute: () => {
      throw new Error("HTTP 503 Service Unavailable from prices.example");
    },
  });
  const chargeCard = defineTool({
    name: "charge_card",
    description: "Charges a card",
    input: z.object({ cents: z.number().int() }),
    replay: "unsafe",
    execute: () => {
      started();
      return new Promise<never>(() => undefined); // the process dies while the charge is in flight
    },
  });
  const sendReceipt = defineTool({
    name: "send_receipt",
    description: "Sends a receipt",
    input: z.object({ to: z.string() }),
    replay: "unsafe",
    confirm: (operationId) => ({ receipt: `sent under ${operationId}` }),
    execute: () => {
      started();
      return new Promise<never>(() => undefined);
    },
  });
  const model = scriptedModel([
    {
      toolCalls: [
        { name: "lookup_price", args: { sku: "A-1" } },
        { name: "charge_card", args: { cents: 1299 } },
        { name: "send_receipt", args: { to: "ana@example.com" } },
      ],
    },
    { text: "The price service failed; the charge may not have gone through; the receipt was sent." },
  ]);
  return createRegistry({ ...createAgent({ model, tools: [lookupPrice, chargeCard, sendReceipt] }) });
}

/** Polls `done` every 5 ms (the store's own timers drive the run; nothing here is timed). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!done()) throw new Error("the failed run did not reach its crash point");
}

/**
 * Writes the run into fresh stores from `storage` (each call: one process). Returns the final session,
 * still open, and the Submission's id.
 */
export async function writeFailedRun(
  storage: () => Storage,
): Promise<{ session: Session; submissionId: string }> {
  let started = 0;
  const first = await openSession({
    id: FAILED_SESSION,
    storage: storage(),
    registry: registry(() => started++),
  });
  await first.resume();
  const sub = await first.submit({ requestId: "checkout-1", conversationId: "checkout", input: "Check out" });
  // Both unsafe calls are executing (their intent is durable) and the failed lookup has committed.
  await until(
    () =>
      started === 2 &&
      first
        .view()
        .tasks.some(
          (t) =>
            t.input &&
            (t.input as { name?: string }).name === "lookup_price" &&
            t.state.status === "succeeded",
        ),
  );
  // The process dies here: nothing more of it is written (the next writer fences it off).
  const second = await openSession({
    id: FAILED_SESSION,
    storage: storage(),
    registry: registry(() => started++),
  });
  await second.resume();
  const done = await second.wait(sub.id);
  if (done.status !== "succeeded") throw new Error(`the failed run ended ${done.status}`);
  return { session: second, submissionId: sub.id };
}
