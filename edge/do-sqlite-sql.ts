/**
 * The Durable Object SQLite store's layout: its tables and indexes, the statements its writes share, and how
 * a layout key maps to the table's (id, n) columns. Rows of every kind live in one `WITHOUT ROWID` table.
 */
import { KEY_LAYOUT, type KeyPart, type Table } from "../src/storage/rows.ts";

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
export const INDEXES = [
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
export const INSERT_NEW_ROW =
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
export function* batches<T>(items: readonly T[]): Generator<T[]> {
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
export const UPSERT_ROW = upsertRows(1);

/** Splits a layout key into its (id, n) columns. */
export function columns(table: Table, key: readonly KeyPart[]): [string, number] {
  switch (KEY_LAYOUT[table]) {
    case "n":
      return ["", key[0] as number];
    case "n,id":
      return [key[1] as string, key[0] as number];
    case "id,n":
      return [key[0] as string, key[1] as number];
    case "id":
      return [key[0] as string, -1];
  }
}

/** Joins (id, n) columns back into a layout key. */
export function keyOf(table: Table, id: string, n: number): KeyPart[] {
  switch (KEY_LAYOUT[table]) {
    case "n":
      return [n];
    case "n,id":
      return [n, id];
    case "id,n":
      return [id, n];
    case "id":
      return [id];
  }
}

/** A row whose text is not JSON loads as that text, so validation reports it instead of the store crashing. */
export function parseJson(text: unknown): unknown {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
