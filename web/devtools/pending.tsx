/** What a session waits for from outside: its pending waits, parked waits in storage, and early signals. */

import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { PendingWait, SessionView, Signal } from "../../src/index.ts";
import { clip, formatTime } from "./derive.ts";
import type { SessionSource } from "./session-source.ts";

/**
 * What the session waits for from outside at this version: each key, what it is for, how long it has
 * waited, its deadline. Answering one is an explicit, confirmed write (when the source allows it). Parked
 * waits left in storage (not in the view) are counted and listed from storage, a page at a time.
 */
export function PendingView(props: {
  view: SessionView;
  now: number;
  onAnswer?: ((key: string, suggested: string) => void) | undefined;
  parked?: SessionSource["readParkedWaits"] | undefined;
  early?: SessionSource["readEarlySignals"] | undefined;
  onDrop?: ((key: string) => Promise<void> | undefined) | undefined;
}) {
  const pending = props.view.pending ?? [];
  const [parked, setParked] = useState<{ count: number; waits: PendingWait[]; next: string | null }>();
  const [failed, setFailed] = useState<string>();
  const { parked: read } = props;
  const version = props.view.version;
  // Only the newest read is shown; a read again keeps as many waits listed as the page showed.
  const newest = useRef(0);
  const listed = useRef(100);
  const load = useCallback(
    (before: string | undefined, limit: number) => {
      const request = ++newest.current;
      if (!read) return setParked(undefined); // an older version: storage's list is not its own
      read(before, limit)
        .then((page) => {
          if (request !== newest.current) return;
          setParked((shown) => {
            const waits = [...(before === undefined ? [] : (shown?.waits ?? [])), ...page.waits];
            listed.current = Math.max(100, waits.length);
            return { count: page.parked, waits, next: page.next };
          });
        })
        .catch((error: unknown) => setFailed((error as Error).message));
    },
    [read],
  );
  // Read again as the session moves on: a parked wait read back and answered leaves storage's list.
  useEffect(() => {
    if (version >= 0) load(undefined, Math.min(1000, listed.current));
  }, [load, version]);
  const inMemory = new Set(pending.map((wait) => wait.key));
  const fromStorage = (parked?.waits ?? []).filter((wait) => !inMemory.has(wait.key));
  const rows = [...pending, ...fromStorage];
  return (
    <div>
      {parked !== undefined && parked.count > 0 && (
        <p class="meta" data-testid="pending-parked">
          {parked.count} parked {parked.count === 1 ? "wait is" : "waits are"} in storage, not in memory (read
          back when signalled, cancelled or due); {fromStorage.length} of their keys listed.{" "}
          {parked.next !== null && (
            <button type="button" onClick={() => load(parked.next ?? undefined, 100)}>
              list more
            </button>
          )}
        </p>
      )}
      {rows.length === 0 ? (
        <p class="empty" data-testid="pending-empty">
          Nothing waits on outside input at this version.
        </p>
      ) : (
        <table data-testid="pending">
          <thead>
            <tr>
              <th>key</th>
              <th>task</th>
              <th>for</th>
              <th>waiting</th>
              <th>deadline</th>
              {props.onAnswer && <th />}
            </tr>
          </thead>
          <tbody>
            {rows.map((wait, i) => (
              <WaitRow
                key={wait.key}
                wait={wait}
                now={props.now}
                onAnswer={props.onAnswer}
                parked={i >= pending.length}
              />
            ))}
          </tbody>
        </table>
      )}
      {failed && <p class="error">parked waits could not be read: {failed}</p>}
      {props.early && (
        <EarlySignals read={props.early} version={version} now={props.now} onDrop={props.onDrop} />
      )}
    </div>
  );
}

/**
 * The signals the session keeps that no wait has taken yet (sent before their wait began), as the session
 * holds them now — read again as it moves on. Dropping one is an explicit, confirmed write (over HTTP at the
 * edge, through the durable inbox for a local session).
 */
