/**
 * A whole session, moved between stores (DESIGN §6): a copy so far behind its other host that the other
 * host's change log no longer holds the commits it lacks is rebuilt from the other host's rows instead.
 * The exporting store reads every row of the session but its change log's, with the log's tail, in one
 * consistent read; the rows are brought to the session's version here (the tail materialized, as a writer
 * would), and the head commit goes with them, so the copy's log starts at the head: a follower checks its
 * epoch, a reader of older versions is told they are gone (`oldestRetained`).
 */
import { z } from "zod";
import { randomIds } from "../clock.ts";
import { CorruptRecordError, InvalidArgumentError } from "../errors.ts";
import { sessionIdProblem } from "../records/json.ts";
import type { CommitRecord } from "../records/schemas.ts";
import { CommitRecordSchema, SessionMetaSchema, STORAGE_FORMAT } from "../records/schemas.ts";
import { describeIssues } from "../records/validate.ts";
import { materializedThrough, tailFromLog } from "./group-plan.ts";
import { WholeRecords } from "./log-codec.ts";
import { logRowsOfGroup } from "./log-rows.ts";
import { applyMaterialization, emptyTables, tablesReader } from "./memory-rows.ts";
import type { Table } from "./rows.ts";
import { KEY_LAYOUT, rawNumber, TABLES } from "./rows.ts";
import type { ExportedRow, Storage } from "./storage.ts";
import { upgradeRowsSync } from "./working-set.ts";

/** A session at one version, as one host hands it to another. */
export interface SessionSnapshot {
  readonly format: 1;
  /** The session row as the exporting store holds it (its version and owner epoch). */
  readonly meta: unknown;
  /** Every row but the change log's, each key in its state at the session's version. */
  readonly rows: readonly ExportedRow[];
  /** The commit at the session's version (null at version 0). */
  readonly head: CommitRecord | null;
}

const Key = z
  .array(z.union([z.string().max(4096), z.number().finite()]))
  .min(1)
  .max(4);
const ROW_TABLES = TABLES.filter((t) => t !== "changes") as [
  Exclude<Table, "changes">,
  ...Exclude<Table, "changes">[],
];

/** A snapshot as it arrives from another host: its frame checked here, its records when they are read. */
export const SessionSnapshotSchema = z.object({
  format: z.literal(1),
  meta: z
    .object({ version: z.number().int().nonnegative(), epoch: z.number().int().nonnegative() })
    .passthrough(),
  rows: z.array(z.object({ table: z.enum(ROW_TABLES), key: Key, value: z.unknown() })),
  head: z
    .object({ version: z.number().int().positive(), epoch: z.number().int().nonnegative() })
    .passthrough()
    .nullable(),
});

/** Stores that can hand a session over whole, and take one. */
type Exporting = Pick<Storage, "readChanges"> & Required<Pick<Storage, "exportRaw">>;
type Importing = Required<Pick<Storage, "importRaw">>;

/**
 * The session as one snapshot at its version, or undefined when the store does not hold it. Refused with
 * `InvalidArgumentError` by a store that cannot export.
 */
export async function exportSession(
  storage: Pick<Storage, "readChanges" | "exportRaw">,
  sessionId: string,
): Promise<SessionSnapshot | undefined> {
  if (!storage.exportRaw) throw new InvalidArgumentError("this store cannot export a session");
  // The head is read after the rows: a commit landing between may prune it (a log of one commit), and
  // then the session is read again.
  for (let attempt = 1; ; attempt++) {
    const snapshot = await exportOnce(storage as Exporting, sessionId);
    if (snapshot !== "head-pruned") return snapshot;
    if (attempt === 3)
      throw new CorruptRecordError(
        "changes",
        `session ${sessionId}: its head commit was pruned as it was read`,
      );
  }
}

async function exportOnce(
  storage: Exporting,
  sessionId: string,
): Promise<SessionSnapshot | undefined | "head-pruned"> {
  const raw = await storage.exportRaw(sessionId);
  if (raw === undefined) return undefined;
  const version = rawNumber(raw.meta, "version") ?? 0;
  const through = materializedThrough(raw.meta);
  const tail = tailFromLog(raw.meta, undefined, through, raw.log);
  const tables = emptyTables();
  for (const row of raw.rows) tables[row.table].set(row.key, row.value);
  const { ranges, rows: writes } = tail.materialization();
  applyMaterialization(tables, ranges, writes);
  // A session no writer opened since an older format: the index rows it lacks, as a writer's open adds them
  // (the copy is stored in the current format).
  for (const row of upgradeRowsSync(rawNumber(raw.meta, "format"), tablesReader(tables)) ?? [])
    tables[row.table].set(row.key, row.value);
  const rows: ExportedRow[] = [];
  for (const table of ROW_TABLES)
    for (const [, row] of tables[table].scan()) rows.push({ table, key: row.key, value: row.value });
  // Read whole (with the entries its log row names): a commit never changes, and the newest is never pruned.
  let head: CommitRecord | null = null;
  if (version > 0) {
    const { changes } = await storage.readChanges(sessionId, version - 1, 1);
    head = (changes[0]?.value as CommitRecord | undefined) ?? null;
    if (head?.version !== version) return "head-pruned";
  }
  return { format: 1, meta: raw.meta, rows, head };
}

