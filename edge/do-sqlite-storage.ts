/**
 * The Durable Object SQLite store: the storage contract over `ctx.storage.sql`, one `transactionSync` per
 * commit group. A Durable Object serializes its own requests, and the transaction makes the guard check
 * and the writes one atomic step, so a stale instance can never advance a session.
 */
import { ensureError, KernelError, StorageError } from "../src/errors.ts";
import type { CommitRecord } from "../src/records/schemas.ts";
import { withLogFloor } from "../src/storage/change-log.ts";
import {
  createRowsOf,
  knownTail,
  logRowWrite,
  openedWriterMeta,
  planGroup,
  tailFromLog,
} from "../src/storage/group-plan.ts";
import { changesAfter } from "../src/storage/log-rows.ts";
import type { WriteHook } from "../src/storage/memory-storage.ts";
import type { KeyPart, Table } from "../src/storage/rows.ts";
import { rawNumber } from "../src/storage/rows.ts";
import { checkGuard, nextWriterMeta, upgradedMeta } from "../src/storage/session-row.ts";
import type {
  CommitGuard,
  OpenRequest,
  ParkedCursor,
  RawSession,
  SessionImport,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredRecord,
  StoredSession,
} from "../src/storage/storage.ts";
import {
  checkCounts,
  checkStorageOptions,
  DEFAULT_RETAIN_CHANGE_BYTES,
  DEFAULT_RETAIN_CHANGES,
} from "../src/storage/storage.ts";
import { Tail, TailCache } from "../src/storage/tail.ts";
import { overlayReader } from "../src/storage/tail-overlay.ts";
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
} from "../src/storage/working-set.ts";
import { SqliteRows } from "./do-sqlite-rows.ts";
import {
  DO_LOG_ROW_BYTES,
  DO_SQLITE_MAX_ROW_BYTES,
  type DurableObjectStorageLike,
  INDEXES,
  SCHEMA,
  UPSERT_ROW,
} from "./do-sqlite-sql.ts";
import { SqliteWrites } from "./do-sqlite-writes.ts";

export interface DurableObjectSqliteStorageOptions extends StorageOptions {
  /** Called for each row a commit writes; throwing rolls the transaction back (fault injection in tests). */
  readonly onWrite?: WriteHook;
  /**
   * The largest serialized row this store writes, in UTF-8 bytes (default {@link DO_SQLITE_MAX_ROW_BYTES}).
   * A commit with a larger row is refused with `RecordTooLargeError` and nothing is written.
   */
  readonly maxRowBytes?: number;
  /**
   * The most characters of rows one snapshot of a session may move (`exportRaw`, the edge's
   * `…/replica/snapshot`; default {@link DO_SQLITE_MAX_EXPORT_CHARS}): the export holds them all in memory
   * at once, about four times over at its peak, and a Durable Object has 128 MB. A larger session is
   * refused with `RecordTooLargeError` before anything is read.
   */
  readonly maxExportChars?: number;
}

/** 16 Mi characters of rows: some 13,000 finished Submissions of a one-task agent (about 1.2 KB each). */
export const DO_SQLITE_MAX_EXPORT_CHARS = 16 * 1024 * 1024;

/** The DO SQLite store. Create one per Durable Object with `new DurableObjectSqliteStorage(ctx.storage)`. */
export class DurableObjectSqliteStorage implements Storage {
  private readonly retain: number;
  private readonly retainBytes: number;
  private readonly maxRowBytes: number;
  /** Whether the tables exist: created by the first write only, so reads never create a database. */
  private created = false;
  /** This object's tail of each session (see `tail.ts`). */
  private readonly tails = new TailCache();
  private readonly rows: SqliteRows;
  private readonly writes: SqliteWrites;

