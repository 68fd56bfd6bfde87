/** How a browser tab hosts one session (see `BrowserSessionHost`). */
import {
  type Clock,
  indexedDbStorage,
  type LinkStatus,
  type Registry,
  type ReplicaRemote,
  type Session,
  type Storage,
  type Timers,
  type WithheldSignal,
} from "../src/index.ts";

export interface BrowserSessionHostOptions {
  readonly sessionId: string;
  /** IndexedDB database name (shared by every session of the app). */
  readonly database: string;
  /** A registry per writer session: task kinds, tools and the model. */
  readonly registry: () => Registry;
  readonly durability?: "strict" | "relaxed";
  /** Overrides the IndexedDB store (tests inject faults such as a full quota). */
  readonly storage?: (database: string) => Storage;
  /** Take leadership even if another tab holds it (recovering from a frozen leader tab). */
  readonly steal?: boolean;
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** Told whenever this tab becomes leader or follower. */
  readonly onRole?: (role: "leader" | "follower") => void;
  /** Runs on the writer session each time this tab takes the lead, before it accepts input (seed data here). */
  readonly onLead?: (session: Session) => Promise<void>;
  /**
   * Restart limit for task kinds and tools that set none (default 3): how many times a phase cut off by a
   * closed or crashed tab is re-entered before the task gives up (a tool call then asks `confirm`).
   */
  readonly maxRestarts?: number;
  /** How many waits of task trees started without a Submission stay live before new ones park (default 100). */
  readonly liveWaits?: number;
  /** How many signals no wait has taken yet the session keeps; past it one is refused (default 1,000). */
  readonly maxEarlySignals?: number;
  /**
   * Link the session to its edge host: while this tab leads, its commits are pushed there, unsafe effects
   * wait until the edge holds their intent, and the edge takes over when this tab hands off, closes or goes
   * quiet past the lease. Leading starts with a claim (catching up on what the edge wrote meanwhile).
   */
  readonly link?: {
    readonly remote: ReplicaRemote;
    /**
     * When this tab claims the session: `at-once` (default) as soon as it holds the session's Web Lock;
     * `when-asked`: it follows the edge's run live first (its commits copied into this browser's copy, every
     * tab shown them) and claims only on `takeBack()`. After a hand-off, a fence or a refused claim (another
     * browser leads), a tab follows the edge live either way.
     */
    readonly takeBack?: "at-once" | "when-asked";
    /** How often a tab that follows the edge pulls its commits (default 1 s). */
    readonly followEveryMs?: number;
    /** This browser's stable name at the edge (a tab reopened within the lease reclaims at once). */
    readonly holder?: string;
    /**
     * Told of the link's state: `leading`, `fenced`, `released`, `closed`, `following` (this tab copies the
     * edge's run live and writes nothing), or `refused` with why.
     */
    readonly onStatus?: (status: LinkStatus | "following" | "refused", error?: Error) => void;
    /**
     * This browser's copy was rebuilt from the edge's snapshot (the edge's change log no longer reached it)
     * and held signals the edge does not: they are not given again (an answer withdrawn there must stay
     * withdrawn), so a wait still open for one asks for it again. Told after the copy was rebuilt.
     */
    readonly onWithheld?: (signals: readonly WithheldSignal[]) => void;
  };
}

/** A new handle on the session's store. */
export function storageOf(options: BrowserSessionHostOptions): Storage {
  const { database, durability } = options;
  return options.storage?.(database) ?? indexedDbStorage(database, { durability: durability ?? "strict" });
}

/** The options every session a tab opens shares (a new store handle each time). */
export function sessionOptionsOf(options: BrowserSessionHostOptions) {
  const { sessionId, registry, clock, timers, maxRestarts, liveWaits, maxEarlySignals } = options;
  return {
    id: sessionId,
    storage: storageOf(options),
    registry: registry(),
    host: "browser" as const,
    ...(clock !== undefined && { clock }),
    ...(timers !== undefined && { timers }),
    ...(maxRestarts !== undefined && { maxRestarts }),
    ...(liveWaits !== undefined && { liveWaits }),
    ...(maxEarlySignals !== undefined && { maxEarlySignals }),
  };
}
