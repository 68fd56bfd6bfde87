/** Wake & recovery: what is runnable now, the next timed wake-up, and what resume() would do. */

import type { RecoveryEvent, RecoveryPlan, SessionView } from "../../src/index.ts";
import { formatTime, wakeOfView } from "./derive.ts";
import { counted } from "./words.ts";

function describeEvent(event: RecoveryEvent): string {
  switch (event.type) {
    case "restarted":
      return `re-enter phase “${event.phase}” (counted restart)${event.detail ? ` — ${event.detail}` : ""}`;
    case "started":
      return `start phase “${event.phase}”${event.detail ? ` — ${event.detail}` : ""}`;
    case "restart-limit":
      return `fail: restart limit reached in phase “${event.phase}” (${counted(event.restarts, "restart")})`;
    case "join-rechecked":
      return `re-check its join (${counted(event.open, "child", "children")} still open)`;
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
  /** The plan, and the version it was asked at. */
  preview: { plan: RecoveryPlan; version: number } | undefined;
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
      ) : planLines(props.preview.plan).length === 0 ? (
        <p data-testid="recovery-empty" data-version={props.preview.version}>
          Nothing to recover: no unfinished task (as of v{props.preview.version}).
        </p>
      ) : (
        <>
          <p class="hint">
            What resume() would do now if this session is not running (for a running one, what a new leader
            would do), as of v{props.preview.version}.
          </p>
          <ul data-testid="recovery" data-version={props.preview.version}>
            {planLines(props.preview.plan).map((line) => (
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