/** A snapshot whose frame, session row and head commit were checked (`parseSnapshot`). */
export type CheckedSnapshot = SessionSnapshot & { readonly meta: { version: number; epoch: number } };

/** `error`'s issues as an `InvalidArgumentError`, their paths under `under` (a field of the snapshot). */
function malformed(what: string, error: z.ZodError, under?: string): InvalidArgumentError {
  const issues = describeIssues(error).map((i) => (under ? { ...i, path: `${under}.${i.path}` } : i));
  return new InvalidArgumentError(`the session snapshot's ${what} is malformed`, issues);
}

const isId = (part: unknown) => typeof part === "string";
/** A number part: a position or version (a whole number), or a deadline's time. */
const isNumber = (part: unknown) => typeof part === "number" && Number.isFinite(part);

/** Whether `key` is keyed as `table` keys rows (checked by hand: a snapshot may hold 500,000 rows). */
function isKeyOf(table: Exclude<Table, "changes">, key: readonly unknown[]): boolean {
  const layout = KEY_LAYOUT[table];
  if (layout === "id") return key.length === 1 && isId(key[0]);
  if (layout === "id,n") return key.length === 2 && isId(key[0]) && Number.isSafeInteger(key[1]);
  return key.length === 2 && isNumber(key[0]) && isId(key[1]);
}

/**
 * Each row keyed as its table keys rows, with a value, and no key twice: a row a store would file where no
 * read finds it, or that one store would take last and another refuse, is refused here, naming it.
 */
function checkRows(rows: readonly ExportedRow[]): void {
  const seen = new Map<string, number>();
  rows.forEach((row, i) => {
    const fail = (path: string, message: string) => {
      throw new InvalidArgumentError(
        `the session snapshot's rows are malformed: rows.${i}.${path} ${message}`,
        [{ path: `rows.${i}.${path}`, message }],
      );
    };
    if (!isKeyOf(row.table, row.key)) fail("key", `is not a key of table ${row.table}`);
    if (row.value === undefined) fail("value", "is missing");
    const id = `${row.table}\u0000${JSON.stringify(row.key)}`;
    const first = seen.get(id);
    if (first !== undefined) fail("key", `repeats the key of rows.${first}`);
    seen.set(id, i);
  });
}

/** A snapshot checked (its frame: the records are checked when read), or `InvalidArgumentError` naming the field. */
export function parseSnapshot(snapshot: unknown): CheckedSnapshot {
  const parsed = SessionSnapshotSchema.safeParse(snapshot);
  if (!parsed.success) throw malformed("frame", parsed.error);
  const checked = parsed.data as unknown as CheckedSnapshot;
  checkRows(checked.rows);
  if ((checked.head?.version ?? 0) !== checked.meta.version)
    throw new InvalidArgumentError(
      `the session snapshot's head commit is not at its version ${checked.meta.version}`,
      [{ path: "head.version", message: `expected ${checked.meta.version}` }],
    );
  const meta = SessionMetaSchema.safeParse(checked.meta);
  if (!meta.success) throw malformed("session row", meta.error, "meta");
  const head = checked.head === null ? undefined : CommitRecordSchema.safeParse(checked.head);
  if (head?.success === false) throw malformed("head commit", head.error, "head");
  return checked;
}

/**
 * Writes `snapshot` as session `sessionId` into a store that does not hold it yet, in one transaction: its
 * rows, the head commit as the change log's first row, and a session row at the snapshot's version under
 * `epoch` (default: the head commit's), fully materialized. Refused with `InvalidArgumentError` when the
 * snapshot is malformed or the store cannot import; with `DuplicateKeyError` when the session exists there.
 */
export async function importSession(
  storage: Pick<Storage, "importRaw">,
  sessionId: string,
  snapshot: unknown,
  epoch?: number,
  /** Replace the session the store holds, in the same transaction (a copy rebuilt from its other host). */
  replace = false,
): Promise<{ version: number; epoch: number }> {
  return importChecked(storage, sessionId, parseSnapshot(snapshot), epoch, replace);
}

/** {@link importSession} of a snapshot already checked (a caller that looked into it first). */
export async function importChecked(
  storage: Pick<Storage, "importRaw">,
  sessionId: string,
  snapshot: CheckedSnapshot,
  epoch?: number,
  replace = false,
): Promise<{ version: number; epoch: number }> {
  if (!storage.importRaw) throw new InvalidArgumentError("this store cannot import a session");
  const idProblem = sessionIdProblem(sessionId);
  if (idProblem !== undefined)
    throw new InvalidArgumentError(idProblem, [{ path: "sessionId", message: idProblem }]);
  const { meta, rows, head } = snapshot;
  const writer = epoch ?? head?.epoch ?? meta.epoch;
  const log = head ? logRowsOfGroup([head], 0, new WholeRecords()) : { rows: [], logEnd: 0 };
  const copied = {
    ...meta,
    id: sessionId,
    format: STORAGE_FORMAT,
    epoch: writer,
    logEnd: log.logEnd,
    materialized: meta.version,
    logFloor: meta.version,
    incarnation: randomIds.next("s"),
  };
  await (storage as Importing).importRaw(sessionId, { meta: copied, rows, log: log.rows, replace });
  return { version: meta.version, epoch: writer };
}
