/**
 * Writes a session whose waits are all parked (`liveWaits: 0`): `count` tasks started without a
 * Submission, each waiting for signal `ask:<n>`, created `perCommit` to a commit. Used by the devtools
 * page test, in the browser, over real IndexedDB.
 */
import { z } from "zod";
import { createRegistry, defineSignal, defineTask, openSession, type Storage } from "../../src/index.ts";

/** The task the seeded waits run (a session that answers them registers it too). */
export const askerTask = defineTask({
  kind: "asker",
  version: 1,
  input: z.object({ n: z.number().int(), due: z.number().optional() }),
  phases: {
    ask: (ctx) =>
      ctx.waitFor(`ask:${ctx.input.n}`, {
        next: "done",
        about: { question: `question ${ctx.input.n}` },
        ...(ctx.input.due !== undefined && { deadline: { at: ctx.input.due, next: "done" } }),
      }),
    done: (ctx) => ctx.complete(null),
  },
});

/** The signal of those waits. */
export const askSignal = defineSignal({ key: "ask:*", schema: z.object({ answer: z.string() }) });

export async function writeParkedWaitsForTest(
  storage: Storage,
  sessionId: string,
  count: number,
  perCommit = 50,
  /** Keys no wait awaits, each sent one signal (kept early). */
  early: readonly string[] = [],
  /**
   * How many of the last waits have a deadline that passed with no writer to act on it: the session that
   * writes them runs an hour behind, and their deadline is a minute after its time.
   */
  overdue = 0,
): Promise<void> {
  const registry = createRegistry({ tasks: [askerTask], signals: [askSignal] });
  const behind = Date.now() - 3_600_000;
  const clock = overdue > 0 ? { now: () => behind } : undefined;
  const session = await openSession({
    id: sessionId,
    storage,
    registry,
    liveWaits: 0,
    ...(clock && { clock }),
  });
  await session.resume();
  for (let n = 0; n < count; n += perCommit) {
    await session.commit((draft) => {
      for (let i = n; i < Math.min(count, n + perCommit); i++)
        draft.spawn("asker", { n: i, ...(i >= count - overdue && { due: behind + 60_000 }) });
    });
  }
  await session.whenIdle();
  for (const key of early) await session.signal(key, { answer: `early ${key}` }, { requestId: key });
  await session.close();
}
