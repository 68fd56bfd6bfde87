/**
 * The bar above the views: the version slider (Home, End, arrow keys), the version shown and its time, live
 * following, who writes the session, how much of its history is in, and the history's export.
 */
import type { SessionView } from "../../src/index.ts";
import { exportFile } from "./attach.tsx";
import { formatTime } from "./derive.ts";
import type { SessionHistory } from "./history.ts";
import type { SessionSource, WriterState } from "./sources.ts";
import { writerText } from "./writer.ts";

export function ScrubberBar(props: {
  history: SessionHistory;
  view: SessionView;
  latest: number;
  shown: number;
  live: boolean;
  onLive: (live: boolean) => void;
  onScrub: (version: number) => void;
  writer: { state: WriterState; since: number } | undefined;
  open: string | undefined;
  loadingEarlier: boolean;
  connection: "live" | "reconnecting";
  source: SessionSource | undefined;
}) {
  const { history, view, latest, shown, live, writer, open, loadingEarlier, connection, source } = props;
  return (
    <div class="scrubber">
      <label>
        version{" "}
        <input
          type="range"
          aria-label="version"
          data-testid="scrubber"
          min={history.firstVersion}
          max={latest}
          value={shown}
          onInput={(e) => props.onScrub(Number(e.currentTarget.value))}
        />
      </label>
      <span data-testid="version">
        v{view.version} of {latest}
      </span>
      <span class="meta">{formatTime(history.commit(view.version)?.at)}</span>
      <label>
        <input
          type="checkbox"
          data-testid="live"
          checked={live}
          onChange={(e) => props.onLive(e.currentTarget.checked)}
        />{" "}
        live
      </label>
      {writer && (
        <span
          // Drawn as a warning only while open work waits for a writer.
          class={`writer ${writer.state.state}${open === undefined ? " idle" : ""}`}
          role="status"
          data-testid="writer"
          data-state={writer.state.state}
        >
          {writerText(writer.state, writer.since, open)}
        </span>
      )}
      {loadingEarlier && (
        <span class="meta" role="status" data-testid="history-loading">
          reading the history before v{history.firstVersion}…
        </span>
      )}
      {!loadingEarlier && history.firstVersion > 0 && (
        <span class="meta" role="status" data-testid="history-start">
          versions before v{history.firstVersion} cannot be rebuilt (the change log no longer reaches back to
          the session's start): scrubbing starts here; older submissions, entries and task trees are read from
          storage as they are now
        </span>
      )}
      {connection === "reconnecting" && (
        <span class="warning" role="status" data-testid="reconnecting">
          connection lost: reconnecting, newer changes may be missing
        </span>
      )}
      <span class="meta" data-testid="source">
        {source?.label}
      </span>
      {source && (
        <button type="button" data-testid="export" onClick={() => exportFile(source, history)}>
          Export history
        </button>
      )}
    </div>
  );
}
