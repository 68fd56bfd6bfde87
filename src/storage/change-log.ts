/** The change log's bounds (DESIGN §9): pruned by count and by bytes, at the same boundaries. */
import { blockStart } from "./log-codec.ts";
import { rawNumber } from "./rows.ts";

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

/** What a store knows at a pruning boundary: its log's span and size, and the bounds that apply. */
export interface PruneRequest {
  /** The oldest and newest change-log versions held. */
  readonly oldest: number;
  readonly newest: number;
  /** The log's size in JSON characters after the newest row (the session row's `logEnd`). */
  readonly logEnd: number;
  /** The byte bound (`retainChangeBytes`). */
  readonly limit: number;
  /** What the count bound deletes ({@link pruneChangesThrough}). */
  readonly through: number;
  /** Rows above this version stay whatever the bounds say (`CommitGuard.keepChangesAfter`). */
  readonly keepChangesAfter?: number | undefined;
}

/** The highest version to delete: the count bound or the byte bound, whichever is more, never past the floor. */
function* pruneBound(request: PruneRequest): Generator<number, number, number | undefined> {
  const { oldest, newest, logEnd, limit, through, keepChangesAfter } = request;
  const bound = Math.max(through, yield* changesOverBytes(oldest, newest, logEnd, limit));
  return keepChangesAfter === undefined ? bound : Math.min(bound, keepChangesAfter);
}

/** {@link pruneBound} over synchronous reads of a row's `logStart` (memory, SQLite). */
export function pruneThroughSync(
  logStartOf: (version: number) => number | undefined,
  request: PruneRequest,
): number {
  const search = pruneBound(request);
  for (let step = search.next(); ; ) {
    if (step.done) return step.value;
    step = search.next(logStartOf(step.value));
  }
}

/** {@link pruneBound} over asynchronous reads (IndexedDB). */
export async function pruneThroughAsync(
  logStartOf: (version: number) => Promise<number | undefined>,
  request: PruneRequest,
): Promise<number> {
  const search = pruneBound(request);
  for (let step = search.next(); ; ) {
    if (step.done) return step.value;
    step = search.next(await logStartOf(step.value));
  }
}

/**
 * How far pruning may delete rows once the bounds let the log go through `through`: to the end of the block
 * before the one holding `through + 1`, since a commit's deltas refer to records logged earlier in its block
 * (`log-codec.ts`). The session row's `logFloor` says where the log readers are served starts.
 */
export function prunableThrough(through: number): number {
  return through <= 0 ? 0 : blockStart(through + 1) - 1;
}

/** The session row with the log's floor moved up to `through + 1` (unchanged when nothing was pruned). */
export function withLogFloor<T extends object>(meta: T, through: number | undefined): T {
  if (!through) return meta;
  const floor = Math.max(rawNumber(meta, "logFloor") ?? 0, through + 1);
  return { ...meta, logFloor: floor };
}
