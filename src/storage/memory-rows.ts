/** The memory store's tables: rows by encoded key, grouped by their first key part (DESIGN §9 reads). */

import { entriesOfRows, RUN_ENTRIES } from "./entry-runs.ts";
import type { KeyPart, RangeDelete, RowWrite, Table } from "./rows.ts";
import { recordName, TABLES } from "./rows.ts";
import type { ExportedRow, ParkedCursor, StoredRecord } from "./storage.ts";
import { isBelow, itemOfRow, type SessionRowReader } from "./working-set.ts";

/** A key as a string that sorts like the key: numbers offset to be non-negative (item keys may be below 0). */
export const encodeKey = (key: readonly KeyPart[]): string =>
  key
    .map((part) => (typeof part === "number" ? (part + 2 ** 52).toString(36).padStart(11, "0") : `s${part}`))
    .join("\u0000");

export interface Row {
  readonly key: readonly KeyPart[];
  readonly value: unknown;
}

/**
 * One table's rows by encoded key, also grouped by their first key part (conversation, document, …), so a
 * range read of one id touches only that id's rows, not the whole table.
 */
export class Rows {
  private readonly rows = new Map<string, Row>();
  private readonly groups = new Map<KeyPart, Map<string, Row>>();
  /** The range of numeric first key parts ever written (item and change versions), for `latest`. */
  private lowest = Number.POSITIVE_INFINITY;
  private highest = Number.NEGATIVE_INFINITY;

  get(key: readonly KeyPart[]): Row | undefined {
    return this.rows.get(encodeKey(key));
  }

  delete(key: readonly KeyPart[]): void {
    const encoded = encodeKey(key);
    if (!this.rows.delete(encoded)) return;
    const first = key[0] as KeyPart;
    const group = this.groups.get(first);
    group?.delete(encoded);
    if (group?.size === 0) this.groups.delete(first);
  }

  set(key: readonly KeyPart[], value: unknown): void {
    const encoded = encodeKey(key);
    const row = { key, value };
    this.rows.set(encoded, row);
    const first = key[0] as KeyPart;
    if (typeof first === "number") {
      this.lowest = Math.min(this.lowest, first);
      this.highest = Math.max(this.highest, first);
    }
    const group = this.groups.get(first) ?? new Map<string, Row>();
    if (group.size === 0) this.groups.set(first, group);
    group.set(encoded, row);
  }

  /** Deletes the rows of `id` (every row when undefined) for which `doomed` holds. */
  deleteWhere(id: KeyPart | undefined, doomed: (key: readonly KeyPart[]) => boolean): void {
    const scope = id === undefined ? this.rows : this.groups.get(id);
    if (!scope) return;
    for (const [encoded, row] of scope) {
      if (!doomed(row.key)) continue;
      this.rows.delete(encoded);
      const first = row.key[0] as KeyPart;
      const group = this.groups.get(first);
      group?.delete(encoded);
      if (group?.size === 0) this.groups.delete(first);
    }
  }

  /** Every row, or those of one id, as [encoded key, row]. */
  scan(id?: KeyPart): Iterable<[string, Row]> {
    return id === undefined ? this.rows : (this.groups.get(id) ?? []);
  }

  /** How many rows the table has. */
  get count(): number {
    return this.rows.size;
  }

