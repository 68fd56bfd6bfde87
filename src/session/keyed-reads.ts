/**
 * Reads from storage by key, coalesced: a key asked while a read is in flight goes with the next one, so
 * many waits beginning at once (a commit that spawns hundreds) read their keys in two storage reads, not one
 * each. No timer: the first read goes at once, and what queued behind it goes when it ends.
 */

interface Asked<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}

export class KeyedReads<T> {
  private queued = new Map<string, Asked<T>[]>();
  private reading = false;

  /** `readMany` answers each of its keys, in their order, in one read. */
  constructor(private readonly readMany: (keys: readonly string[]) => Promise<readonly T[]>) {}

  read(key: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const asked = this.queued.get(key);
      if (asked) asked.push({ resolve, reject });
      else this.queued.set(key, [{ resolve, reject }]);
      if (!this.reading) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.reading = true;
    while (this.queued.size > 0) {
      const batch = this.queued;
      this.queued = new Map();
      const keys = [...batch.keys()];
      try {
        const values = await this.readMany(keys);
        keys.forEach((key, i) => {
          for (const asked of batch.get(key) ?? []) asked.resolve(values[i] as T);
        });
      } catch (error) {
        for (const asked of [...batch.values()].flat()) asked.reject(error);
      }
    }
    this.reading = false;
  }
}
