/**
 * Reads through a log tail (see `tail.ts`): stored rows + the rows the tail's commits leave. Each commit's
 * rows are indexed once, by the first reader made over a tail that holds it, and kept with the commit: one
 * key is looked up commit by commit, newest first, and a table a read scans is merged once for that read. A read after each commit
 * so costs the same however long the tail is, where deriving every row of the tail for each new tail copied
 * them all.
 */
import type { CommitRecord } from "../records/schemas.ts";
import { encodeKey } from "./memory-rows.ts";
import type { KeyPart, RangeDelete, RowWrite, Table } from "./rows.ts";
import { rangeDeletesOfCommit, recordName, rowsOfCommit } from "./rows.ts";
import type { ParkedCursor, StoredRecord } from "./storage.ts";
import type { SessionRowReader } from "./working-set.ts";

/** What a read needs of a tail: its commits, oldest first. */
export interface TailCommits {
  readonly commits: readonly CommitRecord[];
}

/** One commit's rows by table and key (its last write of each), and its range deletes (applied after them). */
interface CommitRows {
  readonly writes: ReadonlyMap<Table, ReadonlyMap<string, RowWrite>>;
  readonly ranges: readonly RangeDelete[];
}

const indexed = new WeakMap<CommitRecord, CommitRows>();

function rowsOf(commit: CommitRecord): CommitRows {
  let rows = indexed.get(commit);
  if (!rows) {
    const writes = new Map<Table, Map<string, RowWrite>>();
    for (const row of rowsOfCommit(commit)) {
      let table = writes.get(row.table);
      if (!table) {
        table = new Map();
        writes.set(row.table, table);
      }
      table.set(encodeKey(row.key), row);
    }
    rows = { writes, ranges: rangeDeletesOfCommit(commit) };
    indexed.set(commit, rows);
  }
  return rows;
}

/** Whether a range delete removes the row of `table` at `key`. */
export const covers = (range: RangeDelete, table: Table, key: readonly KeyPart[]) =>
  range.table === table && range.id === key[0] && (key[1] as number) < range.below;

const hidden = (table: Table, key: readonly KeyPart[]): RowWrite => ({
  table,
  key,
  value: null,
  op: "delete",
});

/** The rows a tail's commits leave, for one read. */
class TailRows {
  /** Newest first. */
  private readonly layers: readonly CommitRows[];
  private readonly merged = new Map<Table, ReadonlyMap<string, RowWrite>>();

  constructor(commits: readonly CommitRecord[]) {
    this.layers = commits.map(rowsOf).reverse();
  }

  /**
   * A key's last write in the tail (a `delete` when a range delete hid it since), or undefined when the
   * tail leaves its stored row as it is.
   */
  write(table: Table, key: readonly KeyPart[]): RowWrite | undefined {
    const encoded = encodeKey(key);
    const merged = this.merged.get(table);
    if (merged) return merged.get(encoded) ?? (this.hides(table, key) ? hidden(table, key) : undefined);
    for (const layer of this.layers) {
      // A commit's range deletes come after its rows: they hide its own writes too.
      if (layer.ranges.some((range) => covers(range, table, key))) return hidden(table, key);
      const write = layer.writes.get(table)?.get(encoded);
      if (write) return write;
    }
    return undefined;
  }

  /** Each key of `table` the tail writes, as it last wrote it (hidden ones as deletes): merged once per read. */
  writes(table: Table): ReadonlyMap<string, RowWrite> {
    let merged = this.merged.get(table);
    if (!merged) {
      const found = new Map<string, RowWrite>();
      const ranges: RangeDelete[] = [];
      for (const layer of this.layers) {
        for (const range of layer.ranges) if (range.table === table) ranges.push(range);
        for (const [encoded, write] of layer.writes.get(table) ?? []) {
          if (found.has(encoded)) continue;
          const gone = ranges.some((range) => covers(range, table, write.key));
          found.set(encoded, gone ? hidden(table, write.key) : write);
        }
      }
      merged = found;
      this.merged.set(table, merged);
    }
    return merged;
  }

  /** Whether a range delete of the tail hides the stored row at `key`. */
  hides(table: Table, key: readonly KeyPart[]): boolean {
    if (table !== "documentRows" && table !== "children") return false;
    return this.layers.some((layer) => layer.ranges.some((range) => covers(range, table, key)));
  }
}

/**
 * A reader of stored rows as the tail leaves them: each key's last write in the tail wins over the stored row
 * (a delete hides it), a document's rows below its tail baseline are gone, and ranges and pages merge both.
 */
