/** Another host of one session, over a store in this process: its change log and its snapshot. */
import { exportSession, type Storage } from "../../src/index.ts";

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
