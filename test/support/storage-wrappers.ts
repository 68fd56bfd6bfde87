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

// The same wrapper the testing kit ships (durable-agent/testing).
export { ForwardingStorage } from "../../src/testing/forwarding-storage.ts";

import { ForwardingStorage } from "../../src/testing/forwarding-storage.ts";

/** Wraps a store so tests can see every commit group and interpose before it reaches the inner store. */
export class SpyStorage extends ForwardingStorage {
  readonly groups: CommitRecord[][] = [];
  /** When set, the next commit waits for this promise before writing. */
  gate: Promise<void> | undefined;
  /** When set, the next commit throws this instead of writing (and the gate is cleared). */
  failNext: Error | undefined;

  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
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
export class KillableStorage extends ForwardingStorage {
  private dead = false;
  kill(): void {
    this.dead = true;
  }
  protected override target(): Storage {
    if (this.dead) throw new Error("process killed");
    return this.inner;
  }
}
