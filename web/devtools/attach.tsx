/**
 * Attaching the devtools to a session: the form (a local database or an edge, its session listed on
 * request), the sessions this origin holds, opening a saved history file, and saving one.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type { SessionHistory } from "./history.ts";
import {
  type ExportedHistory,
  edgeSessions,
  exportHistory,
  localSessions,
  parseExportedHistory,
  type SessionSource,
} from "./sources.ts";

/** What the page attaches to: a local session, an edge session, or a saved history file. */
export type Target =
  | { kind: "local"; database: string; session: string }
  | { kind: "edge"; url: string; token: string; session: string }
  | { kind: "file"; name: string; history: ExportedHistory };

/** Opens a history file saved with Export (read-only, nothing live); a file that is not one says why. */
export function ImportFile(props: {
  onAttach: (target: Target) => void;
  onError: (message: string) => void;
}) {
  return (
    <label class="import">
      Open a saved history{" "}
      <input
        type="file"
        accept=".json,application/json"
        data-testid="import"
        onChange={async (event) => {
          const file = event.currentTarget.files?.[0];
          if (!file) return;
          try {
            props.onAttach({
              kind: "file",
              name: file.name,
              history: parseExportedHistory(await file.text()),
            });
          } catch (error) {
            props.onError(`${file.name}: ${(error as Error).message}`);
          }
        }}
      />
    </label>
  );
}

/** Saves the attached session's history (its base and every change held) as a JSON file. */
export function exportFile(source: SessionSource, history: SessionHistory): void {
  const saved = exportHistory(source.label, history.base, history.commits, Date.now());
  const blob = new Blob([JSON.stringify(saved)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `${history.base.id}-v${history.latest.version}.durable-agent.json`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

export function AttachForm(props: { onAttach: (target: Target) => void; initial: Target | undefined }) {
  const [kind, setKind] = useState<"local" | "edge">(props.initial?.kind === "edge" ? "edge" : "local");
  const form = useRef<HTMLFormElement>(null);
  // The edge's sessions for the typed token (`GET /sessions`), once asked for.
  const [listed, setListed] = useState<
    { url: string; token: string; ids: string[] | undefined } | { error: string } | undefined
  >(undefined);
  const listEdge = () => {
    const data = new FormData(form.current ?? undefined);
    const url = String(data.get("url") ?? "").trim();
    const token = String(data.get("token") ?? "").trim();
    setListed(undefined);
    edgeSessions(url, token).then(
      (ids) => setListed({ url, token, ids }),
      (error: unknown) => setListed({ error: (error as Error).message }),
    );
  };
  return (
    <div class="attach-area">
      <form
        ref={form}
        class="attach"
        onSubmit={(event) => {
          event.preventDefault();
          const data = new FormData(event.currentTarget);
          const value = (name: string) => String(data.get(name) ?? "").trim();
          props.onAttach(
            kind === "local"
              ? { kind, database: value("database"), session: value("session") }
              : { kind, url: value("url"), token: value("token"), session: value("session") },
          );
        }}
      >
        <select
          aria-label="source"
          value={kind}
          onChange={(e) => setKind(e.currentTarget.value as "local" | "edge")}
        >
          <option value="local">local (IndexedDB, this origin)</option>
          <option value="edge">edge (HTTP API)</option>
        </select>
        {kind === "local" ? (
          <input
            name="database"
            aria-label="database"
            placeholder="database"
            defaultValue={props.initial?.kind === "local" ? props.initial.database : "durable-agent-demo"}
          />
        ) : (
          <>
            <input
              name="url"
              aria-label="base URL"
              placeholder="https://…"
              defaultValue={props.initial?.kind === "edge" ? props.initial.url : ""}
            />
            <input
              name="token"
              aria-label="token"
              type="password"
              placeholder="bearer token"
              defaultValue={props.initial?.kind === "edge" ? props.initial.token : ""}
            />
          </>
        )}
        <input
          name="session"
          aria-label="session id"
          placeholder="session id"
          defaultValue={props.initial?.kind === "file" ? "" : (props.initial?.session ?? "support-42")}
        />
        <button type="submit">Attach (read-only)</button>
        {kind === "edge" && (
          <button type="button" onClick={listEdge}>
            List its sessions
          </button>
        )}
      </form>
      {listed && "error" in listed && (
        <p class="error" role="alert" data-testid="edge-sessions-error">
          Could not list the edge's sessions: {listed.error}
        </p>
      )}
      {listed && "ids" in listed && listed.ids === undefined && (
        <p class="empty" data-testid="edge-sessions-unlisted">
          This edge does not list its sessions (no GET /sessions): type a session id.
        </p>
      )}
      {listed && "ids" in listed && listed.ids !== undefined && (
        <section class="session-list" aria-labelledby="edge-sessions-heading">
          <h2 id="edge-sessions-heading">Sessions at this edge you may read</h2>
          {listed.ids.length === 0 ? (
            <p class="empty" data-testid="edge-no-sessions">
              None for this token.
            </p>
          ) : (
            <ul data-testid="edge-session-list">
              {listed.ids.map((id) => (
                <li key={id}>
                  <button
                    type="button"
                    onClick={() =>
                      props.onAttach({ kind: "edge", url: listed.url, token: listed.token, session: id })
                    }
                  >
                    {id}
                  </button>
                </li>
              ))}
            </ul>
          )}
        </section>
      )}
    </div>
  );
}

/** The sessions this origin holds, each one click from being attached (nothing is opened for writing). */
export function SessionList(props: { onAttach: (target: Target) => void }) {
  const [sessions, setSessions] = useState<{ database: string; session: string }[] | undefined>(undefined);
  useEffect(() => {
    localSessions()
      .then(setSessions)
      .catch(() => setSessions([]));
  }, []);
  if (sessions === undefined) return <p class="empty">Looking for sessions on this origin…</p>;
  if (sessions.length === 0)
    return (
      <p class="empty" data-testid="no-sessions">
        No session on this origin. Attach to an edge session above, or run an app on this origin first.
      </p>
    );
  return (
    <section class="session-list" aria-labelledby="sessions-heading">
      <h2 id="sessions-heading">Sessions on this origin</h2>
      <ul data-testid="session-list">
        {sessions.map((s) => (
          <li key={`${s.database}/${s.session}`}>
            <button type="button" onClick={() => props.onAttach({ kind: "local", ...s })}>
              {s.session}
            </button>{" "}
            <span class="meta">in IndexedDB “{s.database}”</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
