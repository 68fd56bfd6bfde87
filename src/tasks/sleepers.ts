/**
 * What the scheduler's wake queue holds besides sleeping tasks and deadlines: the earliest deadline of the
 * parked waits left in storage, and the time each early signal with a `keepEarlyMs` is dropped. Entries are
 * dropped lazily: one is current only while what it stands for still wakes at that time.
 */
import type { Signal } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { SessionState } from "../session/state.ts";
import { expiryOf } from "../signals/keep-early.ts";
import { wakeTimeOf } from "./wake-info.ts";

/** The wake-queue id of the earliest deadline among parked waits left in storage (no task has it). */
export const PARKED = "";

/** The wake-queue id of an early signal's drop (a NUL first: no task id has one). */
const EXPIRY = "\u0000";
/** The key an early signal's wake-queue id names, if `id` is one. */
export const keyOfExpiry = (id: string) => (id.startsWith(EXPIRY) ? id.slice(EXPIRY.length) : undefined);

/** Where a kept early signal goes in the wake queue, if it is ever dropped. */
export function expiryEntry(registry: Registry, signal: Signal): { at: number; id: string } | undefined {
  const at = expiryOf(registry, signal);
  return at === undefined ? undefined : { at, id: `${EXPIRY}${signal.key}` };
}

/** A wake-queue entry is current while what it names still wakes at `at` (a blocked task does not). */
export function isCurrentSleeper(
  { state, registry }: { state: SessionState; registry: Registry },
  id: string,
  at: number,
): boolean {
  if (id === PARKED) return state.parkedDue === at;
  const key = keyOfExpiry(id);
  if (key !== undefined) {
    const signal = state.signal(key);
    return signal !== undefined && expiryOf(registry, signal) === at;
  }
  const task = state.task(id);
  return task !== undefined && wakeTimeOf(task) === at && !state.blockedTasks.has(id);
}

/** The longest delay a platform timer waits (2^31 − 1 ms, about 24.8 days): a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * The timer delay for a wake at `at`: capped at what a platform timer can wait. A timer that fires early finds
 * nothing due, and the scheduler arms the next one.
 */
export const timerDelay = (at: number, now: number) => Math.min(MAX_TIMER_MS, Math.max(0, at - now));
