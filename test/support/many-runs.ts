/**
 * A session with many Submissions for the devtools at scale: each run calls one tool and answers; every
 * tenth call fails (the run succeeds with a problem). Runs in a page (IndexedDB) or in Node.
 */
import { z } from "zod";
import {
  createAgent,
  createRegistry,
  defineTool,
  openSession,
  type Storage,
  scriptedModel,
} from "../../src/index.ts";

export async function writeManyRuns(storage: Storage, count: number): Promise<void> {
  const lookup = defineTool({
    name: "lookup",
    description: "Looks a number up",
    input: z.object({ n: z.number() }),
    replay: "safe",
    execute: ({ n }) => {
      if (n % 10 === 0) throw new Error(`lookup ${n} failed`);
      return { n };
    },
  });
  const model = scriptedModel([
    (request) => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") return { text: "done" };
      const n = Number(/run (\d+)/.exec(last?.content ?? "")?.[1] ?? 0);
      return { toolCalls: [{ name: "lookup", args: { n } }] };
    },
  ]);
  const session = await openSession({
    id: "many",
    storage,
    registry: createRegistry({ ...createAgent({ model, tools: [lookup] }) }),
  });
  await session.resume();
  for (let i = 0; i < count; i++) {
    const sub = await session.submit({ requestId: `req-${i}`, conversationId: `c${i}`, input: `run ${i}` });
    await session.wait(sub.id);
  }
  await session.close();
}
