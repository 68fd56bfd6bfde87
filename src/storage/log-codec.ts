/**
 * How commits are written in the change log (format 4): a task, Submission, conversation or signal that the
 * log already holds whole at an earlier version of the same block of {@link LOG_BLOCK} versions is written
 * as what changed since then (`{ "~": baseVersion, id, …changed fields, "~x": removed fields }`), and empty
 * lists are left out. A tool task logged whole when the model asked for it is logged again, when it ends,
 * as its new state only. A commit's entries are written in rows of their own with it (they never change)
 * and the log names them (`"~e": [conversationId, firstSeq, count, …]`). Readers get whole commits back
 * (`decodeCommit`, then `entriesNamed` for the entries); a delta never refers outside its block, and the
 * stores keep a block whole until every commit of it may go (see `change-log.ts`).
 */
import { CorruptRecordError } from "../errors.ts";
import { type Json, jsonEqual } from "../records/json.ts";
import type { CommitRecord } from "../records/schemas.ts";

/** Versions come in blocks of this many: a logged record refers back only within its block. */
export const LOG_BLOCK = 64;

/** The first version of the block holding `version`. */
export function blockStart(version: number): number {
  return Math.floor((version - 1) / LOG_BLOCK) * LOG_BLOCK + 1;
}

/** Whether a group holds the last version of a block (the writer then writes its tail into rows). */
export function endsBlock(commits: readonly { readonly version: number }[]): boolean {
  return commits.some((commit) => commit.version % LOG_BLOCK === 0);
}

/** The lists of a commit whose records may be logged as deltas, and the field naming each record. */
const KEYED = { tasks: "id", submissions: "id", conversations: "id", signals: "key" } as const;
export type KeyedList = keyof typeof KEYED;
/** The lists every commit has (left out of the log when empty, given back empty). */
const REQUIRED = ["conversations", "entries", "documents", "tasks", "submissions"] as const;
const OPTIONAL = ["signals", "droppedSignals", "removed", "parked", "unparked"] as const;

/** A record logged whole: where a later version of it may be logged as a delta. */
export interface LoggedWhole {
  readonly version: number;
  readonly record: Readonly<Record<string, unknown>>;
}

/** Finds the record `id` of `list` logged whole at an earlier version of `version`'s block, if any. */
export type WholeLookup = (list: KeyedList, id: string, version: number) => LoggedWhole | undefined;

const BASE = "~";
const DROPPED = "~x";
const ENTRIES = "~e";

/**
 * A commit as the log holds it: each keyed record whose id `whole` finds in the block as a delta against
 * that copy (the fields it changed, by reference: a draft keeps the objects it did not touch), empty lists
 * and a `false` deferred flag left out.
 */
export function encodeCommit(commit: CommitRecord, whole: WholeLookup): Record<string, unknown> {
  const source = commit as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = { version: commit.version, epoch: commit.epoch, at: commit.at };
  if (commit.deferred) out.deferred = true;
  if (commit.entries.length > 0) out[ENTRIES] = entryNames(commit);
  for (const list of [...REQUIRED, ...OPTIONAL]) {
    if (list === "entries") continue;
    const records = source[list] as Record<string, unknown>[] | undefined;
    if (records === undefined || (records.length === 0 && (REQUIRED as readonly string[]).includes(list)))
      continue;
    const keyed = (KEYED as Record<string, string>)[list];
    out[list] =
      keyed === undefined
        ? records
        : records.map((record) => {
            const base = whole(list as KeyedList, record[keyed] as string, commit.version);
            return base ? delta(base, record, keyed) : record;
          });
  }
  return out;
}

/** A commit's entries by name: each run of consecutive seqs of a conversation as `conversationId, first, count`. */
function entryNames(commit: CommitRecord): (string | number)[] {
  const names: (string | number)[] = [];
  for (const entry of commit.entries) {
    const at = names.length - 3;
    if (
      at >= 0 &&
      names[at] === entry.conversationId &&
      (names[at + 1] as number) + (names[at + 2] as number) === entry.seq
    )
      names[at + 2] = (names[at + 2] as number) + 1;
    else names.push(entry.conversationId, entry.seq, 1);
  }
  return names;
}

