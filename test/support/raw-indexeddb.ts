/** Writes a raw row straight into the kernel's IndexedDB layout, bypassing validation (to plant corruption). */
import type { KeyPart, Table } from "../../src/index.ts";

export async function writeRawIndexedDbRow(
  database: string,
  sessionId: string,
  table: Table | "sessions",
  key: readonly KeyPart[],
  value: unknown,
  factory: IDBFactory = indexedDB,
): Promise<void> {
  const request = factory.open(database);
  const db = await new Promise<IDBDatabase>((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  const tx = db.transaction(table, "readwrite");
  tx.objectStore(table).put(value, table === "sessions" ? sessionId : [sessionId, ...key]);
  await new Promise((resolve, reject) => {
    tx.oncomplete = resolve;
    tx.onabort = () => reject(tx.error);
  });
  db.close();
}
