/**
 * The commit workload shared by the Node and Chromium benchmarks: each commit appends one entry and edits
 * one small document. The floor writes the same rows the kernel writes, through a bare idb transaction.
 */
import type { IDBPDatabase } from "idb";
import { openDB } from "idb";
import { z } from "zod";
import {
  type CommitRecord,
  createRegistry,
  defineDocument,
  indexedDbStorage,
  openSession,
  type Session,
  sequentialIds,
} from "../src/index.ts";
import { documentRowsObsoleteBelow, type RowWrite, rowsOfCommit } from "../src/storage/rows.ts";

const progress = defineDocument({
  type: "progress",
  schema: z.object({ step: z.number().int(), label: z.string(), done: z.array(z.string()) }),
});
export const benchRegistry = createRegistry({ documents: [progress] });

/** One step of the workload through the Session. */
export function commitStep(session: Session, i: number) {
  return session.commit((draft) => {
    draft.appendEntry("main", { kind: "note", text: `step ${i} finished` });
    draft.setDocument("progress", "progress", { step: i, label: `step ${i}`, done: [`s${i % 5}`] });
  });
}

/** Opens a fresh session in its own database. */
export async function openBenchSession(database: string, durability: "strict" | "relaxed") {
  const storage = indexedDbStorage(database, { durability });
  const session = await openSession({ id: "bench", storage, registry: benchRegistry, ids: sequentialIds() });
  return { session, storage };
}

/**
 * The same rows as `template`, renumbered as the `count` commits after version `from`: every commit
 * writes new keys (entry seq, document version, change-log version), as a live session does.
 */
export function renumber(template: readonly CommitRecord[], from: number, count: number): CommitRecord[] {
  return Array.from({ length: count }, (_, i) => {
    const base = template[i % template.length] as CommitRecord;
    const version = from + i + 1;
    return {
      ...base,
      version,
      entries: base.entries.map((e) => ({ ...e, seq: version, version })),
      conversations: base.conversations.map((c) => ({ ...c, entryCount: version + 1 })),
      documents: base.documents.map((d) => ({ ...d, version })),
    };
  });
}

/**
 * The rows a floor transaction writes for one commit: every record's row and the whole commit in the change log,
 * as storage formats before 4 wrote them in one transaction. The kernel now writes the log first and the rows
 * later (fewer bytes); the floor keeps the old, fuller shape so ratios stay comparable across formats.
 */
export function floorRowsOf(commit: CommitRecord): RowWrite[] {
  return [...rowsOfCommit(commit), { table: "changes", key: [commit.version], value: commit }];
}

/**
 * A bare `idb` connection on the kernel's object stores that writes the floor rows (`floorRowsOf`) for
 * given commits (and deletes the document rows a baseline makes obsolete, as the kernel's store does), one
 * transaction per commit. `write` returns ms per transaction.
 */
export async function openRawWriter(database: string, durability: "strict" | "relaxed") {
  const db: IDBPDatabase = await openDB(database);
  const sessionId = "raw";
  const stores = [...db.objectStoreNames];
  let version = 0;
  return {
    async write(commits: readonly CommitRecord[]): Promise<number> {
      const rows = commits.map((commit) => ({
        writes: floorRowsOf(commit),
        obsolete: commit.documents.flatMap((change) => {
          const below = documentRowsObsoleteBelow(change);
          return below === undefined
            ? []
            : [IDBKeyRange.bound([sessionId, change.id, 0], [sessionId, change.id, below - 1])];
        }),
      }));
      const start = performance.now();
      for (const commitRows of rows) {
        const tx = db.transaction(stores, "readwrite", { durability });
        const meta = tx.objectStore("sessions");
        await meta.get(sessionId);
        const writes: Promise<unknown>[] = commitRows.writes.map((row) =>
          tx.objectStore(row.table).put(row.value, [sessionId, ...row.key]),
        );
        for (const range of commitRows.obsolete) writes.push(tx.objectStore("documentRows").delete(range));
        writes.push(meta.put({ id: sessionId, version: ++version }, sessionId));
        await Promise.all([...writes, tx.done]);
      }
      return (performance.now() - start) / rows.length;
    },
    close: () => db.close(),
  };
}

/** Runs raw transactions with exactly the rows the kernel writes for the same steps. Returns ms per transaction. */
export async function rawCommits(
  database: string,
  commits: readonly CommitRecord[],
  durability: "strict" | "relaxed",
): Promise<number> {
  const writer = await openRawWriter(database, durability);
  try {
    return await writer.write(commits);
  } finally {
    writer.close();
  }
}

/** Times `n` workload commits through the Session; returns ms per commit. */
export async function sessionCommits(session: Session, n: number, offset = 0): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) await commitStep(session, offset + i);
  return (performance.now() - start) / n;
}

/** Median of numbers. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * Compares the Session against the raw floor in one run, alternating rounds so machine noise hits both.
 * Returns ms per commit for each.
 */
export async function compareCommitCost(
  prefix: string,
  durability: "strict" | "relaxed",
  rounds: number,
  perRound: number,
): Promise<{ ours: number; floor: number }> {
  const { session, storage } = await openBenchSession(`${prefix}-ours`, durability);
  await sessionCommits(session, 50); // warm-up: JIT, connection, first baseline
  const { changes } = await session.readChanges(0, 50);
  // The raw floor writes into a database created by the kernel's own schema.
  const rawSetup = await openBenchSession(`${prefix}-raw`, durability);
  await rawSetup.session.close();
  await rawSetup.storage.close();
  await rawCommits(`${prefix}-raw`, renumber(changes, 0, 50), durability);
  const ours: number[] = [];
  const floor: number[] = [];
  // Collect garbage before each half-round (when run with --expose-gc) so neither side pays for the
  // other's allocations.
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
  for (let r = 0; r < rounds; r++) {
    const from = 50 + r * perRound;
    const raw = renumber(changes, from, perRound);
    gc();
    ours.push(await sessionCommits(session, perRound, from));
    gc();
    floor.push(await rawCommits(`${prefix}-raw`, raw, durability));
  }
  await session.close();
  await storage.close();
  return { ours: median(ours), floor: median(floor) };
}
