/**
 * Asks the browser to keep this origin's storage under pressure (`navigator.storage.persist()`), so a
 * session's IndexedDB is not evicted as "best effort" data. Browsers may refuse; the answer is reported,
 * never thrown, because a non-persistent session still works.
 */
export interface PersistenceReport {
  /** Whether the origin's storage is persistent after the request. */
  readonly persisted: boolean;
  /** Bytes used and available, when the browser reports them. */
  readonly usage?: number;
  readonly quota?: number;
}

/** Requests persistent storage and reports usage and quota. */
export async function requestPersistentStorage(
  manager: StorageManager | undefined = globalThis.navigator?.storage,
): Promise<PersistenceReport> {
  if (!manager) return { persisted: false };
  const persisted = (await manager.persisted?.()) || ((await manager.persist?.()) ?? false);
  const estimate = await manager.estimate?.();
  return {
    persisted,
    ...(estimate?.usage !== undefined && { usage: estimate.usage }),
    ...(estimate?.quota !== undefined && { quota: estimate.quota }),
  };
}
