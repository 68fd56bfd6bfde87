/**
 * A tab's subscriptions to its session's changes, carried across its role changes: each is moved to the
 * session the tab opens next (a writer when it leads, a read-only copy when it follows), and a listener sees
 * each version once even where the new session replays some it already saw.
 */
import type { ChangeListener, Preview, Session } from "../src/index.ts";

interface ListenerEntry {
  last: number;
  listener: ChangeListener;
  onError?: (error: Error) => void;
  /** Previews of the leading session in this tab (a follower tab's session produces none). */
  onPreview?: (preview: Preview) => void;
  stop?: () => void;
}

export class HostListeners {
  private readonly entries = new Set<ListenerEntry>();

  /** Subscribes from `fromVersion`, on `session` now (if the tab has one open); returns the unsubscribe. */
  add(
    session: Session | undefined,
    fromVersion: number,
    listener: ChangeListener,
    onError?: (error: Error) => void,
    onPreview?: (preview: Preview) => void,
  ): () => void {
    const entry: ListenerEntry = {
      last: fromVersion,
      ...(onError && { onError }),
      ...(onPreview && { onPreview }),
      listener: (change) => {
        // After a role change the new session may replay versions this listener already saw.
        if (change.version <= entry.last) return;
        entry.last = change.version;
        listener(change);
      },
    };
    this.entries.add(entry);
    attach(entry, session);
    return () => {
      entry.stop?.();
      this.entries.delete(entry);
    };
  }

  /** Stops listening to the tab's session now (it is about to close). */
  detach(): void {
    for (const entry of this.entries) entry.stop?.();
  }

  /** Listens to `session`, the tab's new one, from where each subscription stopped. */
  attach(session: Session): void {
    for (const entry of this.entries) attach(entry, session);
  }
}

function attach(entry: ListenerEntry, session: Session | undefined): void {
  if (!session) return;
  entry.stop = session.subscribe(Math.min(entry.last, session.version), entry.listener, {
    ...(entry.onError && { onError: entry.onError }),
    ...(entry.onPreview && { onPreview: entry.onPreview }),
  });
}