  constructor(
    private readonly storage: DurableObjectStorageLike,
    private readonly options: DurableObjectSqliteStorageOptions = {},
  ) {
    checkStorageOptions(options);
    checkCounts(options, ["maxExportChars"]);
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
    this.retainBytes = options.retainChangeBytes ?? DEFAULT_RETAIN_CHANGE_BYTES;
    this.maxRowBytes = options.maxRowBytes ?? DO_SQLITE_MAX_ROW_BYTES;
    this.rows = new SqliteRows(storage.sql);
    this.writes = new SqliteWrites(storage.sql, this.rows, this.maxRowBytes, this.retainBytes);
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    if (request.mode === "read" && !this.hasTables()) return undefined;
    const meta = this.run(() =>
      this.storage.transactionSync(() => {
        this.createTables();
        let meta = this.rows.readMeta(sessionId);
        if (request.mode === "read") return meta;
        meta = nextWriterMeta(meta, sessionId, request.at, request.epoch);
        // An older format: the index rows it lacks are written in this same transaction.
        const upgrade = upgradeRowsSync(rawNumber(meta, "format"), this.rows.reader(sessionId));
        if (upgrade) {
          for (const row of upgrade) this.writes.put(sessionId, row);
          meta = upgradedMeta(meta);
        }
        // The tail a previous writer left in the log only is written into rows before anything is read.
        this.writes.materialize(sessionId, this.tailOf(sessionId, meta).materialization());
        meta = openedWriterMeta(meta);
        this.writes.writeMeta(sessionId, meta);
        return meta;
      }),
    );
    if (meta === undefined) return undefined;
    if (request.mode === "write")
      this.tails.remember(sessionId, Tail.materialized(rawNumber(meta, "version") ?? 0), meta);
    // SQLite calls are synchronous and a Durable Object runs nothing else between them (only microtasks
    // pass between these awaits), so this reads one consistent snapshot.
    return this.run(() => readStoredSession(sessionId, meta, request, this.overlay(sessionId, meta)));
  }

