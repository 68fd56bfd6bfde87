/** The devtools views of one session version: submissions, conversation, documents. */

import { useMemo, useState } from "preact/hooks";
import {
  diffJson,
  type Entry,
  isSubmissionFinished,
  type SessionView,
  type Submission,
} from "../../src/index.ts";
import { formatTime } from "./derive.ts";
import type { SessionHistory } from "./history.ts";
import { JsonView } from "./json-view.tsx";
import { submissionOutcome } from "./outcome.ts";
import type { SessionSource } from "./session-source.ts";
import { treeOf } from "./tree.ts";
import { VirtualList } from "./virtual-list.tsx";
import { counted } from "./words.ts";

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
    usage?.rounds !== undefined ? counted(usage.rounds, "round") : undefined,
    counted(tools, "tool call"),
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
          ({entries.length} of {counted(conversation.entryCount, "entry", "entries")} shown)
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
