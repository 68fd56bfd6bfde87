/** The devtools views of one session version: submissions, conversation, documents, timeline, wake info. */

import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  type CommitRecord,
  diffJson,
  type Entry,
  isSubmissionFinished,
  type PendingWait,
  type RecoveryEvent,
  type RecoveryPlan,
  type SessionView,
  type Signal,
  type Submission,
} from "../../src/index.ts";
import { clip, describeCommit, formatTime, wakeOfView } from "./derive.ts";
import type { SessionHistory } from "./history.ts";
import { JsonView } from "./json-view.tsx";
import { type RecoveryMark, submissionOutcome } from "./outcome.ts";
import type { SessionSource } from "./session-source.ts";
import { treeOf } from "./tree.ts";
import { VirtualList } from "./virtual-list.tsx";

/**
 * Submissions with how they ended (the problems of their tool calls counted: a succeeded turn whose calls
 * failed is not shown as plain success) and timing; an open one says how long nothing has committed. A
 * cancel button when the source allows it (edge).
 */
export function SubmissionsView(props: {
  view: SessionView;
  now: number;
  onCancel?: ((id: string) => void) | undefined;
}) {
  if (props.view.submissions.length === 0) return <p class="empty">No submissions at this version.</p>;
  return (
    <table data-testid="submissions">
      <thead>
        <tr>
          <th>submission</th>
          <th>request</th>
          <th>status</th>
          <th>accepted</th>
          <th>took</th>
          <th>work</th>
          <th>task</th>
          {props.onCancel && <th />}
        </tr>
      </thead>
      <tbody>
        {props.view.submissions.map((s) => (
          <tr key={s.id}>
            <td>{s.id}</td>
            <td>{s.requestId}</td>
            <SubmissionStatus submission={s} view={props.view} now={props.now} />
            <td>{formatTime(s.acceptedAt)}</td>
            <td>{isSubmissionFinished(s) ? `${s.updatedAt - s.acceptedAt} ms` : "—"}</td>
            <td data-testid="submission-work">{workOf(s, props.view)}</td>
            <td>{s.taskId ?? "—"}</td>
            {props.onCancel && (
              <td>
                {!isSubmissionFinished(s) && (
                  <button type="button" onClick={() => props.onCancel?.(s.id)}>
                    cancel…
                  </button>
                )}
              </td>
            )}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/**
 * What a Submission's run did: model rounds and calls, tool calls, waits on outside input, and its token
 * totals (from the turn's result; counted from its tasks while it runs).
 */
function workOf(s: Submission, view: SessionView): string {
  const tree = treeOf(view.tasks, s.taskId);
  const tools = tree.filter((t) => t.kind === "agent.tool").length;
  const waits = tree.filter((t) => t.state.status === "awaiting").length;
  const usage = (
    s.result as { usage?: { rounds?: number; total?: { inputTokens: number; outputTokens: number } } }
  )?.usage;
  const parts = [
    usage?.rounds !== undefined ? `${usage.rounds} rounds` : undefined,
    `${tools} tool calls`,
    waits > 0 ? `${waits} waiting` : undefined,
    usage?.total ? `${usage.total.inputTokens} in / ${usage.total.outputTokens} out tokens` : undefined,
  ];
  return tree.length === 0 && !usage ? "—" : parts.filter(Boolean).join(" · ");
}

function SubmissionStatus(props: { submission: Submission; view: SessionView; now: number }) {
  const outcome = submissionOutcome(props.submission, props.view, props.now);
  return (
    <td data-testid="submission-status" data-status={props.submission.status} data-tone={outcome.tone}>
      <span class={`status ${props.submission.status} tone-${outcome.tone}`}>{outcome.label}</span>
      {outcome.reason && <span class="reason"> {outcome.reason}</span>}
    </td>
  );
}

function EntryLine({ entry, withdrawn }: { entry: Entry; withdrawn?: boolean }) {
  const c = entry.content;
  switch (c.kind) {
    case "user":
      return withdrawn ? (
        <span>
          <span class="tag withdrawn" title="its turn was cancelled before it started: no model reads it">
            withdrawn
          </span>{" "}
          {c.text}
        </span>
      ) : (
        <span>{c.text}</span>
      );
    case "note":
    case "summary":
      return <span>{c.text}</span>;
    case "model":
      return (
        <span>
          {c.text}
          {c.toolCalls.map((call) => (
            <code key={call.id} class="call">
              {call.name}({call.args})
            </code>
          ))}
        </span>
      );
    case "tool-result":
      return (
        <span>
          <code>{c.toolName}</code> <span class={`tag ${c.outcome}`}>{c.outcome}</span>{" "}
          {JSON.stringify(c.output)}
        </span>
      );
    case "interrupted":
      return (
        <span>
          <span class="tag interrupted">interrupted</span> partial: “{c.partialText}”
        </span>
      );
  }
}

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

function WaitRow(props: {
  wait: PendingWait;
  now: number;
  parked: boolean;
  onAnswer?: ((key: string, suggested: string) => void) | undefined;
}) {
  const { wait } = props;
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
        <code>{JSON.stringify(wait.about ?? null)}</code>
      </td>
      <td>
        since {formatTime(wait.since)} ({formatAge(props.now - wait.since)})
      </td>
      <td>{wait.until === undefined ? "none" : formatTime(wait.until)}</td>
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

/** An entry's whole stored record as a JSON tree, built only once asked for (a conversation has thousands). */
function EntryRecord({ entry }: { entry: Entry }) {
  const [open, setOpen] = useState(false);
  const name = `entries/${entry.conversationId}/${entry.seq}`;
  return (
    <>
      <button
        type="button"
        class="record"
        aria-expanded={open}
        aria-label={`${open ? "hide" : "show"} the record ${name}`}
        onClick={() => setOpen(!open)}
      >
        {open ? "hide record" : "record"}
      </button>
      {open && <JsonView value={entry} label={name} testId={`entry-record-${entry.seq}`} />}
    </>
  );
}

/** Every conversation's entries in order, interrupted records and tool outcomes marked. */
export function ConversationView(props: {
  view: SessionView;
  older?: Pick<SessionSource, "readEntries"> | undefined;
}) {
  const { view } = props;
  if (view.conversations.length === 0) return <p class="empty">No conversation at this version.</p>;
  return (
    <div data-testid="conversation">
      {view.conversations.map((conversation) => (
        <ConversationEntries key={conversation.id} conversation={conversation} older={props.older} />
      ))}
    </div>
  );
}

/** Entries a page of older ones reads from storage at a time. */
const OLDER_ENTRIES_PAGE = 500;

/**
 * One conversation: the entries the view holds (its tail), and older ones read from storage on request —
 * entries never change once committed, so what storage holds now is what they were at any version.
 */
function ConversationEntries(props: {
  conversation: SessionView["conversations"][number];
  older?: Pick<SessionSource, "readEntries"> | undefined;
}) {
  const { conversation } = props;
  const [stored, setStored] = useState<{ entries: readonly Entry[]; next: number | null } | undefined>();
  const [error, setError] = useState<string | undefined>();
  const tailStart = conversation.entries[0]?.seq ?? conversation.entryCount;
  const entries = useMemo(() => {
    // At an older version the conversation was shorter: only entries it had then, each once.
    const older = (stored?.entries ?? []).filter((e) => e.seq < tailStart);
    return [...older, ...conversation.entries];
  }, [stored, conversation.entries, tailStart]);
  const firstShown = entries[0]?.seq ?? 0;
  // The next page ends where the last one began (storage may hold fewer entries than seqs: retention).
  const before = stored ? stored.next : firstShown;
  const [loading, setLoading] = useState(false);
  const canLoad = props.older?.readEntries !== undefined && before !== null && before > 0;
  const loadOlder = () => {
    if (before === null || loading) return;
    setError(undefined);
    setLoading(true);
    props.older
      ?.readEntries?.(conversation.id, before, OLDER_ENTRIES_PAGE)
      .then((page) =>
        setStored((now) => ({ entries: [...page.entries, ...(now?.entries ?? [])], next: page.next })),
      )
      .catch((e: unknown) => setError((e as Error).message))
      .finally(() => setLoading(false));
  };
  return (
    <section>
      <h3>
        {conversation.id}{" "}
        <small data-testid="entry-count">
          ({entries.length} of {conversation.entryCount} entries shown)
        </small>
      </h3>
      {firstShown > 0 && (
        <p class="meta" data-testid="entries-before">
          {firstShown} older {firstShown === 1 ? "entry is" : "entries are"} in storage, not in the view's
          tail.{" "}
          {canLoad && (
            <button type="button" data-testid="load-older-entries" onClick={loadOlder} disabled={loading}>
              read {Math.min(OLDER_ENTRIES_PAGE, before ?? 0)} more from storage
            </button>
          )}
        </p>
      )}
      {error && (
        <p role="alert" class="error">
          Could not read older entries: {error}
        </p>
      )}
      <VirtualList
        items={entries}
        as="ol"
        list={{ class: "entries", "data-testid": `entries-${conversation.id}` }}
        label={`entries of ${conversation.id}`}
        keyOf={(entry) => entry.seq}
        numberOf={(entry) => entry.seq}
        estimate={() => 44}
        rowClass={(entry) => `entry ${entry.content.kind}`}
        render={(entry) => (
          <>
            <span class="meta">
              #{entry.seq} v{entry.version} {entry.content.kind}
            </span>{" "}
            <EntryLine entry={entry} withdrawn={conversation.withdrawn?.includes(entry.seq) === true} />{" "}
            <EntryRecord entry={entry} />
          </>
        )}
      />
    </section>
  );
}

/** Picks one of a document's versions (listed with the commit that wrote it). */
function VersionSelect(props: {
  label: string;
  versions: readonly { version: number; documentVersion: number }[];
  value: number | undefined;
  onChange: (version: number) => void;
}) {
  return (
    <label>
      {props.label}{" "}
      <select value={props.value} onChange={(e) => props.onChange(Number(e.currentTarget.value))}>
        {props.versions.map((v) => (
          <option key={v.version} value={v.version}>
            v{v.documentVersion} (commit {v.version})
          </option>
        ))}
      </select>
    </label>
  );
}

/** Documents at the shown version, and the JSON Patch between any two of a document's versions. */
export function DocumentsView(props: { view: SessionView; history: SessionHistory }) {
  const { view, history } = props;
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const current = view.documents.find((d) => d.id === selected) ?? view.documents[0];
  const versions = current ? history.documentVersions(current.id) : [];
  const [from, setFrom] = useState<number | undefined>(undefined);
  const [to, setTo] = useState<number | undefined>(undefined);
  if (!current) return <p class="empty">No documents at this version.</p>;
  const valueAt = (version: number | undefined) =>
    version === undefined
      ? null
      : (history.viewAt(version).documents.find((d) => d.id === current.id)?.value ?? null);
  const left = from ?? versions.at(-2)?.version;
  const right = to ?? versions.at(-1)?.version;
  const diff = left !== undefined && right !== undefined ? diffJson(valueAt(left), valueAt(right)) : [];
  return (
    <div class="split" data-testid="documents">
      <ul class="list" aria-label="documents">
        {view.documents.map((d) => (
          <li key={d.id}>
            <button type="button" aria-pressed={d.id === current.id} onClick={() => setSelected(d.id)}>
              {d.id}{" "}
              <small>
                {d.type} v{d.version}
              </small>
            </button>
          </li>
        ))}
      </ul>
      <div>
        <h3 data-testid="document-title">
          {current.id} — v{current.version} ({current.type})
        </h3>
        <JsonView value={current.value} label={current.id} testId="document-value" />
        <h4>Diff between versions</h4>
        <VersionSelect label="from" versions={versions} value={left} onChange={setFrom} />{" "}
        <VersionSelect label="to" versions={versions} value={right} onChange={setTo} />
        <ul class="diff" data-testid="document-diff">
          {diff.length === 0 && <li>no difference</li>}
          {diff.map((op, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: a diff is recomputed whole; its ops have no identity
            <li key={i} class={`op ${op.op}`}>
              <code>{op.op}</code> {op.path} {"value" in op ? JSON.stringify(op.value) : ""}
            </li>
          ))}
        </ul>
      </div>
    </div>
  );
}

/**
 * Every commit, newest first, with what it changed and what recovery did in it (the recovery lane: new
 * writers and the gap before them, counted restarts, confirmations, interrupted records — each linked to
 * its task); a click scrubs to it. "Recovery only" keeps the commits that carry such marks.
 */
export function TimelineView(props: {
  commits: readonly CommitRecord[];
  version: number;
  recovery: ReadonlyMap<number, readonly RecoveryMark[]>;
  onScrub: (version: number) => void;
  onTask: (taskId: string) => void;
}) {
  const [onlyRecovery, setOnlyRecovery] = useState(false);
  const newestFirst = useMemo(() => {
    const pool = onlyRecovery ? props.commits.filter((c) => props.recovery.has(c.version)) : props.commits;
    return [...pool].reverse();
  }, [props.commits, props.recovery, onlyRecovery]);
  return (
    <>
      <label class="filter">
        <input
          type="checkbox"
          data-testid="recovery-only"
          checked={onlyRecovery}
          onChange={(e) => setOnlyRecovery(e.currentTarget.checked)}
        />{" "}
        recovery only ({props.recovery.size} commits)
      </label>
      <VirtualList
        items={newestFirst}
        as="ol"
        list={{ class: "timeline", "data-testid": "timeline" }}
        label={`${newestFirst.length} commits, newest first`}
        keyOf={(change) => change.version}
        numberOf={(change) => change.version}
        estimate={(change) =>
          26 +
          19 *
            (change.submissions.length +
              change.entries.length +
              change.tasks.length +
              change.documents.length) +
          22 * (props.recovery.get(change.version)?.length ?? 0)
        }
        rowClass={(change) => (change.version === props.version ? "current" : undefined)}
        render={(change) => (
          <>
            <button type="button" onClick={() => props.onScrub(change.version)}>
              v{change.version}
            </button>{" "}
            <span class="meta">
              {formatTime(change.at)} · epoch {change.epoch}
              {change.deferred ? " · deferred" : ""}
            </span>
            {props.recovery.get(change.version) && (
              <ul class="recovery-marks" data-testid="recovery-marks">
                {props.recovery.get(change.version)?.map((mark, i) => (
                  // biome-ignore lint/suspicious/noArrayIndexKey: one commit's marks, fixed once committed
                  <li key={i} class={`mark mark-${mark.kind}`} data-kind={mark.kind} data-task={mark.taskId}>
                    <span class="tag">{mark.kind}</span> {mark.text}
                    {mark.taskId && (
                      <>
                        {" "}
                        <button type="button" class="link" onClick={() => props.onTask(mark.taskId ?? "")}>
                          show task
                        </button>
                      </>
                    )}
                  </li>
                ))}
              </ul>
            )}
            <ul>
              {describeCommit(change).map((line) => (
                <li key={line}>{line}</li>
              ))}
            </ul>
          </>
        )}
      />
    </>
  );
}

function describeEvent(event: RecoveryEvent): string {
  switch (event.type) {
    case "restarted":
      return `re-enter phase “${event.phase}” (counted restart)${event.detail ? ` — ${event.detail}` : ""}`;
    case "started":
      return `start phase “${event.phase}”${event.detail ? ` — ${event.detail}` : ""}`;
    case "restart-limit":
      return `fail: restart limit reached in phase “${event.phase}” (${event.restarts} restarts)`;
    case "join-rechecked":
      return `re-check its join (${event.open} children still open)`;
    case "woke":
      return `wake now into phase “${event.phase}” (its sleep is over)`;
    case "migrated":
      return `migrate from version ${event.from} to ${event.to}`;
    case "deadline-passed":
      return `deadline passed: move to phase “${event.phase}” without the awaited input`;
  }
}

/** One line per task in a recovery plan: the event resume() dispatches, or why it leaves the task alone. */
function planLines(plan: RecoveryPlan): { taskId: string; kind: string; text: string }[] {
  return [
    ...plan.events.map((event) => ({ taskId: event.taskId, kind: event.type, text: describeEvent(event) })),
    ...plan.blocked.map((b) => ({ taskId: b.taskId, kind: "blocked", text: `blocked: ${b.reason}` })),
    ...plan.sleeping.map((s) => ({
      taskId: s.taskId,
      kind: "sleeping",
      text: `keep sleeping until ${formatTime(s.until)}`,
    })),
    ...(plan.awaiting ?? []).map((a) => ({
      taskId: a.taskId,
      kind: "awaiting",
      text:
        `keep waiting for ${a.mode === "all" ? "all of" : "any of"} ${a.keys.join(", ")}` +
        (a.received.length > 0 ? ` (received ${a.received.join(", ")})` : "") +
        (a.until !== undefined ? ` until ${formatTime(a.until)}` : " (no deadline)"),
    })),
  ];
}

/** Runnable-now and next wake time derived from the view, and the recovery preview. */
export function WakeView(props: {
  view: SessionView;
  preview: RecoveryPlan | undefined;
  canPreview: boolean;
  isLatest: boolean;
}) {
  const wake = wakeOfView(props.view);
  return (
    <div data-testid="wake">
      <h3>Wake info</h3>
      <p>
        Runnable now:{" "}
        <strong data-testid="runnable">{wake.runnable.length ? wake.runnable.join(", ") : "nothing"}</strong>
        <br />
        Next wake-up: <strong data-testid="next-wake">{formatTime(wake.nextWakeAt)}</strong>
      </p>
      <h3>Recovery preview</h3>
      {!props.isLatest ? (
        <p class="empty">Scrub to the latest version to preview recovery.</p>
      ) : !props.canPreview ? (
        <p class="empty">Not available: a local session needs the app's registry to preview recovery.</p>
      ) : props.preview === undefined ? (
        <p class="empty">Loading…</p>
      ) : planLines(props.preview).length === 0 ? (
        <p data-testid="recovery-empty">Nothing to recover: no unfinished task.</p>
      ) : (
        <>
          <p class="hint">
            What resume() would do now if this session is not running (for a running one, what a new leader
            would do).
          </p>
          <ul data-testid="recovery">
            {planLines(props.preview).map((line) => (
              <li key={`${line.taskId}:${line.kind}`} data-task={line.taskId} data-kind={line.kind}>
                <code>{line.taskId}</code>: {line.text}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
