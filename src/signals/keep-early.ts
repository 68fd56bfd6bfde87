/**
 * How long an early signal (one no wait has taken) is kept: its definition's `keepEarlyMs` from when it was
 * received. Read by the scheduler (when to drop it) and wherever a kept signal is taken or answered: one past
 * its time is not kept any more, even before its drop is committed.
 */
import type { Signal } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { KernelDraft } from "../session/draft.ts";

/** When the early signal `signal` is dropped unless a wait takes it first; undefined: it is kept. */
export function expiryOf(registry: Registry, signal: Signal): number | undefined {
  if (signal.consumedBy !== undefined) return undefined;
  const keep = registry.signalFor(signal.key)?.keepEarlyMs;
  return keep === undefined ? undefined : signal.receivedAt + keep;
}

/** Whether the early signal `signal` is past its `keepEarlyMs` at `now` (dropped, or to be dropped). */
export function isExpired(registry: Registry, signal: Signal, now: number): boolean {
  const at = expiryOf(registry, signal);
  return at !== undefined && at <= now;
}

/** Drops, in `draft`, each early signal of `keys` still kept whose time ran out by `now`. */
export function dropExpired(draft: KernelDraft, keys: readonly string[], now: number): void {
  for (const key of keys) {
    const signal = draft.signal(key);
    if (signal && isExpired(draft.registry, signal, now)) draft.signalWrites.drop(key, draft.version);
  }
}
