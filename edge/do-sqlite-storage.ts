/**
 * The Durable Object SQLite store: the storage contract over `ctx.storage.sql`, one `transactionSync` per
 * commit group. A Durable Object serializes its own requests, and the transaction makes the guard check
 * and the writes one atomic step, so a stale instance can never advance a session.
 */
import {
  DuplicateKeyError,
  ensureError,
  KernelError,
  RecordTooLargeError,
  StorageError,
} from "../src/errors.ts";
import type { CommitRecord } from "../src/records/schemas.ts";
import { prunableThrough, pruneThroughSync, withLogFloor } from "../src/storage/change-log.ts";
import { entriesOfRows } from "../src/storage/entry-runs.ts";
import {
  createRowsOf,
  knownTail,
  logRowWrite,
  materializedThrough,
  openedWriterMeta,
  planGroup,
  tailFromLog,
} from "../src/storage/group-plan.ts";
import { firstVersionOf } from "../src/storage/log-head.ts";
import { changesAfter, versionOfChange } from "../src/storage/log-rows.ts";
import type { WriteHook } from "../src/storage/memory-storage.ts";
import type { KeyPart, Table } from "../src/storage/rows.ts";
import { checkCreate, checkRowSize, type RowWrite, rawNumber, recordName } from "../src/storage/rows.ts";
import { checkGuard, nextWriterMeta, upgradedMeta } from "../src/storage/session-row.ts";
import type {
  CommitGuard,
  ExportedRow,
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
import { type Materialization, Tail, TailCache } from "../src/storage/tail.ts";
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

/** The parts of `DurableObjectStorage` this store uses (structural, so no Cloudflare types are needed). */
export interface DurableObjectStorageLike {
  readonly sql: {
    exec(
      query: string,
      ...bindings: unknown[]
    ): { toArray(): Record<string, unknown>[]; readonly rowsWritten: number };
  };
  transactionSync<T>(closure: () => T): T;
}

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

/**
 * Cloudflare documents 2 MB as the largest row of a Durable Object's SQLite database (workerd refuses a
 * record of about 2.2 MB with SQLITE_TOOBIG); the margin leaves room for the key columns.
 */
export const DO_SQLITE_MAX_ROW_BYTES = 2_000_000;

/**
 * A group's commits are packed into change-log rows of at most this many bytes (a larger commit gets a row
 * of its own). Rows share one table, whose B-tree keeps whole rows as the keys dividing its pages, and SQLite
 * reads a divider's whole value to compare with it: a seek that passed a group's 360 KB row read every page
 * of it (opening a session of 50,000 Submissions written 500 commits a transaction took 1.6x one of 100).
 */
export const DO_LOG_ROW_BYTES = 16_384;

/**
 * Items are keyed (version, id) but read newest first by version alone: a partial index over them only, so
 * finding the latest settled ones never scans the session's history, and no other row pays for it.
 */
const INDEXES = [
  "CREATE INDEX IF NOT EXISTS da_items_by_version ON da_rows (session, n DESC, id DESC) WHERE tbl = 'items'",
  "CREATE INDEX IF NOT EXISTS da_settled_by_version ON da_rows (session, n DESC, id DESC) WHERE tbl = 'settled'",
  "CREATE INDEX IF NOT EXISTS da_parked_by_version ON da_rows (session, n DESC, id DESC) WHERE tbl = 'parked'",
  "CREATE INDEX IF NOT EXISTS da_deadlines_by_time ON da_rows (session, n DESC, id DESC) WHERE tbl = 'deadlines'",
];

/**
 * Rows are stored as JSON text keyed by (session, table, id, n): `id` is the string part of the key and `n`
 * its numeric part (entry seq, document version, change version), so every read is one indexed range.
 */
export const SCHEMA = [
  "CREATE TABLE IF NOT EXISTS da_sessions (id TEXT PRIMARY KEY, v TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS da_rows (session TEXT NOT NULL, tbl TEXT NOT NULL, id TEXT NOT NULL, n INTEGER NOT NULL, v TEXT NOT NULL, PRIMARY KEY (session, tbl, id, n)) WITHOUT ROWID",
  ...INDEXES,
];

/** A create-only row: written when its key is new, else nothing (`rowsWritten` 0). */
const INSERT_NEW_ROW =
  "INSERT INTO da_rows (session, tbl, id, n, v) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session, tbl, id, n) DO NOTHING";

/**
 * A parked wait's key index row (`?1` session, `?2` key), the task it names and that task's child rows, in
 * one statement (see `readAhead`).
 */
export const READ_WAITING_TREE = `
  WITH w AS (SELECT v FROM da_rows WHERE session = ?1 AND tbl = 'waitKeys' AND id = ?2 AND n = -1),
    t AS (SELECT json_extract(v, '$') AS id FROM w WHERE CASE WHEN json_valid(v) THEN json_type(v) END = 'text')
  SELECT 'waitKeys' AS tbl, ?2 AS id, -1 AS n, v FROM w
  UNION ALL
  SELECT 'tasks', id, n, v FROM da_rows WHERE session = ?1 AND tbl = 'tasks' AND id = (SELECT id FROM t) AND n = -1
  UNION ALL
  SELECT 'children', id, n, v FROM da_rows WHERE session = ?1 AND tbl = 'children' AND id = (SELECT id FROM t)`;

/**
 * Batches of rows for one statement each, of 16, 8, 4, 2 or 1 rows: few distinct statement texts, so
 * workerd's cache of prepared statements (by text) keeps them all, and at most 80 values bound (workerd
 * allows 100 per statement).
 */
function* batches<T>(items: readonly T[]): Generator<T[]> {
  for (let at = 0, size = 16; at < items.length; ) {
    while (size > items.length - at) size /= 2;
    yield items.slice(at, at + size);
    at += size;
  }
}

/**
 * Deletes `count` rows by key (`session, tbl, id, n` per row), each found by the whole primary key. Not
 * `session = ? AND (tbl = ? AND … OR …)`: with the partial indexes there, SQLite plans that one as a scan of
 * the session's every row (a test pins the plan).
 */
export const deleteRows = (count: number) =>
  `DELETE FROM da_rows WHERE (session, tbl, id, n) IN (VALUES ${Array(count).fill("(?, ?, ?, ?)").join(", ")})`;

/**
 * Writes `count` rows (`session, tbl, id, n, v` per row), each updated in place when it exists: a replace
 * deletes and inserts again, which SQLite (and the platform's bill) counts as two rows written for a row the
 * partial indexes hold.
 */
export const upsertRows = (count: number) =>
  `INSERT INTO da_rows (session, tbl, id, n, v) VALUES ${Array(count).fill("(?, ?, ?, ?, ?)").join(", ")} ON CONFLICT (session, tbl, id, n) DO UPDATE SET v = excluded.v`;

/** Writes one row (see {@link upsertRows}). */
const UPSERT_ROW = upsertRows(1);

/** Splits a layout key into its (id, n) columns. */
function columns(table: Table, key: readonly KeyPart[]): [string, number] {
  switch (table) {
    case "changes":
      return ["", key[0] as number];
    case "items":
    case "live":
    case "settled":
    case "parked":
    case "deadlines":
      return [key[1] as string, key[0] as number];
    case "entries":
    case "documentRows":
    case "children":
      return [key[0] as string, key[1] as number];
    default:
      return [key[0] as string, -1];
  }
}

function keyOf(table: Table, id: string, n: number): KeyPart[] {
  if (table === "changes") return [n];
  if (["items", "live", "settled", "parked", "deadlines"].includes(table)) return [n, id];
  return n === -1 && table !== "children" ? [id] : [id, n];
}

/** The DO SQLite store. Create one per Durable Object with `new DurableObjectSqliteStorage(ctx.storage)`. */
export class DurableObjectSqliteStorage implements Storage {
  private readonly retain: number;
  private readonly retainBytes: number;
  private readonly maxRowBytes: number;
  /** Whether the tables exist: created by the first write only, so reads never create a database. */
  private created = false;
  /** This object's tail of each session (see `tail.ts`). */
  private readonly tails = new TailCache();

  constructor(
    private readonly storage: DurableObjectStorageLike,
    private readonly options: DurableObjectSqliteStorageOptions = {},
  ) {
    checkStorageOptions(options);
    checkCounts(options, ["maxExportChars"]);
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
    this.retainBytes = options.retainChangeBytes ?? DEFAULT_RETAIN_CHANGE_BYTES;
    this.maxRowBytes = options.maxRowBytes ?? DO_SQLITE_MAX_ROW_BYTES;
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    if (request.mode === "read" && !this.hasTables()) return undefined;
    const meta = this.run(() =>
      this.storage.transactionSync(() => {
        this.createTables();
        let meta = this.readMeta(sessionId);
        if (request.mode === "read") return meta;
        meta = nextWriterMeta(meta, sessionId, request.at, request.epoch);
        // An older format: the index rows it lacks are written in this same transaction.
        const upgrade = upgradeRowsSync(rawNumber(meta, "format"), this.reader(sessionId));
        if (upgrade) {
          for (const row of upgrade) this.put(sessionId, row);
          meta = upgradedMeta(meta);
        }
        // The tail a previous writer left in the log only is written into rows before anything is read.
        this.materialize(sessionId, this.tailOf(sessionId, meta).materialization());
        meta = openedWriterMeta(meta);
        this.writeMeta(sessionId, meta);
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
        const meta = checkGuard(this.hasTables() ? this.readMeta(guard.sessionId) : undefined, guard);
        let index = 0;
        for (const { row, version, json } of createRowsOf(commits, this.maxRowBytes)) {
          this.options.onWrite?.(row, index++);
          this.put(guard.sessionId, row, version, json);
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
          this.materialize(guard.sessionId, plan.materialize, plan.meta.version);
        }
        const floor =
          plan.prune &&
          this.prune(guard.sessionId, plan.prune, plan.meta.logEnd ?? 0, guard.keepChangesAfter);
        const written = withLogFloor(plan.meta, floor);
        this.writeMeta(guard.sessionId, written);
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
        const meta = checkGuard(this.readMeta(guard.sessionId), guard);
        const tail = this.tailOf(guard.sessionId, meta);
        if (tail.isEmpty) return { version: tail.version, meta };
        const materialization = tail.materialization();
        for (const [i, row] of materialization.rows.entries()) this.options.onWrite?.(row, i);
        this.materialize(guard.sessionId, materialization);
        this.writeMeta(guard.sessionId, { ...meta, materialized: tail.version });
        return { version: tail.version, meta };
      }),
    );
    this.tails.remember(guard.sessionId, Tail.materialized(version), meta);
  }

  /** Writes a tail's rows: its range deletes go first, then each key's last write. */
  private materialize(sessionId: string, { ranges, rows }: Materialization, version = 0): void {
    for (const { table, id, below } of ranges)
      this.storage.sql.exec(
        "DELETE FROM da_rows WHERE session = ? AND tbl = ? AND id = ? AND n < ?",
        sessionId,
        table,
        id,
        below,
      );
    // Each key once, in its last state: the order between keys does not matter, so the deletes and the
    // writes go in batches, one statement each (a statement's own cost in workerd is most of a small write).
    const deletes: unknown[][] = [];
    const writes: unknown[][] = [];
    for (const row of rows) {
      if (row.op === "create") {
        this.put(sessionId, row, version);
        continue;
      }
      const [id, n] = columns(row.table, row.key);
      if (row.op === "delete") {
        deletes.push([sessionId, row.table, id, n]);
        continue;
      }
      const json = JSON.stringify(row.value);
      checkRowSize(row, json, this.maxRowBytes, version);
      writes.push([sessionId, row.table, id, n, json]);
    }
    for (const batch of batches(deletes)) this.storage.sql.exec(deleteRows(batch.length), ...batch.flat());
    for (const batch of batches(writes)) this.storage.sql.exec(upsertRows(batch.length), ...batch.flat());
  }

  /**
   * This object's tail of a session, read from the log when the session row says it is not the known one
   * (in a Durable Object the one writer is this object: it is read only after a restart).
   */
  private tailOf(sessionId: string, meta: unknown): Tail {
    const cached = this.tails.get(sessionId, meta);
    const known = knownTail(meta, cached);
    if (known instanceof Tail) return known;
    const rows = this.range(sessionId, "changes", "", known.readAfter + 1, Number.MAX_SAFE_INTEGER);
    const tail = tailFromLog(meta, cached, known.readAfter, rows);
    this.tails.remember(sessionId, tail, meta);
    return tail;
  }

  /** The stored rows of a session as the log's tail leaves them. */
  private overlay(sessionId: string, meta: unknown): SessionRowReader {
    return overlayReader(this.reader(sessionId), this.tailOf(sessionId, meta));
  }

  async readEntries(sessionId: string, conversationId: string, fromSeq: number, toSeq: number) {
    if (toSeq <= fromSeq) return [];
    return this.read(sessionId, (r) => r.range("entries", conversationId, fromSeq, toSeq - 1), []);
  }

  async readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges> {
    if (!this.hasTables()) return { changes: [], oldestRetained: afterVersion + 1 };
    const [first] = this.run(() => this.range(sessionId, "changes", "", 0, Number.MAX_SAFE_INTEGER, 1));
    const meta = this.run(() => this.readMeta(sessionId));
    const read = {
      rows: (from: number, to: number, most = -1) =>
        this.run(() => this.range(sessionId, "changes", "", from, to, most)),
      entries: (conversation: string, from: number, to: number) =>
        this.run(() => this.entries(sessionId, conversation, from, to)),
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
      const meta = this.readMeta(sessionId);
      return meta === undefined ? none : body(this.overlay(sessionId, meta));
    });
  }

  /**
   * Deletes the change-log rows beyond the count bound or the byte bound, whichever is more: whole rows of
   * whole blocks (see `prunableThrough`), the row holding version `v` being the first keyed at or after it.
   * Returns how far the bounds let the log go (0: not at all).
   */
  private prune(
    sessionId: string,
    prune: { through: number; newest: number },
    logEnd: number,
    keepAfter?: number,
  ): number {
    const { sql } = this.storage;
    const [first] = this.range(sessionId, "changes", "", 0, Number.MAX_SAFE_INTEGER, 1);
    if (!first) return 0;
    const logStartOf = (v: number) => {
      const start = sql
        .exec(
          "SELECT json_extract(v, '$.logStart') AS s FROM da_rows WHERE session = ? AND tbl = 'changes' AND id = '' AND n >= ? ORDER BY n LIMIT 1",
          sessionId,
          v,
        )
        .toArray()[0]?.s;
      return typeof start === "number" ? start : undefined;
    };
    const oldest = firstVersionOf(first.value, versionOfChange(first));
    const floor = pruneThroughSync(logStartOf, {
      oldest,
      newest: prune.newest,
      logEnd,
      limit: this.retainBytes,
      through: prune.through,
      keepChangesAfter: keepAfter,
    });
    if (prunableThrough(floor) >= oldest)
      sql.exec(
        "DELETE FROM da_rows WHERE session = ? AND tbl = 'changes' AND id = '' AND n <= ?",
        sessionId,
        prunableThrough(floor),
      );
    return floor;
  }

  /**
   * Writes one row of the layout (a `create` row fails the transaction when its key exists); returns the
   * length of the JSON it stored (0 for a delete). `json`: the value's JSON, when the caller made it already.
   */
  private put(sessionId: string, row: RowWrite, version = 0, json = JSON.stringify(row.value)): number {
    const [id, n] = columns(row.table, row.key);
    if (row.op === "delete") {
      this.storage.sql.exec(
        "DELETE FROM da_rows WHERE session = ? AND tbl = ? AND id = ? AND n = ?",
        sessionId,
        row.table,
        id,
        n,
      );
      return 0;
    }
    checkRowSize(row, json, this.maxRowBytes, version);
    if (row.op === "create") {
      // One statement: a key that exists writes nothing (SQLite counts no row written), and the caller's
      // throw rolls the whole transaction back.
      const { rowsWritten } = this.storage.sql.exec(INSERT_NEW_ROW, sessionId, row.table, id, n, json);
      if (typeof rowsWritten !== "number")
        throw new StorageError("storage-failed", "the store's sql.exec does not report rowsWritten");
      checkCreate(row, rowsWritten === 0, version);
      return json.length;
    }
    this.storage.sql.exec(UPSERT_ROW, sessionId, row.table, id, n, json);
    return json.length;
  }

  /**
   * The rows of one session, for the shared working-set reads (SQLite calls are synchronous). One reader
   * serves one read: a parked wait's key index row is read with its task and that task's child list in one
   * statement, kept here for the reads of them that follow (see {@link readAhead}).
   */
  private reader(sessionId: string) {
    const ahead = new ReadAhead();
    return {
      all: (table: Table) => this.all(sessionId, table),
      range: (table: Table, id: string, from: number, to: number) =>
        table === "entries"
          ? this.entries(sessionId, id, from, to)
          : ((from === 0 && to === Number.MAX_SAFE_INTEGER ? ahead.take(table, id) : undefined) ??
            this.range(sessionId, table, id, from, to)),
      get: (table: Table, key: readonly KeyPart[]) => {
        if (table === "waitKeys") return this.readAhead(sessionId, key[0] as string, ahead);
        const early = table === "tasks" ? ahead.take(table, key[0] as string) : undefined;
        if (early) return early[0];
        const [id, n] = columns(table, key);
        const row = this.storage.sql
          .exec(
            "SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = ? AND id = ? AND n = ?",
            sessionId,
            table,
            id,
            n,
          )
          .toArray()[0];
        return row === undefined ? undefined : this.record(table, row);
      },
      // The table is written into the statement (one of three literals), so SQLite can use its partial index.
      latest: (table: "items" | "settled" | "changes", before: number, limit: number) =>
        this.storage.sql
          .exec(
            `SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = '${table}' AND n < ? ORDER BY n DESC, id DESC LIMIT ?`,
            sessionId,
            before,
            limit,
          )
          .toArray()
          .map((row) => this.record(table, row)),
      parkedBefore: (before: ParkedCursor | undefined, limit: number) =>
        this.storage.sql
          .exec(
            `SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = 'parked' AND (n < ? OR (n = ? AND id < ?)) ORDER BY n DESC, id DESC LIMIT ?`,
            sessionId,
            before?.version ?? Number.MAX_SAFE_INTEGER,
            before?.version ?? Number.MAX_SAFE_INTEGER,
            before?.id ?? "",
            limit,
          )
          .toArray()
          .map((row) => this.record("parked", row)),
      earliest: (table: "settled" | "deadlines", limit: number) =>
        this.storage.sql
          .exec(
            `SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = '${table}' ORDER BY n ASC, id ASC LIMIT ?`,
            sessionId,
            limit,
          )
          .toArray()
          .map((row) => this.record(table, row)),
      count: (table: "settled" | "tasks") =>
        Number(
          this.storage.sql
            .exec("SELECT COUNT(*) AS c FROM da_rows WHERE session = ? AND tbl = ?", sessionId, table)
            .toArray()[0]?.c ?? 0,
        ),
    } satisfies SessionRowReader;
  }

  /**
   * The key index row of `key`, read in one statement with the task it names and that task's child rows,
   * which `ahead` keeps for the reads a parked wait's read back makes next (`readWaitingTree`). In workerd a
   * statement's own cost is most of a read by key (about 12 µs in a table of 170,000 rows, bench/HOT-PATH.md):
   * one statement for three saves two of them on every parked signal. The rows are those the database holds
   * at this statement, as three statements made one after another would read them with no write between.
   */
  private readAhead(sessionId: string, key: string, ahead: ReadAhead): StoredRecord | undefined {
    const rows = this.storage.sql.exec(READ_WAITING_TREE, sessionId, key).toArray();
    const index = rows.find((row) => row.tbl === "waitKeys");
    if (index === undefined) return undefined;
    const record = this.record("waitKeys", index);
    if (typeof record.value !== "string") return record;
    const task = rows.filter((row) => row.tbl === "tasks").map((row) => this.record("tasks", row));
    const children = rows
      .filter((row) => row.tbl === "children")
      .sort((a, b) => Number(a.n) - Number(b.n))
      .map((row) => this.record("children", row));
    ahead.keep("tasks", record.value, task);
    ahead.keep("children", record.value, children);
    return record;
  }

  /** Writes a raw row, bypassing every check. Only for tests that need a corrupt or hand-made record. */
  unsafeWriteRaw(
    sessionId: string,
    table: Table | "sessions",
    key: readonly KeyPart[],
    value: unknown,
  ): void {
    this.createTables();
    if (table === "sessions") {
      this.writeMeta(sessionId, value);
      return;
    }
    const [id, n] = columns(table, key);
    this.storage.sql.exec(
      "INSERT OR REPLACE INTO da_rows (session, tbl, id, n, v) VALUES (?, ?, ?, ?, ?)",
      sessionId,
      table,
      id,
      n,
      JSON.stringify(value),
    );
  }

  private all(sessionId: string, table: Table): StoredRecord[] {
    const rows = this.storage.sql
      .exec("SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = ? ORDER BY id, n", sessionId, table)
      .toArray();
    return rows.map((row) => this.record(table, row));
  }

  /** Entries `from` ≤ seq ≤ `to` of one conversation, each its own record (see `entry-runs.ts`). */
  private entries(sessionId: string, conversation: string, from: number, to: number): StoredRecord[] {
    if (from > to) return [];
    const floor = this.storage.sql
      .exec(
        "SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = 'entries' AND id = ? AND n <= ? ORDER BY n DESC LIMIT 1",
        sessionId,
        conversation,
        from,
      )
      .toArray()
      .map((row) => this.record("entries", row));
    const after = from < to ? this.range(sessionId, "entries", conversation, from + 1, to) : [];
    return entriesOfRows([...floor, ...after], conversation, from, to);
  }

  private range(
    sessionId: string,
    table: Table,
    id: string,
    from: number,
    to: number,
    limit = -1,
  ): StoredRecord[] {
    const rows = this.storage.sql
      .exec(
        "SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = ? AND id = ? AND n BETWEEN ? AND ? ORDER BY n LIMIT ?",
        sessionId,
        table,
        id,
        from,
        to,
        limit,
      )
      .toArray();
    return rows.map((row) => this.record(table, row));
  }

  private record(table: Table, row: Record<string, unknown>): StoredRecord {
    const key = recordName(table, keyOf(table, String(row.id), Number(row.n)));
    return { key, value: parseJson(row.v) };
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
      const meta = this.readMeta(sessionId);
      if (meta === undefined) return undefined;
      const size = this.storage.sql
        .exec(
          "SELECT coalesce(sum(length(v)), 0) AS c FROM da_rows WHERE session = ? AND tbl <> 'changes'",
          sessionId,
        )
        .toArray()[0];
      const chars = Number(size?.c ?? 0);
      const limit = this.options.maxExportChars ?? DO_SQLITE_MAX_EXPORT_CHARS;
      if (chars > limit)
        throw new RecordTooLargeError(
          `session ${sessionId} holds ${chars} characters of rows, more than one snapshot moves (${limit}): keep fewer finished items (retention) or raise maxExportChars`,
          `sessions/${sessionId}`,
          chars,
          limit,
          rawNumber(meta, "version") ?? 0,
        );
      const rows = this.storage.sql
        .exec("SELECT tbl, id, n, v FROM da_rows WHERE session = ? AND tbl <> 'changes'", sessionId)
        .toArray()
        .map((row) => {
          const table = row.tbl as ExportedRow["table"];
          return { table, key: keyOf(table, row.id as string, row.n as number), value: parseJson(row.v) };
        });
      const after = materializedThrough(meta) + 1;
      return { meta, rows, log: this.range(sessionId, "changes", "", after, Number.MAX_SAFE_INTEGER) };
    });
  }

  async importRaw(sessionId: string, session: SessionImport): Promise<void> {
    this.run(() =>
      this.storage.transactionSync(() => {
        this.createTables();
        if (this.readMeta(sessionId) !== undefined) {
          if (!session.replace) throw new DuplicateKeyError(`sessions/${sessionId}`, 0);
          this.storage.sql.exec("DELETE FROM da_rows WHERE session = ?", sessionId);
        }
        const writes = session.rows.map((row) => {
          const json = JSON.stringify(row.value);
          checkRowSize(row, json, this.maxRowBytes, 0);
          return [sessionId, row.table, ...columns(row.table, row.key), json];
        });
        for (const batch of batches(writes)) this.storage.sql.exec(upsertRows(batch.length), ...batch.flat());
        for (const log of session.log)
          this.storage.sql.exec(UPSERT_ROW, sessionId, "changes", "", log.version, log.json);
        this.writeMeta(sessionId, session.meta);
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

  private readMeta(sessionId: string): unknown {
    const row = this.storage.sql.exec("SELECT v FROM da_sessions WHERE id = ?", sessionId).toArray()[0];
    return row === undefined ? undefined : parseJson(row.v);
  }

  private writeMeta(sessionId: string, meta: unknown): void {
    this.storage.sql.exec(
      // An update, not a replace, when the row exists: SQLite (and the platform's bill) counts one row written.
      "INSERT INTO da_sessions (id, v) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET v = excluded.v",
      sessionId,
      JSON.stringify(meta),
    );
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

/** Rows one statement read ahead of the reads that ask for them, each given once (see `readAhead`). */
class ReadAhead {
  private readonly rows = new Map<string, StoredRecord[]>();

  keep(table: "tasks" | "children", id: string, rows: StoredRecord[]): void {
    this.rows.set(`${table} ${id}`, rows);
  }

  /** The rows kept for `table` and `id` (a task's: none or one), or undefined when none were kept. */
  take(table: Table, id: string): StoredRecord[] | undefined {
    const rows = this.rows.get(`${table} ${id}`);
    this.rows.delete(`${table} ${id}`);
    return rows;
  }
}

/** A row whose text is not JSON loads as that text, so validation reports it instead of the store crashing. */
function parseJson(text: unknown): unknown {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
