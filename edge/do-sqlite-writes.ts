/**
 * Writes of the Durable Object SQLite store, each inside the caller's `transactionSync`: one row, a log
 * tail's rows in batched statements, the change log's pruning, and the session row.
 */
import { DuplicateKeyError, StorageError } from "../src/errors.ts";
import { prunableThrough, pruneThroughSync } from "../src/storage/change-log.ts";
import { firstVersionOf } from "../src/storage/log-head.ts";
import { versionOfChange } from "../src/storage/log-rows.ts";
import type { KeyPart, Table } from "../src/storage/rows.ts";
import { checkCreate, checkRowSize, type RowWrite } from "../src/storage/rows.ts";
import type { SessionImport } from "../src/storage/storage.ts";
import type { Materialization } from "../src/storage/tail.ts";
import type { SqliteRows } from "./do-sqlite-rows.ts";
import {
  batches,
  columns,
  type DurableObjectStorageLike,
  deleteRows,
  INSERT_NEW_ROW,
  UPSERT_ROW,
  upsertRows,
} from "./do-sqlite-sql.ts";

export class SqliteWrites {
  constructor(
    private readonly sql: DurableObjectStorageLike["sql"],
    private readonly rows: SqliteRows,
    private readonly maxRowBytes: number,
    private readonly retainBytes: number,
  ) {}

  /** Writes a tail's rows: its range deletes go first, then each key's last write. */
  materialize(sessionId: string, { ranges, rows }: Materialization, version = 0): void {
    for (const { table, id, below } of ranges)
      this.sql.exec(
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
    for (const batch of batches(deletes)) this.sql.exec(deleteRows(batch.length), ...batch.flat());
    for (const batch of batches(writes)) this.sql.exec(upsertRows(batch.length), ...batch.flat());
  }

  /**
   * Deletes the change-log rows beyond the count bound or the byte bound, whichever is more: whole rows of
   * whole blocks (see `prunableThrough`), the row holding version `v` being the first keyed at or after it.
   * Returns how far the bounds let the log go (0: not at all).
   */
  prune(
    sessionId: string,
    prune: { through: number; newest: number },
    logEnd: number,
    keepAfter?: number,
  ): number {
    const { sql } = this;
    const [first] = this.rows.range(sessionId, "changes", "", 0, Number.MAX_SAFE_INTEGER, 1);
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
  put(sessionId: string, row: RowWrite, version = 0, json = JSON.stringify(row.value)): number {
    const [id, n] = columns(row.table, row.key);
    if (row.op === "delete") {
      this.sql.exec(
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
      const { rowsWritten } = this.sql.exec(INSERT_NEW_ROW, sessionId, row.table, id, n, json);
      if (typeof rowsWritten !== "number")
        throw new StorageError("storage-failed", "the store's sql.exec does not report rowsWritten");
      checkCreate(row, rowsWritten === 0, version);
      return json.length;
    }
    this.sql.exec(UPSERT_ROW, sessionId, row.table, id, n, json);
    return json.length;
  }

  /** Writes a raw row, bypassing every check (`unsafeWriteRaw`, for tests). */
  writeRaw(sessionId: string, table: Table | "sessions", key: readonly KeyPart[], value: unknown): void {
    if (table === "sessions") {
      this.writeMeta(sessionId, value);
      return;
    }
    const [id, n] = columns(table, key);
    this.sql.exec(
      "INSERT OR REPLACE INTO da_rows (session, tbl, id, n, v) VALUES (?, ?, ?, ?, ?)",
      sessionId,
      table,
      id,
      n,
      JSON.stringify(value),
    );
  }

  /** Writes the session row. */
  writeMeta(sessionId: string, meta: unknown): void {
    this.sql.exec(
      // An update, not a replace, when the row exists: SQLite (and the platform's bill) counts one row written.
      "INSERT INTO da_sessions (id, v) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET v = excluded.v",
      sessionId,
      JSON.stringify(meta),
    );
  }

  /** Writes an imported session whole (its rows, log and session row; `replace`: over the one stored). */
  importRows(sessionId: string, session: SessionImport): void {
    if (this.rows.readMeta(sessionId) !== undefined) {
      if (!session.replace) throw new DuplicateKeyError(`sessions/${sessionId}`, 0);
      this.sql.exec("DELETE FROM da_rows WHERE session = ?", sessionId);
    }
    const writes = session.rows.map((row) => {
      const json = JSON.stringify(row.value);
      checkRowSize(row, json, this.maxRowBytes, 0);
      return [sessionId, row.table, ...columns(row.table, row.key), json];
    });
    for (const batch of batches(writes)) this.sql.exec(upsertRows(batch.length), ...batch.flat());
    for (const log of session.log) this.sql.exec(UPSERT_ROW, sessionId, "changes", "", log.version, log.json);
    this.writeMeta(sessionId, session.meta);
  }
}
