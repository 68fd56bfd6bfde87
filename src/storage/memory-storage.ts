/**
 * An in-memory store: the reference implementation of the storage contract, and the "disk" that crash
 * simulations keep while they throw kernels away. Values are structured-cloned in and out, so nothing a
 * caller holds aliases what is stored.
 */
import { SessionNotFoundError, StorageError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { KeyPart, RowWrite, Table } from "./rows.ts";
import {
  checkGuard,
  checkRowSize,
  documentRowsObsoleteBelow,
  nextWriterMeta,
  pruneChangesThrough,
  rawNumber,
  readStoredSession,
  recordName,
  rowsOfCommit,
} from "./rows.ts";
import type {
  CommitGuard,
  OpenRequest,
  Storage,
  StorageOptions,
  StoredChanges,
  StoredRecord,
  StoredSession,
} from "./storage.ts";
import { DEFAULT_RETAIN_CHANGES } from "./storage.ts";

interface Row {
  readonly key: readonly KeyPart[];
  readonly value: unknown;
}

/**
 * One table's rows by encoded key, also grouped by their first key part (conversation, document, …), so a
 * range read of one id touches only that id's rows, not the whole table.
 */
class Rows {
  private readonly rows = new Map<string, Row>();
  private readonly groups = new Map<KeyPart, Map<string, Row>>();

  set(key: readonly KeyPart[], value: unknown): void {
    const encoded = encode(key);
    const row = { key, value };
    this.rows.set(encoded, row);
    const first = key[0] as KeyPart;
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
}

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

const encode = (key: readonly KeyPart[]): string =>
  key
    .map((part) => (typeof part === "number" ? part.toString(36).padStart(12, "0") : `s${part}`))
    .join("\u0000");

/** The in-memory store. Create one with {@link memoryStorage}. */
export class MemoryStorage implements Storage {
  private readonly sessions = new Map<string, SessionRows>();
  private readonly retain: number;
  private closed = false;

  constructor(private readonly options: MemoryStorageOptions = {}) {
    this.retain = options.retainChanges ?? DEFAULT_RETAIN_CHANGES;
  }

  async open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined> {
    this.assertOpen();
    let rows = this.sessions.get(sessionId);
    if (request.mode === "write") {
      if (!rows) {
        rows = { meta: nextWriterMeta(undefined, sessionId, request.at), tables: emptyTables() };
        this.sessions.set(sessionId, rows);
      } else rows.meta = nextWriterMeta(rows.meta, sessionId, request.at);
    }
    if (!rows) return undefined;
    return structuredClone(await this.snapshot(sessionId, rows, request.entryTail));
  }

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    this.assertOpen();
    const rows = this.sessions.get(guard.sessionId);
    const meta = checkGuard(rows?.meta, guard);
    if (!rows) return;
    // Stage everything first: a fault while staging leaves the stored rows untouched, like an aborted
    // transaction would.
    const staged: RowWrite[] = [];
    const prunes: number[] = [];
    const obsolete: [string, number][] = [];
    for (const commit of commits) {
      for (const row of rowsOfCommit(commit)) {
        this.options.onWrite?.(row, staged.length);
        const limit = this.options.maxRowBytes;
        if (limit !== undefined) checkRowSize(row, JSON.stringify(row.value), limit, commit.version);
        staged.push({ ...row, value: structuredClone(row.value) });
      }
      const through = pruneChangesThrough(commit.version, this.retain);
      if (through !== undefined) prunes.push(through);
      for (const change of commit.documents) {
        const below = documentRowsObsoleteBelow(change);
        if (below !== undefined) obsolete.push([change.id, below]);
      }
    }
    const last = commits.at(-1);
    if (!last) return;
    for (const row of staged) rows.tables[row.table].set(row.key, row.value);
    for (const through of prunes)
      rows.tables.changes.deleteWhere(undefined, (key) => (key[0] as number) <= through);
    // Later baselines of a document in the group have higher versions, so deleting after all the writes
    // leaves what deleting in order would.
    for (const [id, below] of obsolete)
      rows.tables.documentRows.deleteWhere(id, (key) => (key[1] as number) < below);
    rows.meta = { ...meta, version: last.version, updatedAt: last.at };
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

  async close(): Promise<void> {
    this.closed = true;
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

  /** A new handle on the same stored data, as a restarted process would get. Closing one does not close the other. */
  reopen(options: MemoryStorageOptions = this.options): MemoryStorage {
    const next = new MemoryStorage(options);
    (next as unknown as { sessions: Map<string, SessionRows> }).sessions = this.sessions;
    return next;
  }

  private snapshot(sessionId: string, rows: SessionRows, entryTail: number): Promise<StoredSession> {
    return readStoredSession(sessionId, rows.meta, entryTail, {
      all: (table) => sortedRange(rows.tables[table], table, undefined, -Infinity, Number.POSITIVE_INFINITY),
      range: (table, id, from, to) => sortedRange(rows.tables[table], table, id, from, to),
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new StorageError("storage-closed", "memory storage is closed");
  }
}

function emptyTables(): Record<Table, Rows> {
  return {
    conversations: new Rows(),
    entries: new Rows(),
    documents: new Rows(),
    documentRows: new Rows(),
    tasks: new Rows(),
    submissions: new Rows(),
    changes: new Rows(),
  };
}

/**
 * Rows of a table (of one id, when given) whose numeric key part lies in [from, to], sorted by key. The
 * numeric part is the id's sequence number (entry seq, document version), or the key itself (change log).
 */
function sortedRange(
  rows: Rows,
  table: Table,
  id: KeyPart | undefined,
  from: number,
  to: number,
): StoredRecord[] {
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

/** Creates an in-memory store. */
export function memoryStorage(options?: MemoryStorageOptions): MemoryStorage {
  return new MemoryStorage(options);
}
