/**
 * One commit group's IndexedDB transaction (format 5): create-only rows, the group's log row, the tail's rows
 * when due, the session row. See `group-plan.ts` for what is written and `tail.ts` for why.
 */
import type { KernelError } from "../errors.ts";
import type { CommitRecord, SessionMeta } from "../records/schemas.ts";
import { prunableThrough, withLogFloor } from "./change-log.ts";
import {
  createRowsOf,
  crossesPruning,
  type GroupPlan,
  isSameRow,
  logRowWrite,
  planGroup,
  RowChanged,
} from "./group-plan.ts";
import { pruneThroughInTx, tailInTx, writeMaterialization } from "./indexeddb-log.ts";
import { refusalOf, requested, type SessionRanges } from "./indexeddb-requests.ts";
import type { WriteHook } from "./memory-storage.ts";
import { checkGuard } from "./session-row.ts";
import type { CommitGuard } from "./storage.ts";
import type { Tail, TailCache } from "./tail.ts";

/** A group to write, and what the handle knew of its session before the transaction. */
export interface GroupWrite {
  readonly guard: CommitGuard;
  readonly commits: readonly CommitRecord[];
  /** The handle's tail of the session. */
  readonly cached: Tail | undefined;
  /** The session row the handle wrote last, to plan on without reading it first (see below). */
  readonly known: SessionMeta | undefined;
  /** Whether the transaction's scope holds every table (the tail may be materialized). */
  readonly wide: boolean;
  /** Told of a refused create-only row (a taken requestId) before the transaction aborts. */
  readonly refused: (error: KernelError) => void;
}

/** The store handle's side of a group write. */
export interface GroupStore {
  readonly tails: TailCache;
  readonly retain: number;
  readonly tailCommits: number | undefined;
  readonly retainBytes: number;
  readonly onWrite: WriteHook | undefined;
}

/**
 * Writes a group in `tx`. When the handle wrote the session row last (`known`), every write is queued at
 * once, planned on that row, and the row read back in the same transaction must be it — else nothing is
 * written (`RowChanged`, the caller then tries again reading first); otherwise the row is read first. A
 * group at a pruning boundary always reads first (pruning reads the log). Either way the guard is checked
 * inside the transaction, and a stale one aborts it.
 */
export async function writeGroupInTx(
  tx: IDBTransaction,
  keys: SessionRanges,
  group: GroupWrite,
  store: GroupStore,
): Promise<GroupPlan> {
  const { guard, commits, cached, known, wide } = group;
  const fast =
    known !== undefined &&
    cached !== undefined &&
    !guard.replica &&
    known.epoch === guard.epoch &&
    known.version === guard.expectedVersion &&
    cached.version === known.version &&
    !crossesPruning(commits);
  const sessions = tx.objectStore("sessions");
  const stored = requested(sessions.get(guard.sessionId));
  stored.catch(() => undefined);
  const writes: Promise<unknown>[] = [];
  // Handled as they are queued: one may fail (a refused create) while the body still awaits a read.
  const queue = (write: Promise<unknown>) => {
    write.catch(() => undefined);
    writes.push(write);
  };
  let index = 0;
  // Each create-only row is an `add`, which fails on an existing key and aborts the transaction: the
  // duplicate refuses the whole group without a read before it.
  for (const { row, version } of createRowsOf(commits)) {
    store.onWrite?.(row, index++);
    const key = [guard.sessionId, ...row.key];
    if (row.op === "delete") {
      queue(requested(tx.objectStore(row.table).delete(key)));
      continue;
    }
    queue(
      requested(tx.objectStore(row.table).add(row.value, key)).catch((error: unknown) => {
        const refusal = refusalOf(error, row, version);
        if (refusal) group.refused(refusal);
        throw refusal ?? error;
      }),
    );
  }
  const options = { retain: store.retain, tailCommits: store.tailCommits, mayMaterialize: wide };
  let plan: GroupPlan;
  if (fast) {
    plan = planGroup(known, cached, commits, options);
  } else {
    const meta = checkGuard(await stored, guard);
    plan = planGroup(meta, await tailInTx(tx, keys, guard.sessionId, meta, store.tails), commits, options);
  }
  const changes = tx.objectStore("changes");
  for (const log of plan.log) {
    store.onWrite?.(logRowWrite(log), index++);
    // Stored as its JSON text (already made to measure the log): the browser copies a string at once,
    // where it would walk the commit's every object and field.
    queue(requested(changes.put(log.json, [guard.sessionId, log.version])));
  }
  if (plan.materialize) {
    for (const row of plan.materialize.rows) store.onWrite?.(row, index++);
    for (const write of writeMaterialization(tx, keys, guard.sessionId, plan.materialize)) queue(write);
  }
  let floor = 0;
  if (plan.prune) {
    const { logEnd } = plan.meta;
    floor = await pruneThroughInTx(tx, keys, guard, plan.prune, store.retainBytes, logEnd);
    const physical = prunableThrough(floor);
    if (physical > 0) queue(requested(changes.delete(keys.numbers(guard.sessionId, [], 0, physical))));
  }
  const meta = withLogFloor(plan.meta, floor);
  queue(requested(sessions.put(meta, guard.sessionId)));
  if (fast && !isSameRow(checkGuard(await stored, guard), known)) throw new RowChanged();
  await Promise.all(writes);
  return { ...plan, meta };
}