/**
 * The entries a decoded commit's log names (as `[conversationId, seq]`), for the reader to read from their
 * rows and put back with `withEntries`; none when the log held them itself (format 3).
 */
export function entriesNamed(decoded: unknown): [string, number][] {
  const names = (decoded as Record<string, unknown> | null)?.[ENTRIES];
  if (!Array.isArray(names)) return [];
  const out: [string, number][] = [];
  for (let i = 0; i + 2 < names.length; i += 3) {
    const [conversation, first, count] = [names[i], names[i + 1], names[i + 2]];
    if (typeof conversation !== "string" || typeof first !== "number" || typeof count !== "number") break;
    for (let seq = first; seq < first + count; seq++) out.push([conversation, seq]);
  }
  return out;
}

/** A decoded commit with the entries its log named, read from their rows. */
export function withEntries(decoded: unknown, entries: readonly unknown[]): unknown {
  const out: Record<string, unknown> = { ...(decoded as Record<string, unknown>), entries };
  delete out[ENTRIES];
  return out;
}

/**
 * What changed from `base` to `record`, with the version of `base` and the record's id. Fields are compared
 * as JSON: sealing a commit validates its records, which copies their JSON values, so a field nobody
 * touched is often a new object equal to the one logged.
 */
function delta(base: LoggedWhole, record: Record<string, unknown>, keyed: string): Record<string, unknown> {
  const out: Record<string, unknown> = { [BASE]: base.version, [keyed]: record[keyed] };
  for (const field in record) {
    const value = record[field];
    const was = base.record[field];
    if (value === was || value === undefined) continue;
    if (typeof value === "object" && value !== null && jsonEqual(value as Json, was as Json)) continue;
    out[field] = value;
  }
  // A field set to undefined is gone from the record as stored (JSON has no undefined).
  const dropped: string[] = [];
  for (const field in base.record) if (record[field] === undefined) dropped.push(field);
  if (dropped.length > 0) out[DROPPED] = dropped;
  return out;
}

/**
 * A whole commit from its logged form, or `undefined` when a delta refers to a record `whole` does not find
 * (the reader must read the log further back in the block: see `decodeChanges`). Anything that is not a
 * logged commit comes back as it is, for validation to report.
 */
export function decodeCommit(logged: unknown, whole: WholeLookup): unknown {
  if (typeof logged !== "object" || logged === null) return logged;
  const source = logged as Record<string, unknown>;
  // A commit logged before deltas (or by another writer of format 3) is whole already.
  const out: Record<string, unknown> = { ...source, deferred: source.deferred === true };
  delete out.logStart;
  for (const list of REQUIRED) if (out[list] === undefined) out[list] = [];
  const version = source.version as number;
  for (const list of Object.keys(KEYED) as KeyedList[]) {
    const records = out[list];
    if (!Array.isArray(records) || !records.some(isDelta)) continue;
    const keyed = KEYED[list];
    const decoded: unknown[] = [];
    for (const record of records) {
      if (!isDelta(record)) {
        decoded.push(record);
        continue;
      }
      const base = whole(list, record[keyed] as string, record[BASE] as number);
      if (!base || base.version !== record[BASE] || base.version >= version) return undefined;
      const full: Record<string, unknown> = { ...base.record };
      for (const field in record) if (field !== BASE && field !== DROPPED) full[field] = record[field];
      for (const field of (record[DROPPED] as string[] | undefined) ?? []) delete full[field];
      decoded.push(full);
    }
    out[list] = decoded;
  }
  return out;
}

