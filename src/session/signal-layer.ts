/**
 * The signals a layer changed over the layer below it (a draft over its base, a commit group over the
 * session state): those it stored (new, or taken by a wait) and the early ones it dropped. Both layers look
 * them up by the same rules, so what a draft sees and what the next draft of its group sees cannot drift
 * apart.
 */
import type { DroppedSignal, Signal } from "../records/schemas.ts";

/** What a layer reads of the signals below it. */
export interface SignalsBelow {
  /** The signal of `key` no wait has taken yet, if one is kept. */
  signal(key: string): Signal | undefined;
  /** How many such signals are kept. */
  earlySignals(): number;
}

export class SignalLayer {
  /** Each key's signal as this layer wrote it last. */
  readonly written = new Map<string, Signal>();
  /** Early signals of the layer below this layer dropped, by key (a key may take a new signal after). */
  readonly dropped = new Map<string, DroppedSignal>();

  constructor(private readonly below: SignalsBelow) {}

  /** The signal of `key` no wait has taken yet, as this layer leaves it. */
  open(key: string): Signal | undefined {
    const own = this.written.get(key);
    if (own) return own.consumedBy === undefined ? own : undefined;
    return this.dropped.has(key) ? undefined : this.below.signal(key);
  }

  /** How many signals no wait has taken are kept, as this layer leaves them. */
  openCount(): number {
    let count = this.below.earlySignals();
    for (const [key, own] of this.written)
      count += Number(own.consumedBy === undefined) - Number(this.openBelow(key));
    for (const key of this.dropped.keys()) if (!this.written.has(key)) count -= Number(this.openBelow(key));
    return count;
  }

  write(signal: Signal): void {
    this.written.set(signal.key, signal);
  }

  /**
   * Drops the early signal of `key` and returns it (none when no wait-free signal is kept for it). One this
   * layer accepted itself (`version`) is simply not written; one from below is recorded as dropped.
   */
  drop(key: string, version: number): Signal | undefined {
    const open = this.open(key);
    if (!open) return undefined;
    this.written.delete(key);
    if (open.version !== version)
      this.dropped.set(key, { key, version: open.version, requestId: open.requestId });
    return open;
  }

  /** A commit of the group, as the next draft sees it: its drops first, then its signals. */
  absorb(dropped: readonly DroppedSignal[] | undefined, signals: readonly Signal[] | undefined): void {
    for (const drop of dropped ?? []) {
      this.written.delete(drop.key);
      this.dropped.set(drop.key, drop);
    }
    for (const signal of signals ?? []) this.written.set(signal.key, signal);
  }

  get isEmpty(): boolean {
    return this.written.size === 0 && this.dropped.size === 0;
  }

  /** Whether the layer below keeps an early signal for `key` (one this layer replaced or dropped counts). */
  private openBelow(key: string): boolean {
    return this.below.signal(key) !== undefined;
  }
}
