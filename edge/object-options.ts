/** What a session's Durable Object is given: the platform's state, and the app's options. */
import type { OpenSessionOptions, Registry, Session } from "../src/index.ts";
import type { DurableObjectStorageLike } from "./do-sqlite-sql.ts";
import type { DurableObjectSqliteStorageOptions } from "./do-sqlite-storage.ts";
import type { SessionLimits } from "./limits.ts";

/** The parts of `DurableObjectState` the host uses (structural: no Cloudflare types needed). */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike & {
    setAlarm(scheduledTime: number): Promise<void>;
    deleteAlarm(): Promise<void>;
  };
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

export interface SessionObjectOptions<Env> {
  /** Task kinds, tools and model of the sessions this object hosts; called once per opened session. */
  readonly registry: (env: Env) => Registry;
  /** Runs once when a session is created by its first submission, before the submission (seed documents). */
  readonly onCreate?: (session: Session, env: Env) => Promise<void>;
  /**
   * How far ahead the watchdog alarm is kept while phases run (default 30 s): after an eviction mid-phase
   * the session resumes this long after its last commit at the latest.
   */
  readonly watchdogMs?: (env: Env) => number;
  /** How long one alarm invocation keeps driving work before it yields (default 60 s). */
  readonly alarmBudgetMs?: number;
  /**
   * Restart limit for task kinds and tools that set none (default 3): how many times a phase cut off by an
   * eviction or crash is re-entered before the task gives up (a tool call then asks `confirm`).
   */
  readonly maxRestarts?: (env: Env) => number | undefined;
  /** Caps on one session: open streams, waiting requests, unfinished Submissions (see `SessionLimits`). */
  readonly limits?: SessionLimits;
  /**
   * How long a linked browser tab leads the session without a push or renewal (default 15 s): after that,
   * this object takes the session over with a new epoch and resumes it.
   */
  readonly leaseMs?: (env: Env) => number;
  /**
   * Each session's working set and retention (`openSession`'s `retainSettled`, `entryTail`, `retention`,
   * `liveWaits`, `maxEarlySignals`):
   * what stays in memory, and what finished work may leave storage (DESIGN §9). Default: the kernel's.
   */
  readonly session?: (
    env: Env,
  ) => Pick<
    OpenSessionOptions,
    "retainSettled" | "entryTail" | "retention" | "liveWaits" | "maxEarlySignals"
  >;
  /**
   * The object's store: how much change log it keeps (`retainChanges`, `retainChangeBytes`; default
   * 10,000 commits, 32 MiB) — streams, devtools and linked tabs catch up from it — and how large a session
   * it moves whole to a tab the log no longer reaches (`maxExportChars`, `GET …/replica/snapshot`).
   */
  readonly store?: (
    env: Env,
  ) => Pick<DurableObjectSqliteStorageOptions, "retainChanges" | "retainChangeBytes" | "maxExportChars">;
}