function EarlySignals(props: {
  read: NonNullable<SessionSource["readEarlySignals"]>;
  version: number;
  now: number;
  onDrop?: ((key: string) => Promise<void> | undefined) | undefined;
}) {
  const [kept, setKept] = useState<{ signals: readonly Signal[]; count: number }>();
  const [failed, setFailed] = useState<string>();
  const { read, version, onDrop } = props;
  const newest = useRef(0);
  const load = useCallback(() => {
    const request = ++newest.current;
    read(EARLY_LISTED)
      .then((page) => request === newest.current && setKept(page))
      .catch((error: unknown) => setFailed((error as Error).message));
  }, [read]);
  useEffect(() => {
    if (version >= 0) load();
  }, [load, version]);
  if (failed) return <p class="error">early signals could not be read: {failed}</p>;
  if (!kept || kept.count === 0) return null;
  const signals = kept.signals;
  return (
    <section>
      <h3>
        Signals no wait has taken yet ({kept.count}){" "}
        <span class="meta">
          — as the session holds them now
          {kept.count > signals.length && `; the oldest ${signals.length} listed`}
        </span>
      </h3>
      <table data-testid="early-signals">
        <thead>
          <tr>
            <th>key</th>
            <th>received</th>
            <th>request</th>
            <th>payload</th>
            {onDrop && <th />}
          </tr>
        </thead>
        <tbody>
          {signals.map((signal) => (
            <tr key={signal.key}>
              <td>
                <code>{signal.key}</code>
              </td>
              <td>
                {formatTime(signal.receivedAt)} ({formatAge(props.now - signal.receivedAt)}), v
                {signal.version}
              </td>
              <td>{signal.requestId}</td>
              <td>
                <code>{clip(JSON.stringify(signal.payload), 120)}</code>
              </td>
              {onDrop && (
                <td>
                  <button type="button" onClick={() => onDrop(signal.key)?.then(load)}>
                    drop…
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** How many early signals the page lists (the session keeps at most `maxEarlySignals`, 1,000 by default). */
const EARLY_LISTED = 100;

/** How much of what a wait is for the table shows (the whole is its cell's tooltip). */
const ABOUT_SHOWN = 400;

function WaitRow(props: {
  wait: PendingWait;
  now: number;
  parked: boolean;
  onAnswer?: ((key: string, suggested: string) => void) | undefined;
}) {
  const { wait } = props;
  const about = JSON.stringify(wait.about ?? null);
  return (
    <tr data-parked={props.parked ? "true" : undefined}>
      <td>
        <code>{wait.key}</code>
        {wait.keys.length > 1 && (
          <span class="meta">
            {" "}
            ({wait.mode} of {wait.keys.length})
          </span>
        )}
        {props.parked && (
          <>
            {" "}
            <span class="tag">parked</span>
          </>
        )}
      </td>
      <td>
        {wait.taskId} <span class="meta">{wait.kind}</span>
      </td>
      <td>
        <code class="pending-about" title={about.length > ABOUT_SHOWN ? about : undefined}>
          {clip(about, ABOUT_SHOWN)}
        </code>
      </td>
      <td>
        since {formatTime(wait.since)} ({formatAge(props.now - wait.since)})
      </td>
      <td data-testid="pending-deadline">
        {wait.until === undefined ? (
          "none"
        ) : wait.until <= props.now ? (
          // Passed, and the wait is still open here: its deadline phase runs when a writer next runs it.
          <span
            class="status tone-warn"
            title="the deadline's phase runs when a writer next runs the session"
          >
            {formatTime(wait.until)} — passed {formatAge(props.now - wait.until)} ago, not yet acted on
          </span>
        ) : (
          formatTime(wait.until)
        )}
      </td>
      {props.onAnswer && (
        <td>
          <button
            type="button"
            onClick={() =>
              props.onAnswer?.(wait.key, /approval/.test(wait.key) ? '{"approved": true}' : "{}")
            }
          >
            answer…
          </button>
        </td>
      )}
    </tr>
  );
}

function formatAge(ms: number): string {
  if (ms < 0) return "just now";
  const s = Math.floor(ms / 1000);
  if (s < 120) return `${s} s`;
  const m = Math.floor(s / 60);
  return m < 120 ? `${m} min` : `${Math.floor(m / 60)} h`;
}
