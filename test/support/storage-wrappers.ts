/** Storage wrappers for tests: counting transactions, holding a commit in flight, failing on demand. */
import type { CommitGuard, CommitRecord, Storage } from "../../src/index.ts";

/** A promise with its resolve/reject exposed, for controlling async ordering without sleeps. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Wraps a store so tests can see every commit group and interpose before it reaches the inner store. */
export class SpyStorage implements Storage {
  readonly groups: CommitRecord[][] = [];
  /** When set, the next commit waits for this promise before writing. */
  gate: Promise<void> | undefined;
  /** When set, the next commit throws this instead of writing (and the gate is cleared). */
  failNext: Error | undefined;

  constructor(readonly inner: Storage) {}

  open: Storage["open"] = (...args) => this.inner.open(...args);
  readEntries: Storage["readEntries"] = (...args) => this.inner.readEntries(...args);
  readChanges: Storage["readChanges"] = (...args) => this.inner.readChanges(...args);
  readDocumentRows: Storage["readDocumentRows"] = (...args) => this.inner.readDocumentRows(...args);
  close: Storage["close"] = () => this.inner.close();

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    if (this.gate !== undefined) {
      const gate = this.gate;
      this.gate = undefined;
      await gate;
    }
    if (this.failNext) {
      const error = this.failNext;
      this.failNext = undefined;
      throw error;
    }
    await this.inner.commit(guard, commits);
    this.groups.push([...commits]);
  }
}

/**
 * A store handle that can be killed like the process holding it: after `kill()` every call fails, so the
 * abandoned kernel can neither read nor write, while the data stays for the next process.
 */
export class KillableStorage implements Storage {
  private dead = false;
  constructor(readonly inner: Storage) {}
  kill(): void {
    this.dead = true;
  }
  private alive(): Storage {
    if (this.dead) throw new Error("process killed");
    return this.inner;
  }
  open: Storage["open"] = async (...args) => this.alive().open(...args);
  readEntries: Storage["readEntries"] = async (...args) => this.alive().readEntries(...args);
  readChanges: Storage["readChanges"] = async (...args) => this.alive().readChanges(...args);
  readDocumentRows: Storage["readDocumentRows"] = async (...args) => this.alive().readDocumentRows(...args);
  close: Storage["close"] = async () => undefined;
  commit: Storage["commit"] = async (...args) => this.alive().commit(...args);
}
