/**
 * An in-memory store: the reference implementation of the storage contract, and the "disk" that crash
 * simulations keep while they throw kernels away. Values are structured-cloned in and out, so nothing a
 * caller holds aliases what is stored.
 */
import { SessionNotFoundError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { pruneThroughSync } from "./change-log.ts";
import { Rows, sortedRange } from "./memory-rows.ts";
import type { KeyPart, RowWrite, Table } from "./rows.ts";
import {
  checkCreate,
  checkGuard,
  checkRowSize,
  type GroupOp,
  loggedChange,
  nextWriterMeta,
  opsOfGroup,
  parkedCountAfter,
  rawNumber,
  recordName,
  TABLES,
  upgradedMeta,
} from "./rows.ts";
import type {
  CommitGuard,
  OpenRequest,
  ParkedCursor,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredSession,
} from "./storage.ts";
import { DEFAULT_RETAIN_CHANGE_BYTES, DEFAULT_RETAIN_CHANGES } from "./storage.ts";
import {
  isBelow,
  itemOfRow,
  readItemPage,
  readParkedPage,
  readRequest,
  readSettledPage,
  readStoredSession,
  readTrees,
  readWaitingTree,
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
  private readonly retain: number;
  private readonly retainBytes: number;
  private closed = false;

  constructor(private readonly options: MemoryStorageOptions = {}) {
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
    this.retainBytes = options.retainChangeBytes ?? DEFAULT_RETAIN_CHANGE_BYTES;
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    this.assertOpen();
    let rows = this.sessions.get(sessionId);
    if (request.mode === "write") {
      if (!rows) {
        rows = {
          meta: nextWriterMeta(undefined, sessionId, request.at, request.epoch),
          tables: emptyTables(),
        };
        this.sessions.set(sessionId, rows);
      } else {
        rows.meta = nextWriterMeta(rows.meta, sessionId, request.at, request.epoch);
        this.upgrade(rows);
      }
    }
    if (!rows) return undefined;
    return structuredClone(await readStoredSession(sessionId, rows.meta, request, this.reader(rows)));
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    this.assertOpen();
    const rows = this.sessions.get(guard.sessionId);
    const meta = checkGuard(rows?.meta, guard);
    if (!rows) return;
    // Stage everything first: a fault while staging leaves the stored rows untouched, like an aborted
    // transaction would.
    const ops = opsOfGroup(commits, this.retain);
    const staged: (GroupOp & { logEnd?: number })[] = [];
    let index = 0;
    let logEnd = rawNumber(meta, "logEnd") ?? 0;
    for (const op of ops) {
      if (op.kind !== "row") {
        staged.push({ ...op, logEnd });
        continue;
      }
      const { version } = op;
      let { row } = op;
      // A change row's JSON is measured once: for the log's size and, with a row limit, for that check.
      let json: string | undefined;
      if (row.table === "changes") {
        row = loggedChange(row, logEnd);
        json = JSON.stringify(row.value);
        logEnd += json.length;
      }
      this.options.onWrite?.(row, index++);
      const limit = this.options.maxRowBytes;
      if (limit !== undefined) checkRowSize(row, json ?? JSON.stringify(row.value), limit, version);
      if (row.op === "create") {
        const exists =
          rows.tables[row.table].get(row.key) !== undefined ||
          staged.some((w) => w.kind === "row" && sameRow(w.row, row));
        checkCreate(row, exists, version);
      }
      staged.push({ ...op, row: { ...row, value: structuredClone(row.value) } });
    }
    const last = commits.at(-1);
    if (!last) return;
    // Applied in order: a document deleted by one commit and created again by the next keeps its new rows.
    for (const op of staged) {
      if (op.kind === "prune") {
        const changes = rows.tables.changes;
        const oldest = changes.earliest(1)[0]?.key[0];
        if (typeof oldest !== "number") continue;
        const logStartOf = (v: number) => rawNumber(changes.get([v])?.value, "logStart");
        const through = pruneThroughSync(logStartOf, {
          oldest,
          newest: op.version,
          logEnd: op.logEnd ?? 0,
          limit: this.retainBytes,
          through: op.through,
          keepChangesAfter: guard.keepChangesAfter,
        });
        if (through >= oldest) changes.deleteWhere(undefined, (key) => (key[0] as number) <= through);
      } else if (op.kind === "obsolete")
        rows.tables.documentRows.deleteWhere(op.documentId, (key) => (key[1] as number) < op.below);
      else if (op.row.op === "delete") rows.tables[op.row.table].delete(op.row.key);
      else rows.tables[op.row.table].set(op.row.key, op.row.value);
    }
    rows.meta = {
      ...meta,
      version: last.version,
      updatedAt: last.at,
      logEnd,
      ...parkedCountAfter(meta, commits),
    };
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.assertOpen();
    this.sessions.delete(sessionId);
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    this.assertOpen();
    const rows = this.sessions.get(sessionId);
    if (!rows) return [];
    return structuredClone(sortedRange(rows.tables.entries, "entries", conversationId, fromSeq, toSeq - 1));
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    this.assertOpen();
    const rows = this.sessions.get(sessionId);
    if (!rows) return { changes: [], oldestRetained: afterVersion + 1 };
    const all = sortedRange(rows.tables.changes, "changes", undefined, 0, Number.MAX_SAFE_INTEGER);
    const oldest = all[0] ? Number(all[0].key.split("/")[1]) : (rawNumber(rows.meta, "version") ?? 0) + 1;
    const changes = all.filter((r) => Number(r.key.split("/")[1]) > afterVersion).slice(0, limit);
    return { changes: structuredClone(changes), oldestRetained: oldest };
  }

  async readDocumentRows(sessionId: string, documentId: string, fromVersion: number, toVersion: number) {
    this.assertOpen();
    const rows = this.sessions.get(sessionId);
    if (!rows) return [];
    return structuredClone(
      sortedRange(rows.tables.documentRows, "documentRows", documentId, fromVersion, toVersion),
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

  async readSignal(sessionId: string, key: string) {
    return this.read(sessionId, (reader) => reader.get("signals", [key]), undefined);
  }

  async readTaskTree(sessionId: string, rootId: string) {
    return this.read(sessionId, (reader) => readTrees(reader, [rootId]), []);
  }

  async readWaiting(sessionId: string, key: string) {
    return this.read(sessionId, (reader) => readWaitingTree(reader, key), []);
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
    return rows ? structuredClone(await body(this.reader(rows))) : none;
  }

  /** A session stored in an older format gets the index rows it lacks (a writer's open does it). */
  private upgrade(rows: SessionRows): void {
    const upgrade = upgradeRowsSync(rawNumber(rows.meta, "format"), this.reader(rows));
    if (!upgrade) return;
    for (const row of upgrade) rows.tables[row.table].set(row.key, row.value);
    rows.meta = upgradedMeta(rows.meta);
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
    return {
      all: (table: Table) =>
        sortedRange(rows.tables[table], table, undefined, -Infinity, Number.POSITIVE_INFINITY),
      range: (table: Table, id: string, from: number, to: number) =>
        sortedRange(rows.tables[table], table, id, from, to),
      get: (table: Table, key: readonly KeyPart[]) => {
        const row = rows.tables[table].get(key);
        return row && { key: recordName(table, row.key), value: row.value };
      },
      latest: (table: "items" | "settled" | "changes", before: number, limit: number) =>
        rows.tables[table]
          .latest(before, limit)
          .map((row) => ({ key: recordName(table, row.key), value: row.value })),
      // Sorted whole rather than stepped through (this store is for tests and small sessions).
      parkedBefore: (before: ParkedCursor | undefined, limit: number) =>
        sortedRange(rows.tables.parked, "parked", undefined, -Infinity, Number.POSITIVE_INFINITY)
          .filter((row) => before === undefined || isBelow(itemOfRow(row), before))
          .reverse()
          .slice(0, limit),
      // Deadlines are times, far apart: sorted whole rather than stepped through (this store is for tests).
      earliest: (table: "settled" | "deadlines", limit: number) =>
        table === "deadlines"
          ? sortedRange(rows.tables[table], table, undefined, -Infinity, Number.POSITIVE_INFINITY).slice(
              0,
              limit,
            )
          : rows.tables[table]
              .earliest(limit)
              .map((row) => ({ key: recordName(table, row.key), value: row.value })),
      count: (table: "settled" | "tasks") => rows.tables[table].count,
    } satisfies SessionRowReader;
  }

  private assertOpen(): void {
    if (this.closed) throw new StorageError("storage-closed", "memory storage is closed");
  }
}

function emptyTables(): Record<Table, Rows> {
  return Object.fromEntries(TABLES.map((table) => [table, new Rows()])) as Record<Table, Rows>;
}

function sameRow(a: RowWrite, b: RowWrite): boolean {
  return a.table === b.table && a.key.length === b.key.length && a.key.every((part, i) => part === b.key[i]);
}

/** Creates an in-memory store. */
export function memoryStorage(options?: MemoryStorageOptions): MemoryStorage {
  return new MemoryStorage(options);
}
