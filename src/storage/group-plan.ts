/**
 * What one commit group writes (format 5), the same in every store: its create-only rows, its change-log
 * row, and — when the tail is due — the rows of the whole tail, each key once; then the session row. The
 * stores differ only in how they run the transaction.
 */
import { CorruptRecordError } from "../errors.ts";
import type { CommitRecord, SessionMeta } from "../records/schemas.ts";
import { STORAGE_FORMAT } from "../records/schemas.ts";
import { PRUNE_EVERY, pruneChangesThrough } from "./change-log.ts";
import { type CreateRow, entryRunRows } from "./entry-runs.ts";
import { endsBlock } from "./log-codec.ts";
import { logStartOf } from "./log-head.ts";
import type { LogRowWrite } from "./log-rows.ts";
import { logRowsOfGroup, tailCommitsOf } from "./log-rows.ts";
import type { RowWrite } from "./rows.ts";
import { parkedCountAfter, rawNumber } from "./rows.ts";
import type { StoredRecord } from "./storage.ts";
import { DEFAULT_TAIL_COMMITS, type Materialization, TAIL_CHARS, Tail } from "./tail.ts";

/**
 * The rows written with their commit, never left to the tail: those that must not exist yet (a requestId's
 * index, a new signal: the store refuses the whole group when one does, in the same transaction), the
 * deletes of dropped early signals' rows (so a new signal of the key can be created after them), and the
 * entries, in runs (`entry-runs.ts`), which the change log refers to instead of holding them
 * (`log-codec.ts`). Known before the session row is read. Built directly, not from `rowsOfCommit`: this
 * runs for every group. `maxRowBytes`: the store's bound on a row, which a run of entries keeps to.
 */
export function createRowsOf(commits: readonly CommitRecord[], maxRowBytes?: number): CreateRow[] {
  const creates: CreateRow[] = [];
  const signals: CreateRow[] = [];
  for (const commit of commits) {
    const { version } = commit;
    for (const submission of commit.submissions) {
      if (submission.acceptedVersion !== version) continue;
      const row: RowWrite = {
        table: "requests",
        key: [submission.requestId],
        value: submission.id,
        op: "create",
      };
      creates.push({ row, version });
    }
    // A dropped early signal's row goes at once, before any new signal of its key is created.
    for (const { key } of commit.droppedSignals ?? [])
      signals.push({ row: { table: "signals", key: [key], value: null, op: "delete" }, version });
    for (const signal of commit.signals ?? []) {
      if (signal.version !== version) continue;
      signals.push({ row: { table: "signals", key: [signal.key], value: signal, op: "create" }, version });
    }
  }
  creates.push(...entryRunRows(commits, maxRowBytes), ...signals);
  return creates;
}

/** Everything a commit group writes after its create rows, in order. */
export interface GroupPlan {
  /** The group's change-log rows (one, unless a row size bound splits it). */
  readonly log: readonly LogRowWrite[];
  /** The tail's rows, when it is due: the tail is then empty, everything through the group materialized. */
  readonly materialize: Materialization | undefined;
  /** At a log pruning boundary: the count bound's version and the newest version (see `change-log.ts`). */
  readonly prune: { readonly through: number; readonly newest: number } | undefined;
  /** The session row after the group. */
  readonly meta: SessionMeta;
  /** The store handle's tail of this session once the transaction succeeded. */
  readonly tail: Tail;
}

/**
 * Plans a group on top of the checked session row and the handle's tail of it (which must end at the
 * row's version). The tail is materialized when it is due, and whenever the group crosses a log pruning
 * boundary, so pruning never reaches a commit whose rows are in the log only.
 */
export function planGroup(
  meta: SessionMeta,
  tail: Tail,
  commits: readonly CommitRecord[],
  options: {
    readonly retain: number;
    /** How many commits the tail may hold (`StorageOptions.tailCommits`). */
    readonly tailCommits?: number | undefined;
    readonly maxRowBytes?: number | undefined;
    /** Packs a group's commits into log rows of at most this many bytes (see `logRowsOfGroup`). */
    readonly logRowBytes?: number | undefined;
    /**
     * False when this transaction cannot write the tail's rows (its scope holds only what a commit writes
     * otherwise: see {@link mayMaterialize}): the tail then waits, and so does pruning.
     */
    readonly mayMaterialize?: boolean;
  },
): GroupPlan {
  const last = commits.at(-1) as CommitRecord;
  const logStart = meta.logEnd ?? 0;
  const { rows, logEnd, wholes } = logRowsOfGroup(
    commits,
    logStart,
    tail.wholes,
    options.maxRowBytes,
    options.logRowBytes,
  );
  const grown = tail.with(commits, logEnd - logStart, wholes);
  const boundary = commits.findLast((commit) => commit.version % PRUNE_EVERY === 0);
  const allowed = options.mayMaterialize !== false;
  const through = allowed && boundary ? pruneChangesThrough(boundary.version, options.retain) : undefined;
  // A block of the log ends: its records are written into rows, so the next block's log stands alone.
  const due =
    allowed &&
    (grown.isDue(options.tailCommits ?? DEFAULT_TAIL_COMMITS) ||
      boundary !== undefined ||
      endsBlock(commits));
  const next = due ? Tail.materialized(last.version) : grown;
  return {
    log: rows,
    materialize: due ? grown.materialization() : undefined,
    prune: through === undefined ? undefined : { through, newest: last.version },
    meta: {
      ...meta,
      format: STORAGE_FORMAT,
      version: last.version,
      updatedAt: last.at,
      logEnd,
      materialized: next.through,
      ...parkedCountAfter(meta, commits),
    },
    tail: next,
  };
}

