/**
 * Subscriptions deliver every committed change after a version, in order, with no gap and no duplicate.
 * A subscriber that starts behind catches up from the stored change log while live changes are buffered,
 * then switches to live delivery: the reconnect path.
 */
import { ensureError, HistoryTruncatedError, InvalidArgumentError, type KernelError } from "../errors.ts";
import type { CommitRecord } from "../records/schemas.ts";
import type { Preview } from "../tasks/preview.ts";

/** Receives one committed change. */
export type ChangeListener = (change: CommitRecord) => void;

export interface SubscribeOptions {
  /** Called when the subscription cannot continue (history pruned) or a listener threw. */
  readonly onError?: (error: Error) => void;
  /** Called once when the session closes normally: no more changes will come from this session object. */
  readonly onEnd?: () => void;
  /**
   * Hears previews — what phases produce before it is committed, such as the model's text as it streams —
   * in order with the changes, once the subscription is live (none while it catches up). Never stored:
   * a preview may be lost in a crash; the committed changes that follow are what holds.
   */
  readonly onPreview?: (preview: Preview) => void;
}

/** Stops a subscription. Safe to call more than once. */
export type Unsubscribe = () => void;

/** Reads committed changes after a version from the store, oldest first. */
export type ReadHistory = (
  afterVersion: number,
) => Promise<{ changes: CommitRecord[]; oldestRetained: number }>;

interface Subscriber {
  last: number;
  live: boolean;
  active: boolean;
  readonly buffer: CommitRecord[];
  readonly listener: ChangeListener;
  readonly onError: ((error: Error) => void) | undefined;
  readonly onEnd: (() => void) | undefined;
  readonly onPreview: ((preview: Preview) => void) | undefined;
}

export class Subscriptions {
  private readonly subscribers = new Set<Subscriber>();

  constructor(
    private readonly currentVersion: () => number,
    private readonly readHistory: ReadHistory,
  ) {}

  /** Delivers every change with version > `fromVersion`. */
  subscribe(fromVersion: number, listener: ChangeListener, options: SubscribeOptions = {}): Unsubscribe {
    if (!Number.isInteger(fromVersion) || fromVersion < 0 || fromVersion > this.currentVersion()) {
      throw new InvalidArgumentError(
        `cannot subscribe from version ${fromVersion}: the session is at version ${this.currentVersion()}`,
        [{ path: "fromVersion", message: "must be an integer between 0 and the current version" }],
      );
    }
    const subscriber: Subscriber = {
      last: fromVersion,
      live: fromVersion === this.currentVersion(),
      active: true,
      buffer: [],
      listener,
      onError: options.onError,
      onEnd: options.onEnd,
      onPreview: options.onPreview,
    };
    this.subscribers.add(subscriber);
    if (!subscriber.live) void this.catchUp(subscriber);
    return () => {
      subscriber.active = false;
      this.subscribers.delete(subscriber);
    };
  }

  /** Publishes a change that storage has confirmed and the state has adopted. */
  publish(change: CommitRecord): void {
    for (const subscriber of this.subscribers) {
      if (subscriber.live) this.deliver(subscriber, change);
      else subscriber.buffer.push(change);
    }
  }

  /** Hands a preview to every live subscriber that listens for them. */
  preview(preview: Preview): void {
    for (const subscriber of this.subscribers) {
      if (!subscriber.live || !subscriber.active || !subscriber.onPreview) continue;
      try {
        subscriber.onPreview(preview);
      } catch (error) {
        subscriber.onError?.(ensureError(error));
      }
    }
  }

  /** Ends every subscription with `error` (the session stopped or closed). */
  end(error?: KernelError): void {
    for (const subscriber of this.subscribers) {
      subscriber.active = false;
      if (error) subscriber.onError?.(error);
      else subscriber.onEnd?.();
    }
    this.subscribers.clear();
  }

  private async catchUp(subscriber: Subscriber): Promise<void> {
    try {
      while (subscriber.active && subscriber.last < this.currentVersion()) {
        const { changes, oldestRetained } = await this.readHistory(subscriber.last);
        if (!subscriber.active) return;
        if (oldestRetained > subscriber.last + 1)
          throw new HistoryTruncatedError(subscriber.last, oldestRetained);
        if (changes.length === 0) break;
        for (const change of changes) this.deliver(subscriber, change);
      }
      // Everything adopted so far is in storage and was read above, so the buffer only repeats it or
      // continues it; `deliver` skips the repeats. From here on, delivery is synchronous with adoption.
      for (const change of subscriber.buffer.splice(0)) this.deliver(subscriber, change);
      subscriber.live = true;
    } catch (error) {
      this.subscribers.delete(subscriber);
      subscriber.active = false;
      subscriber.onError?.(ensureError(error));
    }
  }

  private deliver(subscriber: Subscriber, change: CommitRecord): void {
    if (!subscriber.active || change.version <= subscriber.last) return;
    subscriber.last = change.version;
    try {
      subscriber.listener(change);
    } catch (error) {
      // A listener's bug must not break the pipeline or other subscribers.
      subscriber.onError?.(ensureError(error));
    }
  }
}
