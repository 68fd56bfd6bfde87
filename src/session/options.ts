/** How a session is opened. */
import type { Clock, IdSource, Timers } from "../clock.ts";
import type { Registry } from "../registry.ts";
import type { Storage } from "../storage/storage.ts";
import type { WakeInfo } from "../tasks/wake-info.ts";
import type { RetentionPolicy } from "./retention.ts";

export interface OpenSessionOptions {
  readonly id: string;
  readonly storage: Storage;
  readonly registry?: Registry;
  /** `write` (default) takes ownership with a new epoch; `read` only queries and observes. */
  readonly mode?: "write" | "read";
  /**
   * Write mode: take ownership at exactly this owner epoch (one granted by another host of the session, as a
   * linked browser session's edge grants it) instead of the stored epoch + 1.
   */
  readonly epoch?: number;
  readonly clock?: Clock;
  readonly timers?: Timers;
  readonly ids?: IdSource;
  /** How long deferred (loss-tolerant) changes may wait before they are committed. Default 50 ms. */
  readonly deferredFlushMs?: number;
  /**
   * How many latest entries per conversation are loaded on open (default 200). Entries committed while the
   * session runs stay in memory up to five times that, so a long model turn reads its context without
   * touching storage; older ones are read from storage on demand.
   */
  readonly entryTail?: number;
  /**
   * How many finished Submissions (and task trees started without one) stay in memory and in views besides
   * every unfinished one (default 20). Older ones stay in storage: `readSubmission`, `readSubmissions`,
   * `readTask` and the requestId index find them. Memory and open time do not grow with history.
   */
  readonly retainSettled?: number;
  /**
   * How many waits of task trees started without a Submission (a root task awaiting outside keys, nothing
   * else of its tree open) stay live — loaded on open like any unfinished work — before new ones are parked
   * (default 100). A parked wait stays in storage when a session opens and is read back when one of its keys
   * is signalled, when it is cancelled by id, or when its deadline comes; `parkedInStorage` counts those and
   * `readParkedWaits` lists them. Open time does not grow with them.
   */
  readonly liveWaits?: number;
  /**
   * How many signals no wait has taken yet (sent before their wait began) the session keeps (default 1,000).
   * They are loaded on open, each up to 64 KiB, so they are bounded: past this many, a signal no task awaits
   * is refused with `early-signals-full` (429 at the edge) and nothing is stored. One a wait takes frees its
   * place; a signal a task already awaits is never refused for it. 0 keeps none (each such signal is refused
   * with `early-signals-full`); `Infinity` keeps every one.
   */
  readonly maxEarlySignals?: number;
  /**
   * What finished work may be removed from storage, by count and/or age, optionally archived first
   * (DESIGN §9; `session.collect()`). Default: none — finished work is kept forever. With `keepSettled`
   * below the default `retainSettled`, memory keeps that many too (an explicit `retainSettled` wins:
   * what the working set holds is never removed).
   */
  readonly retention?: RetentionPolicy;
  /** Called after every commit with `{ runnableNow, nextWakeAt }`: hosts turn it into timers or alarms. */
  readonly onWake?: (wake: WakeInfo) => void;
  /**
   * Called before a phase starts an effect that must not happen twice (`PhaseContext.beforeEffect`, used by
   * unsafe tools) with the version committed so far; the effect waits until it resolves. A linked browser
   * session resolves once its edge holds that version, so no host can take over without knowing the intent.
   */
  readonly effectGate?: (version: number, signal: AbortSignal) => Promise<void>;
  /**
   * The kind of host running this session. A call of a tool that may run only on another kind
   * (`defineTool({ runsOn })`) waits for such a host instead of running here. Default: none (runs all).
   */
  readonly host?: "browser" | "edge";
  /**
   * The change log keeps every commit after the version this returns, whatever its bounds: a linked
   * session's commits its other host has not acknowledged yet. Default: none.
   */
  readonly changeLogFloor?: () => number | undefined;
  /** Restart limit for task kinds that do not set their own `maxRestarts`. Default 3. */
  readonly maxRestarts?: number;
}

/** `open` while usable; `stopped` after a storage failure (reopen to see what was saved); `closed` by the host. */
export type SessionStatus = "open" | "stopped" | "closed";

/** Options of the observe-only waits. */
export interface WaitOptions {
  /** Stops waiting (and releases the subscription behind it); the promise rejects with the reason. */
  readonly signal?: AbortSignal;
}
