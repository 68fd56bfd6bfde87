/**
 * The tail of a session's change log: commits whose records are in the log only, not yet in their own rows
 * (format 4). A commit writes its group's log row and nothing else of its records; every so often the
 * writer *materializes* the tail — the rows those commits leave, each key once (a tool task created and
 * finished in the window is written once, in its final state) — in the transaction of a later commit. Reads
 * see the tail through `overlayReader` (`tail-overlay.ts`), so what a reader gets is always stored rows + log
 * tail: the state at the session's version. A new writer materializes the tail it finds when it opens the
 * session.
 */
import type { CommitRecord, SessionMeta } from "../records/schemas.ts";
import { childRuns } from "./child-runs.ts";
import { WholeRecords } from "./log-codec.ts";
import { encodeKey } from "./memory-rows.ts";
import type { KeyPart, RangeDelete, RowWrite, Table } from "./rows.ts";
import { rangeDeletesOfCommit, rowsOfCommit } from "./rows.ts";
import { incarnationOf } from "./session-row.ts";
import { covers } from "./tail-overlay.ts";

/**
 * A writer materializes its tail once it holds this many commits (the default of `tailCommits`)… */
export const DEFAULT_TAIL_COMMITS = 64;
/** …or this many characters of log rows, whichever comes first (and at every log pruning boundary). */
export const TAIL_CHARS = 256 * 1024;

/** The last write of one key in the tail. */
interface LastWrite {
  readonly key: readonly KeyPart[];
  readonly value: unknown;
  readonly op: "put" | "create" | "delete";
  /** The key did not exist before the tail (so a delete of it needs no write). */
  readonly fresh: boolean;
}

/** What materializing a tail writes: ranges of rows to delete first, then each key's last write. */
export interface Materialization {
  readonly ranges: readonly RangeDelete[];
  readonly rows: readonly RowWrite[];
}

/**
 * The commits after `through` (the version materialized so far) that a store handle knows of for one session,
 * and the rows they leave. Immutable: a commit makes a new tail ({@link Tail.with}), adopted by the handle
 * only once its transaction succeeded.
 */
export class Tail {
  constructor(
    /** Every commit up to this version has its rows written. */
    readonly through: number,
    readonly commits: readonly CommitRecord[] = [],
    /** Characters of log rows the tail's commits took. */
    readonly chars = 0,
    /** The records the tail's commits logged whole, which later ones are logged as changes to (`log-codec.ts`). */
    readonly wholes: WholeRecords = new WholeRecords(),
  ) {}

  /** The version of the last commit the tail knows (its `through` when empty). */
  get version(): number {
    return this.commits.at(-1)?.version ?? this.through;
  }

  get isEmpty(): boolean {
    return this.commits.length === 0;
  }

  /** The tail with a group's commits added (their log rows took `chars`, and logged whole `wholes`). */
  with(commits: readonly CommitRecord[], chars: number, wholes: WholeRecords): Tail {
    return new Tail(this.through, [...this.commits, ...commits], this.chars + chars, wholes);
  }

  /** An empty tail: everything through `version` is materialized. */
  static materialized(version: number): Tail {
    return new Tail(version);
  }

  /**
   * Whether a writer should materialize now, past `commits` commits (or when its group crosses a log
   * pruning boundary: see `planGroup`).
   */
  isDue(commits: number): boolean {
    return this.commits.length >= commits || this.chars >= TAIL_CHARS;
  }

  /**
   * What materializing the tail writes: creates were written with their commit and are left out, and the
   * new child links of each parent become one row per run of them.
   */
  materialization(): Materialization {
    const { last, below } = this.rows();
    const rows: RowWrite[] = [];
    const links: { parentId: string; index: number; id: string }[] = [];
    for (const [table, writes] of last) {
      for (const write of writes.values()) {
        if (write.op === "create" || (write.op === "delete" && write.fresh)) continue;
        if (table === "children" && write.op === "put") {
          const [parentId, index] = write.key as [string, number];
          links.push({ parentId, index, id: write.value as string });
          continue;
        }
        rows.push({
          table,
          key: write.key,
          value: write.value,
          ...(write.op === "delete" && { op: "delete" }),
        });
      }
    }
    rows.push(...childRuns(links));
    return { ranges: [...below.values()], rows };
  }

