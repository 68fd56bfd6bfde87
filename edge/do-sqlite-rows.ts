/**
 * Reads of the Durable Object SQLite store's rows (SQLite calls are synchronous): by key, by range, newest
 * or earliest first through the partial indexes, and the working-set reader the shared reads take.
 */

import { RecordTooLargeError } from "../src/errors.ts";
import { entriesOfRows } from "../src/storage/entry-runs.ts";
import { materializedThrough } from "../src/storage/group-plan.ts";
import type { KeyPart, Table } from "../src/storage/rows.ts";
import { rawNumber, recordName } from "../src/storage/rows.ts";
import type { ExportedRow, ParkedCursor, RawSession, StoredRecord } from "../src/storage/storage.ts";
import type { SessionRowReader } from "../src/storage/working-set.ts";
import {
  columns,
  type DurableObjectStorageLike,
  keyOf,
  parseJson,
  READ_WAITING_TREE,
} from "./do-sqlite-sql.ts";

/** A snapshot row's characters besides its value and id: `{"table":…,"key":[…, n],"value":…}`. */
const ROW_FRAMING = 40;

export class SqliteRows {
  constructor(private readonly sql: DurableObjectStorageLike["sql"]) {}

  /**
   * The rows of one session, for the shared working-set reads (SQLite calls are synchronous). One reader
   * serves one read: a parked wait's key index row is read with its task and that task's child list in one
   * statement, kept here for the reads of them that follow (see {@link readAhead}).
   */
  reader(sessionId: string) {
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
        const row = this.sql
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
        this.sql
          .exec(
            `SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = '${table}' AND n < ? ORDER BY n DESC, id DESC LIMIT ?`,
            sessionId,
            before,
            limit,
          )
          .toArray()
          .map((row) => this.record(table, row)),
      parkedBefore: (before: ParkedCursor | undefined, limit: number) =>
        this.sql
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
        this.sql
          .exec(
            `SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = '${table}' ORDER BY n ASC, id ASC LIMIT ?`,
            sessionId,
            limit,
          )
          .toArray()
          .map((row) => this.record(table, row)),
      count: (table: "settled" | "tasks") =>
        Number(
          this.sql
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
    const rows = this.sql.exec(READ_WAITING_TREE, sessionId, key).toArray();
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

  all(sessionId: string, table: Table): StoredRecord[] {
    const rows = this.sql
      .exec("SELECT id, n, v FROM da_rows WHERE session = ? AND tbl = ? ORDER BY id, n", sessionId, table)
      .toArray();
    return rows.map((row) => this.record(table, row));
  }

  /** Entries `from` ≤ seq ≤ `to` of one conversation, each its own record (see `entry-runs.ts`). */
  entries(sessionId: string, conversation: string, from: number, to: number): StoredRecord[] {
    if (from > to) return [];
    const floor = this.sql
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

  range(sessionId: string, table: Table, id: string, from: number, to: number, limit = -1): StoredRecord[] {
    const rows = this.sql
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

  record(table: Table, row: Record<string, unknown>): StoredRecord {
    const key = recordName(table, keyOf(table, String(row.id), Number(row.n)));
    return { key, value: parseJson(row.v) };
  }

  readMeta(sessionId: string): unknown {
    const row = this.sql.exec("SELECT v FROM da_sessions WHERE id = ?", sessionId).toArray()[0];
    return row === undefined ? undefined : parseJson(row.v);
  }

  /**
   * Every row of a session but its change log's, and the log after its materialized part: the parts of a snapshot,
   * read in the caller's one synchronous pass. Refused with `RecordTooLargeError` above `limit` characters
   * of rows, before any is read.
   */
  exportRows(sessionId: string, meta: unknown, limit: number): RawSession {
    // What the export reads and holds: every row but the change log's, keys and a snapshot row's framing
    // included (a session of long ids and keys is some twice its values), and the log's unmaterialized tail.
    const after = materializedThrough(meta);
    const size = this.sql
      .exec(
        `SELECT coalesce(sum(length(v) + length(id) + ${ROW_FRAMING}), 0) AS c FROM da_rows
          WHERE session = ? AND (tbl <> 'changes' OR n > ?)`,
        sessionId,
        after,
      )
      .toArray()[0];
    const chars = Number(size?.c ?? 0);
    if (chars > limit)
      throw new RecordTooLargeError(
        `session ${sessionId} holds ${chars} characters of rows, more than one snapshot moves (${limit}): keep fewer finished items (retention) or raise maxExportChars`,
        `sessions/${sessionId}`,
        chars,
        limit,
        rawNumber(meta, "version") ?? 0,
      );
    const rows = this.sql
      .exec("SELECT tbl, id, n, v FROM da_rows WHERE session = ? AND tbl <> 'changes'", sessionId)
      .toArray()
      .map((row) => {
        const table = row.tbl as ExportedRow["table"];
        return { table, key: keyOf(table, row.id as string, row.n as number), value: parseJson(row.v) };
      });
    return { meta, rows, log: this.range(sessionId, "changes", "", after + 1, Number.MAX_SAFE_INTEGER) };
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