  /**
   * Up to `limit` rows with the lowest numeric first parts, lowest first: found by stepping up through the
   * versions from the lowest one still held (it moves up as the oldest rows are deleted).
   */
  earliest(limit: number): Row[] {
    const found: Row[] = [];
    for (let n = this.lowest; n <= this.highest && found.length < limit; n++) {
      const group = this.groups.get(n);
      if (!group) {
        if (n === this.lowest) this.lowest = n + 1;
        continue;
      }
      const rows = [...group.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      for (const [, row] of rows) if (found.length < limit) found.push(row);
    }
    return found;
  }

  /** How many rows `id` has. */
  size(id: KeyPart): number {
    return this.groups.get(id)?.size ?? 0;
  }

  /**
   * Up to `limit` rows whose numeric first part is below `before`, highest first (then by the rest of the
   * key, highest first): found by stepping down through the versions, never by sorting the whole table.
   */
  latest(before: number, limit: number): Row[] {
    const found: Row[] = [];
    for (let n = Math.min(before - 1, this.highest); n >= this.lowest && found.length < limit; n--) {
      const group = this.groups.get(n);
      if (!group) continue;
      const rows = [...group.entries()].sort((a, b) => (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0));
      for (const [, row] of rows) if (found.length < limit) found.push(row);
    }
    return found;
  }
}

/** Entries `from` ≤ seq ≤ `to` of one conversation, each its own record (see `entry-runs.ts`). */
export function entryRange(rows: Rows, conversation: string, from: number, to: number): StoredRecord[] {
  if (from > to) return [];
  // The row keyed at or below `from` that may reach it is at most a run's length before it.
  const floor: StoredRecord[] = [];
  for (let n = from; n >= Math.max(0, from - RUN_ENTRIES + 1) && floor.length === 0; n--) {
    const row = rows.get([conversation, n]);
    if (row) floor.push({ key: recordName("entries", row.key), value: row.value });
  }
  const after = from < to ? sortedRange(rows, "entries", conversation, from + 1, to) : [];
  return entriesOfRows([...floor, ...after], conversation, from, to);
}

/**
 * Rows of a table (of one id, when given) whose numeric key part lies in [from, to], sorted by key. The
 * numeric part is the id's sequence number (entry seq, document version), or the key itself (change log).
 */
export function sortedRange(
  rows: Rows,
  table: Table,
  id: KeyPart | undefined,
  from: number,
  to: number,
): StoredRecord[] {
  // A short range of one id's numbered rows (a conversation's tail) is read key by key, not by a scan.
  if (id !== undefined && Number.isFinite(from) && to - from < rows.size(id) / 4 && to - from < 10_000) {
    const found: StoredRecord[] = [];
    for (let n = Math.max(0, from); n <= to; n++) {
      const row = rows.get([id, n]);
      if (row) found.push({ key: recordName(table, row.key), value: row.value });
    }
    return found;
  }
  const at = id === undefined ? 0 : 1;
  const out: { sort: string; record: StoredRecord }[] = [];
  for (const [sort, row] of rows.scan(id)) {
    const n = row.key[at];
    if (typeof n === "number" && (n < from || n > to)) continue;
    out.push({ sort, record: { key: recordName(table, row.key), value: row.value } });
  }
  out.sort((a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : 0));
  return out.map((o) => o.record);
}

/** One empty table per table of the layout. */
export function emptyTables(): Record<Table, Rows> {
  return Object.fromEntries(TABLES.map((table) => [table, new Rows()])) as Record<Table, Rows>;
}

/** The shared working-set reads over a session's tables (memory reads are synchronous). */
export function tablesReader(tables: Record<Table, Rows>) {
  const every = (table: Table) =>
    sortedRange(tables[table], table, undefined, -Infinity, Number.POSITIVE_INFINITY);
  const records = (table: Table, rows: Row[]) =>
    rows.map((row) => ({ key: recordName(table, row.key), value: row.value }));
  return {
    all: every,
    range: (table: Table, id: string, from: number, to: number) =>
      table === "entries"
        ? entryRange(tables.entries, id, from, to)
        : sortedRange(tables[table], table, id, from, to),
    get: (table: Table, key: readonly KeyPart[]) => {
      const row = tables[table].get(key);
      return row && { key: recordName(table, row.key), value: row.value };
    },
    latest: (table: "items" | "settled" | "changes", before: number, limit: number) =>
      records(table, tables[table].latest(before, limit)),
    // Sorted whole rather than stepped through (this store is for tests and small sessions).
    parkedBefore: (before: ParkedCursor | undefined, limit: number) =>
      every("parked")
        .filter((row) => before === undefined || isBelow(itemOfRow(row), before))
        .reverse()
        .slice(0, limit),
    // Deadlines are times, far apart: sorted whole rather than stepped through (this store is for tests).
    earliest: (table: "settled" | "deadlines", limit: number) =>
      table === "deadlines" ? every(table).slice(0, limit) : records(table, tables[table].earliest(limit)),
    count: (table: "settled" | "tasks") => tables[table].count,
  } satisfies SessionRowReader;
}

/** Writes a tail's rows into the tables: its range deletes go first, then each key's last write. */
export function applyMaterialization(
  tables: Record<Table, Rows>,
  ranges: readonly RangeDelete[],
  writes: readonly RowWrite[],
): void {
  for (const { table, id, below } of ranges)
    tables[table].deleteWhere(id, (key) => (key[1] as number) < below);
  for (const row of writes)
    if (row.op === "delete") tables[row.table].delete(row.key);
    else tables[row.table].set(row.key, row.value);
}

/** Every row of a session's tables but the change log's (what a snapshot of it moves). */
export function storedRows(tables: Record<Table, Rows>): ExportedRow[] {
  const rows: ExportedRow[] = [];
  for (const table of TABLES)
    if (table !== "changes") for (const [, row] of tables[table].scan()) rows.push({ table, ...row });
  return rows;
}