/**
 * Whether a group may materialize the tail, as far as the handle can tell before its transaction starts:
 * a store whose transactions name the tables they touch (IndexedDB) opens a narrow one when this is false.
 * True whenever the cached tail may not be the stored one, or the group crosses a pruning boundary (which
 * must materialize).
 */
export function mayMaterialize(
  cached: Tail | undefined,
  expectedVersion: number,
  commits: readonly CommitRecord[],
  tailCommits = DEFAULT_TAIL_COMMITS,
): boolean {
  if (!cached || cached.version !== expectedVersion || crossesPruning(commits) || endsBlock(commits))
    return true;
  return cached.commits.length + commits.length >= tailCommits || cached.chars >= TAIL_CHARS * 0.75;
}

/** Up to which version a stored session row's records are in their own rows (all of them before format 4). */
export function materializedThrough(meta: unknown): number {
  const version = rawNumber(meta, "version") ?? 0;
  return Math.min(version, rawNumber(meta, "materialized") ?? version);
}

/**
 * The tail of a session as its stored row describes it: `cached` when it is that tail, else the version
 * after which the store must read the log (`readAfter`) and pass the rows to {@link tailFromLog}.
 */
export function knownTail(meta: unknown, cached: Tail | undefined): Tail | { readonly readAfter: number } {
  const version = rawNumber(meta, "version") ?? 0;
  const through = materializedThrough(meta);
  if (through >= version) return Tail.materialized(version);
  if (cached?.through === through) {
    if (cached.version === version) return cached;
    if (cached.version < version) return { readAfter: cached.version };
  }
  return { readAfter: through };
}

/** The tail after reading the log rows past `readAfter` (see {@link knownTail}). */
export function tailFromLog(
  meta: unknown,
  cached: Tail | undefined,
  readAfter: number,
  rows: readonly StoredRecord[],
): Tail {
  const through = materializedThrough(meta);
  // Extending the cached tail, the new commits' deltas may refer to its records; else the log from `through`
  // stands alone (a writer starts logging records whole again after each materialization).
  const extending = cached !== undefined && readAfter === cached.version && cached.through === through;
  const { commits, wholes } = tailCommitsOf(rows, readAfter, extending ? cached.wholes : undefined);
  const version = rawNumber(meta, "version") ?? 0;
  const gap = commits.findIndex((commit, i) => commit.version !== readAfter + 1 + i);
  if (gap !== -1 || readAfter + commits.length !== version) {
    const missing = gap === -1 ? readAfter + commits.length + 1 : readAfter + 1 + gap;
    throw new CorruptRecordError(
      `changes/${missing}`,
      `the change log lacks commit ${missing}, which is not materialized yet (the session is at version ${version})`,
    );
  }
  const first = logStartOf(rows[0]?.value) ?? 0;
  const chars = Math.max(0, (rawNumber(meta, "logEnd") ?? first) - first);
  if (extending) return cached.with(commits, chars, wholes);
  return new Tail(through, commits, chars, wholes);
}

/**
 * The session row a writer stores once its open materialized the tail it found: the current format, every
 * commit in its rows.
 */
export function openedWriterMeta(meta: unknown): unknown {
  return { ...(meta as object), format: STORAGE_FORMAT, materialized: rawNumber(meta, "version") ?? 0 };
}

/** A log row as the row a write hook is shown. */
export function logRowWrite(log: LogRowWrite): RowWrite {
  return { table: "changes", key: [log.version], value: log.value };
}

/** Whether a group holds a log pruning boundary (which materializes the tail and prunes the log). */
export function crossesPruning(commits: readonly CommitRecord[]): boolean {
  return commits.some((commit) => commit.version % PRUNE_EVERY === 0);
}

/** Whether a session row read back is the one a handle wrote (every field a group's plan is built on). */
export function isSameRow(stored: SessionMeta, written: SessionMeta): boolean {
  return (
    stored.version === written.version &&
    stored.epoch === written.epoch &&
    stored.format === written.format &&
    stored.logEnd === written.logEnd &&
    stored.materialized === written.materialized &&
    stored.logFloor === written.logFloor &&
    stored.incarnation === written.incarnation &&
    (stored as { parked?: unknown }).parked === (written as { parked?: unknown }).parked
  );
}

/** A session row was not as the handle that planned a group on it left it: nothing was written. */
export class RowChanged extends Error {
  override readonly name = "RowChanged";
}
