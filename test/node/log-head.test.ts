/**
 * Pruning and the log's readers take a log row's `logStart` and first version from the ends of its stored
 * text, not by parsing it whole (a row can hold a group of thousands of records). What they read must be
 * what parsing the row says, for every row the IndexedDB store writes — whatever the records' text holds —
 * and a row of another shape must still be parsed.
 */
import "fake-indexeddb/auto";
import { describe, expect, it } from "vitest";
import { createRegistry, indexedDbStorage, openSession } from "../../src/index.ts";
import { firstVersionOf, logRowValue, logStartOf } from "../../src/storage/log-head.ts";

const registry = createRegistry({});

async function storedLogRows(database: string): Promise<{ key: unknown; value: unknown }[]> {
  const db = await new Promise<IDBDatabase>((resolve, reject) => {
    const request = indexedDB.open(database);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  const tx = db.transaction("changes", "readonly");
  const rows = await new Promise<{ key: unknown; value: unknown }[]>((resolve) => {
    const request = tx.objectStore("changes").openCursor();
    const found: { key: unknown; value: unknown }[] = [];
    request.onsuccess = () => {
      const cursor = request.result;
      if (!cursor) return resolve(found);
      found.push({ key: cursor.key, value: cursor.value });
      cursor.continue();
    };
  });
  db.close();
  return rows;
}

/** What parsing the row whole says: its logStart, and its first commit's version (a group's) or none. */
function parsed(stored: unknown): { logStart: unknown; first: unknown } {
  const value = logRowValue(stored) as { logStart?: unknown; commits?: { version?: unknown }[] };
  return { logStart: value.logStart, first: value.commits ? value.commits[0]?.version : undefined };
}

describe("a log row's head", () => {
  it("is read from the row's text as parsing it whole reads it, for every row written", async () => {
    const storage = indexedDbStorage("log-head");
    const session = await openSession({ id: "s", storage, registry });
    // Texts that look like the row's own ends, inside records, in single commits and in groups.
    const tricky = [
      ',"logStart":7}',
      '{"logStart":1,"commits":[{"version":2,',
      "]}",
      '"}]}',
      "\u2028 é 😀 \\",
    ];
    for (const [i, text] of tricky.entries()) {
      await session.commit((draft) => draft.appendEntry("log", { kind: "note", text }));
      // A group: several commits queued in one tick share one row.
      await Promise.all(
        tricky.map((t, j) =>
          session.commit((draft) => draft.appendEntry(`c${j}`, { kind: "note", text: `${t}${i}` })),
        ),
      );
    }
    await session.close();
    const rows = await storedLogRows("log-head");
    expect(rows.length).toBeGreaterThanOrEqual(10);
    let groups = 0;
    for (const { value } of rows) {
      expect(typeof value).toBe("string");
      const whole = parsed(value);
      expect(logStartOf(value)).toBe(whole.logStart);
      const key = 10_000; // a single commit's row answers its key; a group's its first version
      expect(firstVersionOf(value, key)).toBe(whole.first ?? key);
      if (whole.first !== undefined) groups++;
    }
    expect(groups).toBeGreaterThanOrEqual(5);
  });

  it("parses a row of another shape, and reads none from a row that is not JSON", () => {
    const reordered = JSON.stringify({ commits: [{ version: 4 }], logStart: 12 });
    expect(logStartOf(reordered)).toBe(12);
    expect(firstVersionOf(reordered, 9)).toBe(4);
    const truncated = '{"logStart":12,"commits":[{"version":4,"at":1';
    expect(logStartOf(truncated)).toBeUndefined();
    expect(firstVersionOf(truncated, 9)).toBe(9);
    expect(logStartOf({ logStart: 3, version: 2 })).toBe(3);
  });
});
