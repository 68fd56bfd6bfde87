/**
 * An in-memory store: the reference implementation of the storage contract, and the "disk" that crash
 * simulations keep while they throw kernels away. Values are structured-cloned in and out, so nothing a
 * caller holds aliases what is stored.
 */
import { DuplicateKeyError, SessionNotFoundError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { deepFreeze } from "../records/validate.ts";
import { prunableThrough, pruneThroughSync, withLogFloor } from "./change-log.ts";
import {
  createRowsOf,
  knownTail,
  logRowWrite,
  materializedThrough,
  openedWriterMeta,
  planGroup,
  tailFromLog,
} from "./group-plan.ts";
import { firstVersionOf, logStartOf } from "./log-head.ts";
import { changesAfter } from "./log-rows.ts";
import {
  applyMaterialization,
  emptyTables,
  entryRange,
  type Rows,
  sortedRange,
  storedRows,
  tablesReader,
} from "./memory-rows.ts";
import type { KeyPart, RowWrite, Table } from "./rows.ts";
import { checkCreate, checkRowSize, rawNumber } from "./rows.ts";
import { checkGuard, nextWriterMeta, upgradedMeta } from "./session-row.ts";
import type {
  CommitGuard,
  OpenRequest,
  ParkedCursor,
  RawSession,
  SessionImport,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredSession,
} from "./storage.ts";
import { checkStorageOptions, DEFAULT_RETAIN_CHANGE_BYTES, DEFAULT_RETAIN_CHANGES } from "./storage.ts";
import { Tail, TailCache } from "./tail.ts";
import { overlayReader } from "./tail-overlay.ts";
import {
  noSignalRows,
  noWaitingTrees,
  readItemPage,
  readParkedPage,
  readRequest,
  readSettledPage,
  readSignalRows,
  readStoredSession,
  readTrees,
  readWaitingTrees,
  type SessionRowReader,
  type StoredItem,
  upgradeRowsSync,
} from "./working-set.ts";

interface SessionRows {
  meta: unknown;
  tables: Record<Table, Rows>;
}

/** Called for each row a commit is about to write; throwing aborts the whole commit (tests inject faults). */
export type WriteHook = (row: RowWrite, index: number) => void;

export interface MemoryStorageOptions extends StorageOptions {
  readonly onWrite?: WriteHook;
  /**
   * Refuse rows larger than this many UTF-8 bytes, as a store with a row limit does (a Durable Object's
   * SQLite: `DO_SQLITE_MAX_ROW_BYTES`), so an app can meet that limit before it deploys. Default: none.
   */
  readonly maxRowBytes?: number;
}

/** The in-memory store. Create one with {@link memoryStorage}. */
export class MemoryStorage implements Storage {
  private readonly sessions = new Map<string, SessionRows>();
  /** This handle's tail of each session it wrote or read (see `tail.ts`); a new handle starts with none. */
  private readonly tails = new TailCache();
  private readonly retain: number;
  private readonly retainBytes: number;
  private closed = false;

  constructor(private readonly options: MemoryStorageOptions = {}) {
    checkStorageOptions(options);
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
    this.retainBytes = options.retainChangeBytes ?? DEFAULT_RETAIN_CHANGE_BYTES;
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    this.assertOpen();
    let rows = this.sessions.get(sessionId);
    if (request.mode === "write") {
      if (!rows) {
        rows = {
          meta: openedWriterMeta(nextWriterMeta(undefined, sessionId, request.at, request.epoch)),
          tables: emptyTables(),
        };
        this.sessions.set(sessionId, rows);
      } else this.takeOwnership(rows, sessionId, request);
      this.tails.remember(sessionId, Tail.materialized(rawNumber(rows.meta, "version") ?? 0), rows.meta);
    }
    if (!rows) return undefined;
    const reader = this.overlay(sessionId, rows);
    return structuredClone(await readStoredSession(sessionId, rows.meta, request, reader));
  }

  /**
   * A writer's open: the next epoch, the index rows an older format lacks, and the rows of the log's tail,
   * all staged before anything is applied (a corrupt tail leaves the session as it was).
   */
  private takeOwnership(rows: SessionRows, sessionId: string, request: OpenRequest): void {
    let meta = nextWriterMeta(rows.meta, sessionId, request.at, request.epoch);
    const upgrade = upgradeRowsSync(rawNumber(meta, "format"), this.reader(rows)) ?? [];
    const tail = this.tailOf(sessionId, rows);
    const { ranges, rows: materialized } = tail.materialization();
    if (upgrade.length > 0) meta = upgradedMeta(meta);
    for (const row of upgrade) rows.tables[row.table].set(row.key, row.value);
    applyMaterialization(rows.tables, ranges, materialized);
    rows.meta = openedWriterMeta(meta);
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    this.assertOpen();
    const rows = this.sessions.get(guard.sessionId);
    const meta = checkGuard(rows?.meta, guard);
    if (!rows || commits.length === 0) return;
    // Stage everything first: a fault while staging leaves the stored rows untouched, like an aborted
    // transaction would.
    let index = 0;
    const limit = this.options.maxRowBytes;
    const creates = createRowsOf(commits, limit);
    creates.forEach(({ row, version, json }, i) => {
      this.options.onWrite?.(row, index++);
      if (row.op === "delete") return;
      if (limit !== undefined) checkRowSize(row, json ?? JSON.stringify(row.value), limit, version);
      // As the group leaves it by then: a row deleted earlier in the group (a dropped signal) is gone.
      const last = creates.slice(0, i).findLast((earlier) => sameRow(earlier.row, row));
      const exists = last ? last.row.op !== "delete" : rows.tables[row.table].get(row.key) !== undefined;
      checkCreate(row, exists, version);
    });
    const plan = planGroup(meta, this.tailOf(guard.sessionId, rows), commits, {
      retain: this.retain,
      tailCommits: this.options.tailCommits,
      maxRowBytes: limit,
    });
    for (const log of plan.log) this.options.onWrite?.(logRowWrite(log), index++);
    // Stored by reference, deep-frozen (the records are the commits' own, which the pipeline freezes anyway):
    // nothing a caller holds can change what is stored, and reads hand out copies.
    const materialized = plan.materialize?.rows.map((row) => ({ ...row, value: deepFreeze(row.value) }));
    for (const row of materialized ?? []) {
      this.options.onWrite?.(row, index++);
      if (limit !== undefined && row.op !== "delete")
        checkRowSize(row, JSON.stringify(row.value), limit, plan.meta.version);
    }
    const logValues = plan.log.map((log) => ({ version: log.version, value: deepFreeze(log.value) }));
    // Applied in order: creates, the log, the tail's rows (range deletes first), pruning, the session row.
    for (const { row } of creates)
      if (row.op === "delete") rows.tables[row.table].delete(row.key);
      else rows.tables[row.table].set(row.key, structuredClone(row.value));
    for (const log of logValues) rows.tables.changes.set([log.version], log.value);
    if (plan.materialize) applyMaterialization(rows.tables, plan.materialize.ranges, materialized ?? []);
    const logFloor =
      plan.prune && this.prune(rows, plan.prune, plan.meta.logEnd ?? 0, guard.keepChangesAfter);
    rows.meta = withLogFloor(plan.meta, logFloor);
    this.tails.remember(guard.sessionId, plan.tail, rows.meta);
  }

  /** Writes this handle's tail of the session into rows, if the guard still holds (a writer closing). */
  async checkpoint(guard: CommitGuard): Promise<void> {
    this.assertOpen();
    const rows = this.sessions.get(guard.sessionId);
    const meta = checkGuard(rows?.meta, guard);
    if (!rows) return;
    const tail = this.tailOf(guard.sessionId, rows);
    if (tail.isEmpty) return;
    const { ranges, rows: materialized } = tail.materialization();
    for (const [i, row] of materialized.entries()) this.options.onWrite?.(row, i);
    applyMaterialization(rows.tables, ranges, materialized);
    rows.meta = { ...meta, materialized: tail.version };
    this.tails.remember(guard.sessionId, Tail.materialized(tail.version), rows.meta);
  }

  /**
   * Deletes the log rows the bounds let go (whole rows of whole blocks, see `prunableThrough`); returns how
   * far the bounds let the log go (0: not at all).
   */
  private prune(
    rows: SessionRows,
    prune: { through: number; newest: number },
    logEnd: number,
    keepChangesAfter: number | undefined,
  ): number {
    const changes = rows.tables.changes;
    const first = changes.earliest(1)[0];
    if (!first) return 0;
    const through = pruneThroughSync((v) => logStartOf(this.logRowFrom(rows, v)?.value), {
      oldest: firstVersionOf(first.value, first.key[0] as number),
      newest: prune.newest,
      logEnd,
      limit: this.retainBytes,
      through: prune.through,
      keepChangesAfter,
    });
    const physical = prunableThrough(through);
    changes.deleteWhere(undefined, (key) => (key[0] as number) <= physical);
    return through;
  }

  /** The log row holding version `v`: the first keyed at or after it. */
  private logRowFrom(rows: SessionRows, v: number) {
    const newest = rawNumber(rows.meta, "version") ?? v;
    for (let n = v; n <= newest; n++) {
      const row = rows.tables.changes.get([n]);
      if (row) return row;
    }
    return undefined;
  }

  /** This handle's tail of a session, read from the log when the session row says it is not the known one. */
  private tailOf(sessionId: string, rows: SessionRows): Tail {
    const cached = this.tails.get(sessionId, rows.meta);
    const known = knownTail(rows.meta, cached);
    if (known instanceof Tail) return known;
    const logRows = sortedRange(
      rows.tables.changes,
      "changes",
      undefined,
      known.readAfter + 1,
      Number.MAX_SAFE_INTEGER,
    );
    const tail = tailFromLog(rows.meta, cached, known.readAfter, logRows);
    this.tails.remember(sessionId, tail, rows.meta);
    return tail;
  }

  /** The stored rows as the log's tail leaves them. */
  private overlay(sessionId: string, rows: SessionRows): SessionRowReader {
    return overlayReader(this.reader(rows), this.tailOf(sessionId, rows));
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.assertOpen();
    this.sessions.delete(sessionId);
    this.tails.forget(sessionId);
  }

  async exportRaw(sessionId: string): Promise<RawSession | undefined> {
    this.assertOpen();
    const rows = this.sessions.get(sessionId);
    if (!rows) return undefined;
    const after = materializedThrough(rows.meta) + 1;
    const log = sortedRange(rows.tables.changes, "changes", undefined, after, Number.MAX_SAFE_INTEGER);
    return structuredClone({ meta: rows.meta, rows: storedRows(rows.tables), log });
  }

  async importRaw(sessionId: string, session: SessionImport): Promise<void> {
    this.assertOpen();
    if (this.sessions.has(sessionId) && !session.replace)
      throw new DuplicateKeyError(`sessions/${sessionId}`, 0);
    const tables = emptyTables();
    for (const row of structuredClone(session.rows)) tables[row.table].set(row.key, deepFreeze(row.value));
    for (const log of session.log) tables.changes.set([log.version], deepFreeze(structuredClone(log.value)));
    this.sessions.set(sessionId, { meta: structuredClone(session.meta), tables });
    this.tails.forget(sessionId);
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.read(sessionId, (reader) => reader.range("entries", conversationId, fromSeq, toSeq - 1), []);
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    this.assertOpen();
    const rows = this.sessions.get(sessionId);
    if (!rows) return { changes: [], oldestRetained: afterVersion + 1 };
    const log = rows.tables.changes;
    const [first] = sortedRange(log, "changes", undefined, 0, Number.MAX_SAFE_INTEGER);
    const read = {
      rows: (from: number, to: number, most = Number.POSITIVE_INFINITY) =>
        sortedRange(log, "changes", undefined, from, to).slice(0, most),
      entries: (conversation: string, from: number, to: number) =>
        entryRange(rows.tables.entries, conversation, from, to),
    };
    return structuredClone(await changesAfter(read, first, afterVersion, limit, rows.meta));
  }

  async readDocumentRows(sessionId: string, documentId: string, fromVersion: number, toVersion: number) {
    return this.read(
      sessionId,
      (reader) => reader.range("documentRows", documentId, fromVersion, toVersion),
      [],
    );
  }

  async readSubmission(sessionId: string, submissionId: string) {
    return this.read(sessionId, (reader) => reader.get("submissions", [submissionId]), undefined);
  }

  async readRequest(sessionId: string, requestId: string) {
    return this.read(sessionId, (reader) => readRequest(reader, requestId), undefined);
  }

  async readTask(sessionId: string, taskId: string) {
    return this.read(sessionId, (reader) => reader.get("tasks", [taskId]), undefined);
  }

  async readSignals(sessionId: string, keys: readonly string[]) {
    return this.read(sessionId, readSignalRows(keys), noSignalRows(keys));
  }

  async readTaskTree(sessionId: string, rootId: string) {
    return this.read(sessionId, (reader) => readTrees(reader, [rootId]), []);
  }

  async readWaiting(sessionId: string, keys: readonly string[]) {
    return this.read(sessionId, readWaitingTrees(keys), noWaitingTrees(keys));
  }

  async readParked(sessionId: string, before: ParkedCursor | undefined, limit: number) {
    return this.read(sessionId, (reader) => readParkedPage(reader, before, limit), []);
  }

  async readDeadlines(sessionId: string, limit: number) {
    return this.read(sessionId, (reader) => reader.earliest("deadlines", limit), []);
  }

  async readItems(sessionId: string, before: number, limit: number) {
    const none = { items: [] as StoredItem[], submissions: [] };
    return this.read(sessionId, (reader) => readItemPage(reader, before, limit), none);
  }

  async readSettled(sessionId: string, limit: number) {
    return this.read(sessionId, (reader) => readSettledPage(reader, limit), { items: [], count: 0 });
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private async read<T>(sessionId: string, body: (reader: SessionRowReader) => Promise<T> | T, none: T) {
    this.assertOpen();
    const rows = this.sessions.get(sessionId);
    return rows ? structuredClone(await body(this.overlay(sessionId, rows))) : none;
  }

  /**
   * Writes a raw row, bypassing every check. Only for tests that need a corrupt or hand-made record.
   * `table` "sessions" replaces the session row itself.
   */
  unsafeWriteRaw(
    sessionId: string,
    table: Table | "sessions",
    key: readonly KeyPart[],
    value: unknown,
  ): void {
    const rows = this.sessions.get(sessionId);
    if (!rows) throw new SessionNotFoundError(sessionId);
    if (table === "sessions") rows.meta = value;
    else rows.tables[table].set(key, value);
  }

  /** Deletes a raw row, bypassing every check. Only for tests that recreate an older layout. */
  unsafeDeleteRaw(sessionId: string, table: Table, key: readonly KeyPart[]): void {
    this.sessions.get(sessionId)?.tables[table].delete(key);
  }

  /** A new handle on the same stored data, as a restarted process would get. Closing one does not close the other. */
  reopen(options: MemoryStorageOptions = this.options): MemoryStorage {
    const next = new MemoryStorage(options);
    (next as unknown as { sessions: Map<string, SessionRows> }).sessions = this.sessions;
    return next;
  }

  private reader(rows: SessionRows) {
    return tablesReader(rows.tables);
  }

  private assertOpen(): void {
    if (this.closed) throw new StorageError("storage-closed", "memory storage is closed");
  }
}

function sameRow(a: RowWrite, b: RowWrite): boolean {
  return a.table === b.table && a.key.length === b.key.length && a.key.every((part, i) => part === b.key[i]);
}

/** Creates an in-memory store. */
export function memoryStorage(options?: MemoryStorageOptions): MemoryStorage {
  return new MemoryStorage(options);
}
