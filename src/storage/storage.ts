/**
 * The storage contract. A store keeps sessions as rows and writes one commit batch atomically; it knows
 * nothing of tasks or agents. Records come back raw (`unknown`): the kernel validates them on load, so a
 * corrupt row is reported by name instead of crashing the store.
 */
import { InvalidArgumentError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { KeyPart, Table } from "./rows.ts";

/** A row as it was read, with a readable name such as `tasks/t_1` used in errors and views. */
export interface StoredRecord {
  readonly key: string;
  readonly value: unknown;
}

/** A working-set item as read from the `items` index: the version that created it, its id and value. */
export interface StoredItem {
  readonly version: number;
  readonly id: string;
  readonly value: unknown;
}

/** Where a page of parked waits stops: the key of the last item listed (the next page lists those below it). */
export interface ParkedCursor {
  readonly version: number;
  readonly id: string;
}

/** A document head with the rows needed to rebuild its current value (its baseline and later deltas). */
export interface StoredDocument {
  readonly head: StoredRecord;
  readonly rows: readonly StoredRecord[];
}

/** A session's working set, read in one consistent snapshot (DESIGN §9). */
export interface StoredSession {
  readonly meta: StoredRecord;
  readonly conversations: readonly StoredRecord[];
  /** The last `entryTail` entries of each conversation. */
  readonly entries: readonly StoredRecord[];
  readonly documents: readonly StoredDocument[];
  /** The tasks of the working set's items: every task of each unfinished or retained tree. */
  readonly tasks: readonly StoredRecord[];
  readonly submissions: readonly StoredRecord[];
  /** The working set's items (unfinished ones and the latest settled); absent for a format-1 session. */
  readonly items?: readonly StoredItem[];
  /** Signals that arrived before any wait took them (the `earlySignals` index); absent for format 1. */
  readonly signals?: readonly StoredRecord[];
  /** The parked waits, which stay in storage on open: how many, and the earliest deadline among them. */
  readonly parked?: { readonly count: number; readonly due?: number };
}

/** One stored row of a session, in the layout every store shares (`rows.ts`): what a snapshot moves. */
export interface ExportedRow {
  readonly table: Exclude<Table, "changes">;
  readonly key: readonly KeyPart[];
  readonly value: unknown;
}

/** What a store reads for an export, in one consistent read (see `session-export.ts`). */
export interface RawSession {
  readonly meta: unknown;
  /** Every row of the session but the change log's, as stored. */
  readonly rows: readonly ExportedRow[];
  /** The change-log rows after the version the rows are materialized through (the log's tail), in order. */
  readonly log: readonly StoredRecord[];
}

/** What a store writes for an import, in one transaction: a session it does not hold yet. */
export interface SessionImport {
  readonly meta: unknown;
  readonly rows: readonly ExportedRow[];
  /** The change log: the head commit's row (`json` is its value's text). */
  readonly log: readonly { readonly version: number; readonly value: unknown; readonly json: string }[];
  /** Replace the session this store holds under the id, in the same transaction (a copy rebuilt). */
  readonly replace?: boolean;
}

/** How to open a session in a store. */
export interface OpenRequest {
  /** `write` takes ownership: creates the session if missing and bumps its owner epoch, atomically. */
  readonly mode: "write" | "read";
  /** Time to stamp on a newly created session row. */
  readonly at: number;
  /** How many of each conversation's latest entries to load. */
  readonly entryTail: number;
  /** How many of the latest finished items (Submissions, root task trees) to load besides unfinished ones. */
  readonly settled: number;
  /**
   * `write` only: take ownership at exactly this epoch instead of the stored one + 1 (an epoch granted by
   * another host of the same session, see `durable-agent/replication`). Refused with `StaleOwnerError` when
   * the stored epoch is already at or past it; a new session starts at it.
   */
  readonly epoch?: number;
}

/** The condition every commit batch is checked against, inside the same transaction that writes it. */
export interface CommitGuard {
  readonly sessionId: string;
  /** The writer's owner epoch; the stored one must be equal. */
  readonly epoch: number;
  /** The session version the batch was built on; the stored one must be equal. */
  readonly expectedVersion: number;
  /**
   * The incarnation of the session the writer opened (`SessionMeta.incarnation`), when it has one: the
   * stored one must be equal — a writer of a session deleted since never writes into one created again.
   */
  readonly incarnation?: string;
  /**
   * A replica applying commits another host wrote (they carry the writer's epochs): the stored epoch must be
   * at most `epoch` — a replica never takes commits from an owner older than one it has seen — and becomes
   * `epoch` in the same transaction.
   */
  readonly replica?: boolean;
  /**
   * Change-log rows with a higher version must stay, whatever the retention bounds say: a linked session's
   * commits its other host has not acknowledged yet (they are pushed from the change log).
   */
  readonly keepChangesAfter?: number;
}

/** A slice of the change log. */
export interface StoredChanges {
  /** Commit records after the requested version, oldest first. */
  readonly changes: readonly StoredRecord[];
  /** The lowest version still retained (the requested range is complete only if it starts at or after it). */
  readonly oldestRetained: number;
  /**
   * Which creation of the session these are of (`SessionMeta.incarnation`): a reader that opened another
   * one is reading a session replaced since (a copy rebuilt from its other host), whose versions are not
   * the ones it holds.
   */
  readonly incarnation?: string;
}

/**
 * A session store. Implementations: {@link MemoryStorage}, {@link IndexedDbStorage}, and the Durable Object
 * SQLite store in `durable-agent/edge`. One contract test suite runs against all of them.
 */
export interface Storage {
  /** Reads a session (taking ownership in `write` mode). `undefined` when reading a session that does not exist. */
  open(sessionId: string, request: OpenRequest): Promise<StoredSession | undefined>;
  /**
   * Writes the commits, in order, in one atomic transaction, if the stored epoch and version still match
   * `guard`; otherwise throws `StaleOwnerError` and writes nothing. Failures surface as `StorageError`; a
   * store with a row size limit refuses a commit with a larger row with `RecordTooLargeError`, before
   * writing anything. A document baseline deletes that document's earlier rows in the same transaction.
   */
  commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void>;
  /**
   * Writes the rows of the commits that are still in the change log only (format 4 writes a commit's records
   * into their own rows later, many commits at once), if the stored epoch and version match `guard`. A
   * writer does it when it closes the session. Optional: a store without it keeps every commit's rows.
   */
  checkpoint?(guard: CommitGuard): Promise<void>;
  /** Entries `fromSeq` ≤ seq < `toSeq` of one conversation, in order. */
  readEntries(
    sessionId: string,
    conversationId: string,
    fromSeq: number,
    toSeq: number,
  ): Promise<StoredRecord[]>;
  /** Up to `limit` commit records with version > `afterVersion`, oldest first. */
  readChanges(sessionId: string, afterVersion: number, limit: number): Promise<StoredChanges>;
  /**
   * Document rows (baselines and deltas) of one document with `fromVersion` ≤ version ≤ `toVersion`. Rows
   * before a document's latest baseline are deleted when that baseline is written (its history is in the
   * change log), so a document's rows stay about the size of the document.
   */
  readDocumentRows(
    sessionId: string,
    documentId: string,
    fromVersion: number,
    toVersion: number,
  ): Promise<StoredRecord[]>;
  /** One Submission by id, whether or not it is in the working set. */
  readSubmission(sessionId: string, submissionId: string): Promise<StoredRecord | undefined>;
  /** The Submission accepted for a client's `requestId`, if any. */
  readRequest(sessionId: string, requestId: string): Promise<StoredRecord | undefined>;
  /** One task by id. */
  readTask(sessionId: string, taskId: string): Promise<StoredRecord | undefined>;
  /**
   * Signals by key, in one read (a signal is stored once per key and kept): each key's row in the keys'
   * order, undefined where none is stored.
   */
  readSignals(sessionId: string, keys: readonly string[]): Promise<(StoredRecord | undefined)[]>;
  /**
   * The task tree of the parked wait on each signal key (DESIGN §9), in one read: in the keys' order, empty
   * where no parked wait has the key.
   */
  readWaiting(sessionId: string, keys: readonly string[]): Promise<StoredRecord[][]>;
  /**
   * Up to `limit` parked waits keyed below `before` (the newest when undefined), newest first: items of their
   * root tasks, keyed by the version that created them and their id.
   */
  readParked(sessionId: string, before: ParkedCursor | undefined, limit: number): Promise<StoredItem[]>;
  /** Up to `limit` deadlines of parked waits, earliest first, as `deadlines/<at>/<rootId>` rows. */
  readDeadlines(sessionId: string, limit: number): Promise<StoredRecord[]>;
  /** Every task of the tree under `rootId` (the root first, then level by level). */
  readTaskTree(sessionId: string, rootId: string): Promise<StoredRecord[]>;
  /** Up to `limit` items created before version `before`, newest first, with their Submissions. */
  readItems(
    sessionId: string,
    before: number,
    limit: number,
  ): Promise<{ items: StoredItem[]; submissions: StoredRecord[] }>;
  /**
   * Up to `limit` finished items, oldest first, and how many finished items the session stores: what a
   * retention policy may remove (`session.collect()`).
   */
  readSettled(sessionId: string, limit: number): Promise<{ items: StoredItem[]; count: number }>;
  /**
   * Removes one session and every row of it, atomically (other sessions stay). Optional: a linked browser
   * session uses it to discard a copy whose unsent commits its edge host has written past.
   */
  deleteSession?(sessionId: string): Promise<void>;
  /**
   * Every row of a session but its change log's, with the log's tail, in one consistent read; undefined
   * when the store does not hold the session. Optional: see `exportSession` (a copy too far behind its
   * other host to catch up from the change log is rebuilt from a snapshot).
   */
  exportRaw?(sessionId: string): Promise<RawSession | undefined>;
  /**
   * Writes a session this store does not hold from a snapshot's rows (see `importSession`), in one
   * transaction; refused with `DuplicateKeyError` when the session exists, nothing written — unless it is
   * to `replace` it: then its every row goes in the same transaction.
   */
  importRaw?(sessionId: string, session: SessionImport): Promise<void>;
  /** Releases connections. The store may be opened again by creating a new instance. */
  close(): Promise<void>;
}

/** Options every store accepts. */
export interface StorageOptions {
  /**
   * How many commit records the change log keeps (subscriptions and devtools read it). Older ones are
   * pruned in the commit that crosses each 256-version boundary. Default 10 000.
   */
  readonly retainChanges?: number;
  /**
   * How many characters of JSON the change log keeps at most (a bound by bytes besides the count: a large
   * document's baselines or big tool outputs must not fill storage). Pruned at the same boundaries; the
   * newest commit always stays. Default 32 MiB.
   */
  readonly retainChangeBytes?: number;
  /**
   * How many commits a writer's records may stay in the change log only before it writes their rows (each
   * key once, in its latest state: see `tail.ts`); also written whenever the log passes 256 KiB of such
   * commits, at each pruning boundary, and when the writer closes the session. More means fewer rows
   * written, and more log to read for a reader that opens meanwhile. Default 64.
   */
  readonly tailCommits?: number;
}

/**
 * Refuses bounds that would make a store lose what it must keep: a log of no commits (its newest commit is
 * what copies check their head against), a negative or fractional count, a bound that is not a number.
 */
export function checkStorageOptions(options: StorageOptions): void {
  checkCounts(options, ["retainChanges", "retainChangeBytes", "tailCommits"]);
}

/** Refuses any of `names` set in `options` to anything but a whole number of at least 1, naming it. */
export function checkCounts<T extends object>(options: T, names: readonly (keyof T & string)[]): void {
  for (const name of names) {
    const value: unknown = options[name];
    if (value !== undefined && !(typeof value === "number" && Number.isInteger(value) && value >= 1))
      throw new InvalidArgumentError(`${name} must be a whole number of at least 1, not ${String(value)}`, [
        { path: name, message: "at least 1" },
      ]);
  }
}

export const DEFAULT_RETAIN_CHANGES = 10_000;
export const DEFAULT_RETAIN_CHANGE_BYTES = 32 * 1024 * 1024;
