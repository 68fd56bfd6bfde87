/** Another host of one session, over a store in this process: its change log and its snapshot. */
import { z } from "zod";
import {
  createRegistry,
  defineDocument,
  defineSignal,
  exportSession,
  type Session,
  type Storage,
} from "../../src/index.ts";

/** Notes (a document kind) and answers (`answer:*` signals): what the replication tests commit. */
export const notes = createRegistry({
  documents: [defineDocument({ type: "note", schema: z.record(z.string(), z.unknown()) })],
  signals: [defineSignal({ key: "answer:*", schema: z.object({ text: z.string().min(1) }) })],
});

/** `count` commits of one note each, over 40 note ids named `<prefix>-<n>`. */
export async function writeNotes(session: Session, count: number, prefix = "doc"): Promise<void> {
  for (let i = 0; i < count; i++)
    await session.commit((d) => d.setDocument(`${prefix}-${i % 40}`, "note", { i }));
}

/** `changes` and `snapshot` of session `id` in `storage`, through JSON as the edge's routes hand them. */
export function storeRemote(storage: Storage, id: string) {
  return {
    changes: async (after: number, limit: number) => {
      const { changes, oldestRetained } = await storage.readChanges(id, after, limit);
      return { changes: changes.map((c) => c.value), oldestRetained };
    },
    snapshot: async () => JSON.parse(JSON.stringify(await exportSession(storage, id))),
  };
}