export function overlayReader(base: SessionRowReader, tail: TailCommits): SessionRowReader {
  if (tail.commits.length === 0) return base;
  const rows = new TailRows(tail.commits);
  /** Whether a stored row is replaced or hidden by the tail. */
  const shadowed = (table: Table, key: readonly KeyPart[]): boolean =>
    rows.writes(table).has(encodeKey(key)) || rows.hides(table, key);
  /** The tail's live rows of a table that pass `keep`. */
  const tailRows = (table: Table, keep: (key: readonly KeyPart[]) => boolean): Row[] => {
    const found: Row[] = [];
    for (const write of rows.writes(table).values())
      if (write.op !== "delete" && keep(write.key)) found.push({ key: write.key, value: write.value });
    return found;
  };
  /** How many more stored rows a limited read must ask for: each tail write may hide one. */
  const margin = (table: Table) => rows.writes(table).size;
  const merge = async (
    table: Table,
    stored: Promise<StoredRecord[]> | StoredRecord[],
    keep: (key: readonly KeyPart[]) => boolean,
    order: (a: readonly KeyPart[], b: readonly KeyPart[]) => number,
    limit = Number.POSITIVE_INFINITY,
  ): Promise<StoredRecord[]> => {
    const merged: Row[] = [];
    for (const record of await stored) {
      const key = keyOfRecord(table, record.key);
      if (!shadowed(table, key)) merged.push({ key, value: record.value });
    }
    merged.push(...tailRows(table, keep));
    merged.sort((a, b) => order(a.key, b.key));
    return merged.slice(0, limit).map((row) => ({ key: recordName(table, row.key), value: row.value }));
  };
  const ascending = (a: readonly KeyPart[], b: readonly KeyPart[]) => compareKeys(a, b);
  const descending = (a: readonly KeyPart[], b: readonly KeyPart[]) => compareKeys(b, a);
  return {
    all: (table) => merge(table, base.all(table), () => true, ascending),
    range: (table, id, from, to) =>
      merge(
        table,
        base.range(table, id, from, to),
        (key) => key[0] === id && (key[1] as number) >= from && (key[1] as number) <= to,
        ascending,
      ),
    get: async (table, key) => {
      const write = rows.write(table, key);
      // A key a range delete hid reads as a delete too.
      if (write)
        return write.op === "delete" ? undefined : { key: recordName(table, key), value: write.value };
      return base.get(table, key);
    },
    latest: (table, before, limit) =>
      merge(
        table,
        base.latest(table, before, limit + margin(table)),
        (key) => (key[0] as number) < before,
        descending,
        limit,
      ),
    parkedBefore: (cursor, limit) =>
      merge(
        "parked",
        base.parkedBefore(cursor, limit + margin("parked")),
        (key) => !cursor || isKeyBelow(key, cursor),
        descending,
        limit,
      ),
    earliest: (table, limit) =>
      merge(table, base.earliest(table, limit + margin(table)), () => true, ascending, limit),
    count: async (table) => {
      let count = await base.count(table);
      for (const write of rows.writes(table).values()) {
        const stored = (await base.get(table, write.key)) !== undefined;
        if (write.op === "delete" && stored) count--;
        else if (write.op !== "delete" && !stored) count++;
      }
      return count;
    },
  };
}

interface Row {
  readonly key: readonly KeyPart[];
  readonly value: unknown;
}

/** A stored record's key parts, from its name (`entries/main/3` → `["main", 3]`) and its table's layout. */
function keyOfRecord(table: Table, name: string): KeyPart[] {
  const rest = name.slice(table.length + 1);
  switch (table) {
    case "items":
    case "live":
    case "settled":
    case "parked":
    case "deadlines": {
      const slash = rest.indexOf("/");
      return [Number(rest.slice(0, slash)), rest.slice(slash + 1)];
    }
    case "entries":
    case "documentRows":
    case "children": {
      const slash = rest.lastIndexOf("/");
      return [rest.slice(0, slash), Number(rest.slice(slash + 1))];
    }
    case "changes":
      return [Number(rest)];
    default:
      return [rest];
  }
}

/** IndexedDB's key order: numbers before strings, strings by code unit, part by part. */
export function compareKeys(a: readonly KeyPart[], b: readonly KeyPart[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] as KeyPart;
    const y = b[i] as KeyPart;
    if (x === y) continue;
    if (typeof x !== typeof y) return typeof x === "number" ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/** Whether an item key `[version, id]` is below a page cursor. */
function isKeyBelow(key: readonly KeyPart[], cursor: ParkedCursor): boolean {
  return compareKeys(key, [cursor.version, cursor.id]) < 0;
}
