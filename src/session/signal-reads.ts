/**
 * Reads of stored signals by key, coalesced: a read asked while another is in flight goes with the next
 * one, so many waits beginning at once (a commit that spawns hundreds) read their keys' signals in two
 * storage reads, not one each. No timer: the first read goes at once, and what queued behind it goes when
 * it ends.
 */
import type { Storage, StoredRecord } from "../storage/storage.ts";

interface Asked {
  resolve(row: StoredRecord | undefined): void;
  reject(error: unknown): void;
}

export class SignalReads {
  private queued = new Map<string, Asked[]>();
  private reading = false;

  constructor(
    private readonly storage: Storage,
    private readonly sessionId: string,
  ) {}

  /** The stored signal of `key`, kept or taken (its row as stored), or undefined. */
  read(key: string): Promise<StoredRecord | undefined> {
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
        const rows = await this.storage.readSignals(this.sessionId, keys);
        keys.forEach((key, i) => {
          for (const asked of batch.get(key) ?? []) asked.resolve(rows[i]);
        });
      } catch (error) {
        for (const asked of [...batch.values()].flat()) asked.reject(error);
      }
    }
    this.reading = false;
  }
}
