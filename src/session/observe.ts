/** Observe-only waits: resolve once a condition on committed state holds, re-checked after every change. */
import type { ChangeListener, SubscribeOptions, Unsubscribe } from "./subscriptions.ts";

/** What observing needs: the current version and a subscription to what is committed after it. */
export interface Observable {
  readonly version: number;
  subscribe(fromVersion: number, listener: ChangeListener, options?: SubscribeOptions): Unsubscribe;
}

/**
 * Resolves with the first defined `check()`, re-checked after every committed change; only observes.
 * Aborting `signal` stops observing (the subscription is released) and rejects with its reason.
 */
export function observeUntil<T>(
  session: Observable,
  check: () => T | undefined,
  signal?: AbortSignal,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    try {
      signal?.throwIfAborted();
      const done = check();
      if (done !== undefined) return resolve(done);
    } catch (error) {
      return reject(error);
    }
    const finish = (settle: () => void) => {
      stop();
      signal?.removeEventListener("abort", onAbort);
      settle();
    };
    const onAbort = () => finish(() => reject(signal?.reason));
    const stop = session.subscribe(
      session.version,
      () => {
        let done: T | undefined;
        try {
          done = check();
        } catch (error) {
          finish(() => reject(error));
          return;
        }
        if (done !== undefined) finish(() => resolve(done));
      },
      { onError: (error) => finish(() => reject(error)) },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