/** Why a logged commit could not be rebuilt: a delta whose record the log no longer holds whole. */
export function missingBase(version: number): CorruptRecordError {
  return new CorruptRecordError(
    `changes/${version}`,
    "it is logged as changes to records the change log does not hold whole (the session cannot be rebuilt past it)",
  );
}

/**
 * The records of `commit` that its logged form holds as changes to an earlier copy, as the rows they will be
 * written to whole (each keyed list is the table of the same name, keyed by the record's id or key).
 */
export function* loggedAsChanges(
  commit: CommitRecord,
  logged: Record<string, unknown>,
): Generator<{ table: KeyedList; key: [string]; value: Record<string, unknown> }> {
  for (const [list, keyed] of Object.entries(KEYED) as [KeyedList, string][]) {
    const forms = logged[list];
    if (!Array.isArray(forms)) continue;
    const records = (commit as unknown as Record<string, Record<string, unknown>[] | undefined>)[list] ?? [];
    for (const [i, form] of forms.entries()) {
      const record = records[i];
      if (record && isDelta(form)) yield { table: list, key: [record[keyed] as string], value: record };
    }
  }
}

function isDelta(record: unknown): record is Record<string, unknown> {
  return typeof record === "object" && record !== null && BASE in record;
}

/**
 * The records logged whole so far (the latest of each id, per list), which later commits of the same block
 * are logged as changes to: a chain of small maps, one per group, so a writer's tail never copies what it
 * already knew. Writer and reader keep it the same way, from what the log holds.
 */
export class WholeRecords {
  private readonly own = new Map<string, LoggedWhole>();
  /** Every record logged whole, by version too: a delta names the version it changes. */
  private readonly exact = new Map<string, LoggedWhole>();
  /**
   * Every key any link of the chain noted (those of groups the store refused too): a record not among
   * them is not looked for link by link. Most records a commit logs were not logged in its tail (a wait
   * signalled long after it began), and each would otherwise be looked up in every link.
   */
  private readonly noted: Set<string>;

  constructor(private readonly before?: WholeRecords) {
    this.noted = before?.noted ?? new Set();
  }

  /** The latest record logged whole for `id`, if it was at or after `from`. */
  find(list: KeyedList, id: string, from: number): LoggedWhole | undefined {
    const key = `${list}\u0000${id}`;
    if (!this.noted.has(key)) return undefined;
    for (let at: WholeRecords | undefined = this; at; at = at.before) {
      const found = at.own.get(key);
      if (found) return found.version >= from ? found : undefined;
    }
    return undefined;
  }

  /** Notes the records of `commit` that `logged` (its form in the log) holds whole. */
  add(commit: CommitRecord, logged: unknown): void {
    const lists = (typeof logged === "object" && logged !== null ? logged : {}) as Record<string, unknown>;
    for (const list of Object.keys(KEYED) as KeyedList[]) {
      const records = (commit as unknown as Record<string, unknown>)[list];
      const forms = lists[list];
      if (!Array.isArray(records) || !Array.isArray(forms)) continue;
      records.forEach((record: Record<string, unknown>, i) => {
        if (isDelta(forms[i])) return;
        const key = `${list}\u0000${record[KEYED[list]] as string}`;
        const whole = { version: commit.version, record };
        this.own.set(key, whole);
        this.noted.add(key);
        this.exact.set(`${key}\u0000${commit.version}`, whole);
      });
    }
  }

  /** For `encodeCommit`: the latest record logged whole, within the block of the version being logged. */
  lookup(): WholeLookup {
    return (list, id, version) => this.find(list, id, blockStart(version));
  }

  /** For `decodeCommit`: the record logged whole at exactly the version a delta names. */
  byVersion(): WholeLookup {
    return (list, id, version) => {
      const key = `${list}\u0000${id}\u0000${version}`;
      for (let at: WholeRecords | undefined = this; at; at = at.before) {
        const found = at.exact.get(key);
        if (found) return found;
      }
      return undefined;
    };
  }
}
