/**
 * One writer per session across tabs: leadership is an exclusive Web Lock held for as long as the tab
 * leads. The leader opens the session for writing — a new owner epoch — so a tab that lost the lock (closed,
 * frozen, or had it stolen) can never commit again: its writes fail with StaleOwnerError.
 */

export interface Leadership {
  /** Resolves when this tab holds the lock. */
  readonly acquired: Promise<void>;
  /** Resolves when this tab lost the lock it held (released, or stolen by another tab). */
  readonly lost: Promise<void>;
  /** Whether this tab holds the lock now. */
  readonly isLeader: boolean;
  /** Gives the lock up (or stops waiting for it). */
  release(): void;
}

export interface LeadershipOptions {
  /** Take the lock even if another tab holds it (that tab loses it): recovery from a frozen leader. */
  readonly steal?: boolean;
  /** Default `navigator.locks`. */
  readonly locks?: LockManager;
}

/** Requests leadership of `name` (one lock name per session). */
export function requestLeadership(name: string, options: LeadershipOptions = {}): Leadership {
  const locks = options.locks ?? globalThis.navigator?.locks;
  if (!locks) throw new Error("the Web Locks API is not available here");
  const abort = new AbortController();
  let isLeader = false;
  let giveUp!: () => void;
  const held = new Promise<void>((resolve) => {
    giveUp = resolve;
  });
  let markAcquired!: () => void;
  const acquired = new Promise<void>((resolve) => {
    markAcquired = resolve;
  });
  const request = locks.request(
    name,
    options.steal ? { mode: "exclusive", steal: true } : { mode: "exclusive", signal: abort.signal },
    async () => {
      isLeader = true;
      markAcquired();
      await held;
    },
  );
  // The request settles when the lock is released, stolen (AbortError) or never granted (aborted).
  const lost = request.then(
    () => undefined,
    () => undefined,
  );
  void lost.then(() => {
    isLeader = false;
  });
  return {
    acquired,
    lost,
    get isLeader() {
      return isLeader;
    },
    release() {
      abort.abort();
      giveUp();
    },
  };
}

/**
 * `run` one call at a time: a call made while one is under way starts once it has settled (a tab asked to
 * lead again while it claims the session — `takeBack()` twice — must not claim it twice).
 */
export function oneAtATime<A extends unknown[]>(run: (...args: A) => Promise<void>) {
  let last: Promise<unknown> = Promise.resolve();
  return (...args: A): Promise<void> => {
    const next = last.then(
      () => run(...args),
      () => run(...args),
    );
    last = next.catch(() => undefined);
    return next;
  };
}