  /**
   * The rows the tail writes, by table and key (each key's last write), and its range deletes by table and
   * id: derived from its commits when it is materialized (reads look keys up commit by commit instead: see
   * `tail-overlay.ts`).
   */
  private rows(): {
    last: ReadonlyMap<Table, ReadonlyMap<string, LastWrite>>;
    below: ReadonlyMap<string, RangeDelete>;
  } {
    const last = new Map<Table, Map<string, LastWrite>>();
    const below = new Map<string, RangeDelete>();
    for (const commit of this.commits) absorb(commit, last, below);
    return { last, below };
  }
}

/** A commit's rows and range deletes, added to a tail's last writes. */
function absorb(
  commit: CommitRecord,
  last: Map<Table, Map<string, LastWrite>>,
  below: Map<string, RangeDelete>,
): void {
  for (const row of rowsOfCommit(commit)) {
    let writes = last.get(row.table);
    if (!writes) {
      writes = new Map();
      last.set(row.table, writes);
    }
    const encoded = encodeKey(row.key);
    const before = writes.get(encoded);
    writes.set(encoded, {
      key: row.key,
      value: row.value,
      op: row.op ?? "put",
      fresh: before ? before.fresh : row.op === "create" || row.fresh === true,
    });
  }
  // A baseline (or a deletion) makes a document's earlier rows go, a removed task its child links: those
  // of this tail included.
  for (const range of rangeDeletesOfCommit(commit)) {
    const name = rangeName(range.table, range.id);
    below.set(name, { ...range, below: Math.max(below.get(name)?.below ?? 0, range.below) });
    const rows = last.get(range.table);
    if (!rows) continue;
    for (const [encoded, write] of rows) {
      if (covers(range, range.table, write.key)) {
        if (write.fresh) rows.delete(encoded);
        else rows.set(encoded, { ...write, value: null, op: "delete" });
      }
    }
  }
}

/**
 * What a store handle knows of each session it wrote or read, kept between transactions: its tail (so a
 * writer never reads its own tail back from the log) and the session row it last wrote (so its next commit
 * can queue every write before the row is read back: see the IndexedDB store).
 */
export class TailCache {
  /** Each session's tail, with the incarnation of the session it is of. */
  private readonly tails = new Map<
    string,
    { readonly tail: Tail; readonly incarnation: string | undefined }
  >();
  private readonly rows = new Map<string, SessionMeta>();

  /**
   * The cached tail of the session `meta` (its stored row) describes: none when the cached one is of another
   * incarnation (the session was deleted and created again, by this handle or another).
   */
  get(sessionId: string, meta: unknown): Tail | undefined {
    const cached = this.tails.get(sessionId);
    return cached && cached.incarnation === incarnationOf(meta) ? cached.tail : undefined;
  }

  /**
   * The cached tail, unchecked: only to plan before a transaction that reads the session row back and
   * compares it with {@link writtenRow} (`isSameRow`, which compares the incarnation too).
   */
  guess(sessionId: string): Tail | undefined {
    return this.tails.get(sessionId)?.tail;
  }

  /** The session row this handle wrote last, if its tail is still the one cached with it. */
  writtenRow(sessionId: string): SessionMeta | undefined {
    return this.rows.get(sessionId);
  }

  /**
   * Keeps a session's tail, read or written with the session row `meta` (`written`: this handle just wrote
   * that row), unless a newer tail of the same log is known already (transactions may end out of order).
   */
  remember(sessionId: string, tail: Tail, meta: unknown, written = false): void {
    const cached = this.get(sessionId, meta);
    if (cached && cached.through === tail.through && cached.version >= tail.version && !written) return;
    if (cached && cached.through === tail.through && cached.version > tail.version) return;
    this.tails.set(sessionId, { tail, incarnation: incarnationOf(meta) });
    if (written) this.rows.set(sessionId, meta as SessionMeta);
    else this.rows.delete(sessionId);
  }

  /** Forgets one session (it was deleted, or a transaction found its row not as this handle left it), or every one. */
  forget(sessionId?: string): void {
    if (sessionId === undefined) {
      this.tails.clear();
      this.rows.clear();
    } else {
      this.tails.delete(sessionId);
      this.rows.delete(sessionId);
    }
  }
}

/** A range delete's name in a tail: its table and id. */
const rangeName = (table: Table, id: string) => `${table}\u0000${id}`;
