/** The change log's bounds (DESIGN §9): pruned by count and by bytes, at the same boundaries. */

/** Log pruning happens only at these boundaries, so most commits pay nothing for it. */
export const PRUNE_EVERY = 256;

/**
 * At a pruning boundary, the highest log version the count bound deletes after writing `version` (0: none
 * by count; the store still applies its byte bound there); undefined between boundaries.
 */
export function pruneChangesThrough(version: number, retain: number): number | undefined {
  if (version % PRUNE_EVERY !== 0) return undefined;
  return Math.max(0, version - retain);
}

/**
 * The highest change-log version to delete so that the rows after it hold at most `limit` characters
 * (DESIGN §9: the log is bounded by bytes as well as count); 0 when nothing must go. A binary search over
 * the rows' `logStart`, driven by the store (each yield asks for one row's `logStart`; a row written before
 * the field existed counts as older than any limit). The newest row always stays.
 */
export function* changesOverBytes(
  oldest: number,
  newest: number,
  logEnd: number,
  limit: number,
): Generator<number, number, number | undefined> {
  if (logEnd - ((yield oldest) ?? 0) <= limit || oldest >= newest) return 0;
  let lo = oldest + 1;
  let hi = newest;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const start = yield mid;
    if (start !== undefined && logEnd - start <= limit) hi = mid;
    else lo = mid + 1;
  }
  return lo - 1;
}

/** The highest version a prune may delete: `through`, but never a row a guard says must stay. */
export function pruneFloor(through: number, keepChangesAfter: number | undefined): number {
  return keepChangesAfter === undefined ? through : Math.min(through, keepChangesAfter);
}

/** Runs {@link changesOverBytes} over synchronous reads (memory, SQLite). */
export function changesOverBytesSync(
  logStartOf: (version: number) => number | undefined,
  ...args: Parameters<typeof changesOverBytes>
): number {
  const search = changesOverBytes(...args);
  for (let step = search.next(); ; ) {
    if (step.done) return step.value;
    step = search.next(logStartOf(step.value));
  }
}

/** Runs {@link changesOverBytes} over asynchronous reads (IndexedDB). */
export async function changesOverBytesAsync(
  logStartOf: (version: number) => Promise<number | undefined>,
  ...args: Parameters<typeof changesOverBytes>
): Promise<number> {
  const search = changesOverBytes(...args);
  for (let step = search.next(); ; ) {
    if (step.done) return step.value;
    step = search.next(await logStartOf(step.value));
  }
}
