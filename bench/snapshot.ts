/**
 * Moving a long-lived session to a new copy (a tab opening a session its edge has run for months):
 * - `session/snapshot-vs-replay-10000/fake-indexeddb`: a new copy in IndexedDB of a session of 10,000
 *   settled Submissions brought to its head from the other host's snapshot (export, through JSON, import)
 *   vs by replaying its whole change log as a replica, as a copy does while the log still holds it;
 * - `session/snapshot-import-vs-raw-10000/fake-indexeddb`: the import alone vs one raw IndexedDB
 *   transaction putting the same rows.
 * Sides alternate; medians of the rounds.
 */
import { openDB } from "idb";
import {
  type CommitRecord,
  exportSession,
  importSession,
  indexedDbStorage,
  memoryStorage,
  type Storage,
} from "../src/index.ts";
import { applyAsReplica } from "../src/replication/reconcile.ts";
import { settledHistory } from "./histories.ts";
import { median } from "./workload.ts";

const COUNT = 10_000;
const ROUNDS = 3;
let databases = 0;

async function edgeCopy(): Promise<Storage> {
  const edge = memoryStorage();
  await edge.open("s", { mode: "write", at: 1_000, entryTail: 1, settled: 0 });
  const commits = settledHistory(COUNT);
  for (let i = 0; i < commits.length; i += 500)
    await edge.commit({ sessionId: "s", epoch: 1, expectedVersion: i }, commits.slice(i, i + 500));
  return edge;
}

/** ms to bring a new IndexedDB copy to the edge's head by its snapshot. */
async function bySnapshot(edge: Storage): Promise<number> {
  const copy = indexedDbStorage(`snapshot-${databases++}`);
  const start = performance.now();
  const snapshot = JSON.parse(JSON.stringify(await exportSession(edge, "s")));
  await importSession(copy, "s", snapshot);
  const ms = performance.now() - start;
  await copy.close();
  return ms;
}

/** ms to bring a new IndexedDB copy to the edge's head by replaying its change log, 256 commits a page. */
async function byReplay(edge: Storage): Promise<number> {
  const copy = indexedDbStorage(`replay-${databases++}`);
  const start = performance.now();
  await copy.open("s", { mode: "write", at: 1_000, entryTail: 0, settled: 0, epoch: 0 });
  for (let after = 0; ; ) {
    const { changes } = await edge.readChanges("s", after, 256);
    if (changes.length === 0) break;
    const page = JSON.parse(JSON.stringify(changes.map((c) => c.value))) as CommitRecord[];
    await applyAsReplica(copy, "s", 1, page);
    after = (page.at(-1) as CommitRecord).version;
  }
  const ms = performance.now() - start;
  await copy.close();
  return ms;
}

export async function snapshotVsReplayBench(): Promise<{ ours: number; floor: number }> {
  const edge = await edgeCopy();
  const ours: number[] = [];
  const floor: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      ours.push(await bySnapshot(edge));
      floor.push(await byReplay(edge));
    } else {
      floor.push(await byReplay(edge));
      ours.push(await bySnapshot(edge));
    }
  }
  return { ours: median(ours), floor: median(floor) };
}

/** The import alone against one raw transaction putting the same rows (and the session row). */
export async function snapshotImportBench(): Promise<{ ours: number; floor: number }> {
  const edge = await edgeCopy();
  const snapshot = JSON.parse(JSON.stringify(await exportSession(edge, "s")));
  const ours: number[] = [];
  const floor: number[] = [];
  const imported = async () => {
    const copy = indexedDbStorage(`import-${databases++}`);
    await copy.open("other", { mode: "write", at: 1_000, entryTail: 0, settled: 0 }); // the stores exist
    const start = performance.now();
    await importSession(copy, "s", structuredClone(snapshot));
    ours.push(performance.now() - start);
    await copy.close();
  };
  const raw = async () => {
    const name = `raw-${databases++}`;
    const setup = indexedDbStorage(name);
    await setup.open("other", { mode: "write", at: 1_000, entryTail: 0, settled: 0 });
    await setup.close();
    const db = await openDB(name);
    const rows = structuredClone(snapshot.rows) as {
      table: string;
      key: (string | number)[];
      value: unknown;
    }[];
    const start = performance.now();
    const tx = db.transaction([...db.objectStoreNames], "readwrite");
    await tx.objectStore("sessions").put(snapshot.meta, "s");
    // In chunks, as the import queues them (fake-indexeddb slows down with tens of thousands at once).
    for (let at = 0; at < rows.length; at += 1_000)
      await Promise.all(
        rows.slice(at, at + 1_000).map((row) => tx.objectStore(row.table).put(row.value, ["s", ...row.key])),
      );
    await tx.done;
    floor.push(performance.now() - start);
    db.close();
  };
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      await imported();
      await raw();
    } else {
      await raw();
      await imported();
    }
  }
  return { ours: median(ours), floor: median(floor) };
}
