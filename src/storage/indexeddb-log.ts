/**
 * The IndexedDB store's change-log steps inside one transaction: reading the log's tail, writing a tail's
 * rows, and finding what a pruning boundary deletes (see `tail.ts` and `log-rows.ts`).
 */
import { pruneThroughAsync } from "./change-log.ts";
import { knownTail, tailFromLog } from "./group-plan.ts";
import { readRows, requested, type SessionRanges } from "./indexeddb-requests.ts";
import { firstVersionOf, logStartOf } from "./log-head.ts";
import type { RowWrite } from "./rows.ts";
import type { CommitGuard } from "./storage.ts";
import { type Materialization, Tail, type TailCache } from "./tail.ts";

/** One row written (or deleted) in `tx`. */
export function writeRow(tx: IDBTransaction, sessionId: string, row: RowWrite): Promise<unknown> {
  const store = tx.objectStore(row.table);
  const key = [sessionId, ...row.key];
  return row.op === "delete" ? requested(store.delete(key)) : requested(store.put(row.value, key));
}

/** Queues a tail's rows in `tx`: its range deletes go first, then each key's last write. */
export function writeMaterialization(
  tx: IDBTransaction,
  keys: SessionRanges,
  sessionId: string,
  { ranges, rows }: Materialization,
): Promise<unknown>[] {
  const writes: Promise<unknown>[] = [];
  for (const { table, id, below } of ranges) {
    const range = keys.numbers(sessionId, [id], Number.NEGATIVE_INFINITY, below - 1);
    writes.push(requested(tx.objectStore(table).delete(range)));
  }
  for (const row of rows) writes.push(writeRow(tx, sessionId, row));
  return writes;
}

/** The handle's tail of a session, read from the log in `tx` when the session row says it is not the cached one. */
export async function tailInTx(
  tx: IDBTransaction,
  keys: SessionRanges,
  sessionId: string,
  meta: unknown,
  tails: TailCache,
): Promise<Tail> {
  const cached = tails.get(sessionId, meta);
  const known = knownTail(meta, cached);
  if (known instanceof Tail) return known;
  const after = keys.numbers(sessionId, [], known.readAfter + 1, Number.POSITIVE_INFINITY);
  return tailFromLog(meta, cached, known.readAfter, await readRows(tx, "changes", after));
}

/**
 * The highest change version a pruning boundary deletes once the log holds `logEnd` characters (0: none).
 * A log row holds a group of commits and is keyed by the last: the row holding version `v` is the first
 * keyed at or after it.
 */
export async function pruneThroughInTx(
  tx: IDBTransaction,
  keys: SessionRanges,
  guard: CommitGuard,
  prune: { readonly through: number; readonly newest: number },
  limit: number,
  logEnd = 0,
): Promise<number> {
  const [first] = await readRows(tx, "changes", keys.all(guard.sessionId), 1);
  if (!first) return 0;
  const store = tx.objectStore("changes");
  const startOf = async (v: number) =>
    logStartOf(await requested(store.get(keys.numbers(guard.sessionId, [], v, Number.POSITIVE_INFINITY))));
  return pruneThroughAsync(startOf, {
    oldest: firstVersionOf(first.value, Number(first.key.slice("changes/".length))),
    newest: prune.newest,
    logEnd,
    limit,
    through: prune.through,
    keepChangesAfter: guard.keepChangesAfter,
  });
}