  /** A row too large for the store fails the whole group with `RecordTooLargeError`, inside the transaction. */
  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    if (commits.length === 0) return;
    const { tail, written } = this.run(() =>
      this.storage.transactionSync(() => {
        const meta = checkGuard(this.hasTables() ? this.rows.readMeta(guard.sessionId) : undefined, guard);
        let index = 0;
        for (const { row, version, json } of createRowsOf(commits, this.maxRowBytes)) {
          this.options.onWrite?.(row, index++);
          this.writes.put(guard.sessionId, row, version, json);
        }
        const plan = planGroup(meta, this.tailOf(guard.sessionId, meta), commits, {
          retain: this.retain,
          tailCommits: this.options.tailCommits,
          maxRowBytes: this.maxRowBytes,
          logRowBytes: DO_LOG_ROW_BYTES,
        });
        for (const log of plan.log) {
          this.options.onWrite?.(logRowWrite(log), index++);
          this.storage.sql.exec(UPSERT_ROW, guard.sessionId, "changes", "", log.version, log.json);
        }
        if (plan.materialize) {
          for (const row of plan.materialize.rows) this.options.onWrite?.(row, index++);
          this.writes.materialize(guard.sessionId, plan.materialize, plan.meta.version);
        }
        const floor =
          plan.prune &&
          this.writes.prune(guard.sessionId, plan.prune, plan.meta.logEnd ?? 0, guard.keepChangesAfter);
        const written = withLogFloor(plan.meta, floor);
        this.writes.writeMeta(guard.sessionId, written);
        return { tail: plan.tail, written };
      }),
    );
    this.tails.remember(guard.sessionId, tail, written);
  }

  /** Writes the session's tail into rows, if the guard still holds (a writer closing). */
  async checkpoint(guard: CommitGuard): Promise<void> {
    if (!this.hasTables()) return;
    const { version, meta } = this.run(() =>
      this.storage.transactionSync(() => {
        const meta = checkGuard(this.rows.readMeta(guard.sessionId), guard);
        const tail = this.tailOf(guard.sessionId, meta);
        if (tail.isEmpty) return { version: tail.version, meta };
        const materialization = tail.materialization();
        for (const [i, row] of materialization.rows.entries()) this.options.onWrite?.(row, i);
        this.writes.materialize(guard.sessionId, materialization);
        this.writes.writeMeta(guard.sessionId, { ...meta, materialized: tail.version });
        return { version: tail.version, meta };
      }),
    );
    this.tails.remember(guard.sessionId, Tail.materialized(version), meta);
  }

  /**
   * This object's tail of a session, read from the log when the session row says it is not the known one
   * (in a Durable Object the one writer is this object: it is read only after a restart).
   */
  private tailOf(sessionId: string, meta: unknown): Tail {
    const cached = this.tails.get(sessionId, meta);
    const known = knownTail(meta, cached);
    if (known instanceof Tail) return known;
    const rows = this.rows.range(sessionId, "changes", "", known.readAfter + 1, Number.MAX_SAFE_INTEGER);
    const tail = tailFromLog(meta, cached, known.readAfter, rows);
    this.tails.remember(sessionId, tail, meta);
    return tail;
  }

  /** The stored rows of a session as the log's tail leaves them. */
  private overlay(sessionId: string, meta: unknown): SessionRowReader {
    return overlayReader(this.rows.reader(sessionId), this.tailOf(sessionId, meta));
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.read(sessionId, (r) => r.range("entries", conversationId, fromSeq, toSeq - 1), []);
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    if (!this.hasTables()) return { changes: [], oldestRetained: afterVersion + 1 };
    const [first] = this.run(() => this.rows.range(sessionId, "changes", "", 0, Number.MAX_SAFE_INTEGER, 1));
    const meta = this.run(() => this.rows.readMeta(sessionId));
    const read = {
      rows: (from: number, to: number, most = -1) =>
        this.run(() => this.rows.range(sessionId, "changes", "", from, to, most)),
      entries: (conversation: string, from: number, to: number) =>
        this.run(() => this.rows.entries(sessionId, conversation, from, to)),
    };
    return changesAfter(read, first, afterVersion, limit, meta);
  }

  async readDocumentRows(sessionId: string, documentId: string, fromVersion: number, toVersion: number) {
    return this.read(sessionId, (r) => r.range("documentRows", documentId, fromVersion, toVersion), []);
  }

  async readSubmission(sessionId: string, submissionId: string) {
    return this.read(sessionId, (r) => r.get("submissions", [submissionId]), undefined);
  }

  async readRequest(sessionId: string, requestId: string) {
    return this.read(sessionId, (r) => readRequest(r, requestId), undefined);
  }

  async readTask(sessionId: string, taskId: string) {
    return this.read(sessionId, (r) => r.get("tasks", [taskId]), undefined);
  }

  async readSignals(sessionId: string, keys: readonly string[]) {
    return this.read(sessionId, readSignalRows(keys), noSignalRows(keys));
  }

  async readTaskTree(sessionId: string, rootId: string) {
    return this.read(sessionId, (r) => readTrees(r, [rootId]), []);
  }

  async readWaiting(sessionId: string, keys: readonly string[]) {
    return this.read(sessionId, readWaitingTrees(keys), noWaitingTrees(keys));
  }

  async readParked(sessionId: string, before: ParkedCursor | undefined, limit: number) {
    return this.read(sessionId, (r) => readParkedPage(r, before, limit), []);
  }

  async readDeadlines(sessionId: string, limit: number) {
    return this.read(sessionId, (r) => r.earliest("deadlines", limit), []);
  }

  async readItems(sessionId: string, before: number, limit: number) {
    const none = { items: [] as StoredItem[], submissions: [] as StoredRecord[] };
    return this.read(sessionId, (r) => readItemPage(r, before, limit), none);
  }

  async readSettled(sessionId: string, limit: number) {
    return this.read(sessionId, (r) => readSettledPage(r, limit), { items: [], count: 0 });
  }

  async close(): Promise<void> {
    // The platform owns the database; nothing to release.
  }

  /**
   * A read of one session through its rows as the log's tail leaves them, answered `none` when this
   * object's database holds no tables yet (it creates none) or not the session.
   */
  private async read<T>(
    sessionId: string,
    body: (reader: SessionRowReader) => T | Promise<T>,
    none: T,
  ): Promise<T> {
    if (!this.hasTables()) return none;
    return this.run(() => {
      const meta = this.rows.readMeta(sessionId);
      return meta === undefined ? none : body(this.overlay(sessionId, meta));
    });
  }

  /** Writes a raw row, bypassing every check. Only for tests that need a corrupt or hand-made record. */
  unsafeWriteRaw(
    sessionId: string,
    table: Table | "sessions",
    key: readonly KeyPart[],
    value: unknown,
  ): void {
    this.createTables();
    this.writes.writeRaw(sessionId, table, key, value);
  }

  /** The ids of the sessions stored in this Durable Object (a session host keeps exactly one). */
  sessionIds(): string[] {
    if (!this.hasTables()) return [];
    return this.storage.sql
      .exec("SELECT id FROM da_sessions ORDER BY id")
      .toArray()
      .map((row) => String(row.id));
  }

  /** Whether this object's database holds the store's tables (asked without creating anything). */
  private hasTables(): boolean {
    if (this.created) return true;
    const found = this.storage.sql
      .exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'da_sessions'")
      .toArray();
    this.created = found.length > 0;
    // A database made by an earlier version of this store gets the indexes it lacks (it exists already).
    if (this.created) for (const statement of INDEXES) this.storage.sql.exec(statement);
    return this.created;
  }

  private createTables(): void {
    if (this.created) return;
    for (const statement of SCHEMA) this.storage.sql.exec(statement);
    this.created = true;
  }

  async exportRaw(sessionId: string): Promise<RawSession | undefined> {
    if (!this.hasTables()) return undefined;
    // One synchronous read: nothing of this object runs in between, so it is one consistent snapshot.
    return this.run(() => {
      const meta = this.rows.readMeta(sessionId);
      if (meta === undefined) return undefined;
      const limit = this.options.maxExportChars ?? DO_SQLITE_MAX_EXPORT_CHARS;
      return this.rows.exportRows(sessionId, meta, limit);
    });
  }

  async importRaw(sessionId: string, session: SessionImport): Promise<void> {
    this.run(() =>
      this.storage.transactionSync(() => {
        this.createTables();
        this.writes.importRows(sessionId, session);
      }),
    );
    this.tails.forget(sessionId);
  }

  /** Deletes one session's rows and its session row, in one transaction. */
  async deleteSession(sessionId: string): Promise<void> {
    if (!this.hasTables()) return;
    this.run(() =>
      this.storage.transactionSync(() => {
        this.storage.sql.exec("DELETE FROM da_rows WHERE session = ?", sessionId);
        this.storage.sql.exec("DELETE FROM da_sessions WHERE id = ?", sessionId);
      }),
    );
    this.tails.forget(sessionId);
  }

  /** Deletes every row of the store: a session created by a request that then failed leaves nothing. */
  deleteAll(): void {
    if (!this.hasTables()) return;
    this.run(() =>
      this.storage.transactionSync(() => {
        this.storage.sql.exec("DELETE FROM da_rows");
        this.storage.sql.exec("DELETE FROM da_sessions");
      }),
    );
    this.tails.forget();
  }

  private run<T>(body: () => T): T {
    try {
      return body();
    } catch (error) {
      if (error instanceof KernelError) throw error;
      const err = ensureError(error);
      const quota = /SQLITE_FULL|exceeded|quota/i.test(err.message);
      throw new StorageError(
        quota ? "quota-exceeded" : "storage-failed",
        `Durable Object SQLite: ${err.message}`,
        { cause: err },
      );
    }
  }
}
