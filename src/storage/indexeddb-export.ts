/** A whole session out of, into and from IndexedDB, each in one transaction (see `session-export.ts`). */
import { DuplicateKeyError } from "../errors.ts";
import { materializedThrough } from "./group-plan.ts";
import { readRows, requested, type SessionRanges } from "./indexeddb-requests.ts";
import type { KeyPart } from "./rows.ts";
import { TABLES } from "./rows.ts";
import type { ExportedRow, RawSession, SessionImport } from "./storage.ts";

/** The object store of session rows. */
const SESSIONS = "sessions";

/** Every row of the session but its log's, and its log's tail, read in `tx` (over every store). */
export async function exportInTx(
  tx: IDBTransaction,
  keys: SessionRanges,
  sessionId: string,
): Promise<RawSession | undefined> {
  const meta: unknown = await requested(tx.objectStore(SESSIONS).get(sessionId));
  if (meta === undefined) return undefined;
  const after = keys.numbers(sessionId, [], materializedThrough(meta) + 1, Number.POSITIVE_INFINITY);
  const [log, ...tables] = await Promise.all([
    readRows(tx, "changes", after),
    ...TABLES.filter((table) => table !== "changes").map(async (table) => {
      const store = tx.objectStore(table);
      const range = keys.all(sessionId);
      const [stored, values] = await Promise.all([
        requested(store.getAllKeys(range)),
        requested(store.getAll(range)),
      ]);
      return values.map((value, i): ExportedRow => {
        const key = (stored[i] as KeyPart[]).slice(1);
        return { table: table as ExportedRow["table"], key, value };
      });
    }),
  ]);
  return { meta, rows: tables.flat(), log };
}

/**
 * Writes a session this database does not hold, in `tx` (over every store); refused when it holds it,
 * unless it is to `replace` it (its rows are deleted first, in `tx`).
 */
export async function importInTx(
  tx: IDBTransaction,
  keys: SessionRanges,
  sessionId: string,
  session: SessionImport,
): Promise<void> {
  const sessions = tx.objectStore(SESSIONS);
  if ((await requested(sessions.get(sessionId))) !== undefined) {
    if (!session.replace) throw new DuplicateKeyError(`sessions/${sessionId}`, 0);
    await deleteInTx(tx, keys, sessionId);
  }
  const changes = tx.objectStore("changes");
  await Promise.all([
    requested(sessions.add(session.meta, sessionId)),
    // As a commit stores its log row: its JSON text.
    ...session.log.map((log) => requested(changes.add(log.json, [sessionId, log.version]))),
  ]);
  // A chunk of requests at a time, in the same transaction: fake-indexeddb slows down with tens of
  // thousands queued at once (60,000 rows: 2.5 s queued at once, 0.55 s in chunks of 500).
  for (let at = 0; at < session.rows.length; at += IMPORT_CHUNK)
    await Promise.all(
      session.rows
        .slice(at, at + IMPORT_CHUNK)
        .map((row) => requested(tx.objectStore(row.table).add(row.value, [sessionId, ...row.key]))),
    );
}

/** Rows an import queues at a time (see `importInTx`). */
const IMPORT_CHUNK = 1_000;

/** Deletes the session's row and every row of it, in `tx` (over every store). */
export async function deleteInTx(tx: IDBTransaction, keys: SessionRanges, sessionId: string): Promise<void> {
  await Promise.all([
    requested(tx.objectStore(SESSIONS).delete(sessionId)),
    ...TABLES.map((table) => requested(tx.objectStore(table).delete(keys.all(sessionId)))),
  ]);
}
