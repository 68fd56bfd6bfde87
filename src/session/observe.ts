/** Observe-only waits: resolve once a condition on committed state holds, re-checked after every change. */
import { InvalidArgumentError, SessionClosedError } from "../errors.ts";
import { isSubmissionFinished, type Submission } from "../records/schemas.ts";
import type { ChangeListener, SubscribeOptions, Unsubscribe } from "./subscriptions.ts";

/** What observing needs: the current version and a subscription to what is committed after it. */
export interface Observable {
  readonly id: string;
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
      {
        onError: (error) => finish(() => reject(error)),
        // Closed while waiting: nothing more will come through this session object; say so, never hang.
        onEnd: () => finish(() => reject(new SessionClosedError(session.id))),
      },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Resolves with a record once `ended` holds for it; rejects at once if `what` does not exist. */
export function untilEnded<T>(
  session: Observable,
  what: string,
  find: () => T | undefined,
  ended: (record: T) => boolean,
  signal?: AbortSignal,
): Promise<T> {
  const check = () => {
    const record = find();
    if (!record) throw new InvalidArgumentError(`${what} does not exist`);
    return ended(record) ? record : undefined;
  };
  return observeUntil(session, check, signal);
}

/** What the wait sees of a record that ended and left memory in the same commit. */
const LEFT_MEMORY = Symbol("left memory");

/**
 * Resolves with a record once it has ended. One that left the working set has ended (unfinished work never
 * leaves) and is read back from storage, also when it ends and leaves in the same commit.
 */
export async function untilStoredEnded<T>(
  session: Observable,
  what: string,
  find: () => T | undefined,
  read: () => Promise<T | undefined>,
  ended: (record: T) => boolean,
  signal?: AbortSignal,
): Promise<T> {
  if (!find()) {
    const stored = await read();
    if (stored && ended(stored)) return stored;
  }
  let seen = false;
  const held = () => {
    const record = find();
    seen ||= record !== undefined;
    return record ?? (seen ? LEFT_MEMORY : undefined);
  };
  const done = await untilEnded(
    session,
    what,
    held,
    (record) => record === LEFT_MEMORY || ended(record),
    signal,
  );
  return done === LEFT_MEMORY ? ((await read()) as T) : done;
}

/** {@link untilStoredEnded} for a Submission. */
export function untilSubmissionEnded(
  session: Observable,
  submissionId: string,
  find: () => Submission | undefined,
  read: () => Promise<Submission | undefined>,
  signal?: AbortSignal,
): Promise<Submission> {
  return untilStoredEnded(session, `submission ${submissionId}`, find, read, isSubmissionFinished, signal);
}
