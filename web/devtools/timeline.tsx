/** The commit timeline: every commit, newest first, with what it changed and what recovery did in it. */

import { useMemo, useState } from "preact/hooks";
import type { CommitRecord } from "../../src/index.ts";
import { describeCommit, describeSignals, formatTime } from "./derive.ts";
import type { RecoveryMark } from "./outcome.ts";
import { VirtualList } from "./virtual-list.tsx";
import { counted } from "./words.ts";

/**
 * Every commit, newest first, with what it changed, the signals it took in, handed to a wait or dropped
 * (an approval: its key, who sent it, its payload, the task it answered), and what recovery did in it (the
 * recovery lane: new writers and the gap before them, counted restarts, confirmations, interrupted records)
 * — each linked to its task; a click scrubs to it. "Recovery only" and "signals only" keep the commits
 * that carry such marks (either, when both are checked).
 */
export function TimelineView(props: {
  commits: readonly CommitRecord[];
  version: number;
  recovery: ReadonlyMap<number, readonly RecoveryMark[]>;
  onScrub: (version: number) => void;
  onTask: (taskId: string) => void;
  /** `problemsBelow` of the tasks known now: a commit's "succeeded" says when tool calls under it did not. */
  below?: ReadonlyMap<string, ReadonlyMap<string, number>>;
}) {
  const [onlyRecovery, setOnlyRecovery] = useState(false);
  const [onlySignals, setOnlySignals] = useState(false);
  const withSignals = useMemo(() => props.commits.filter(hasSignals).length, [props.commits]);
  const newestFirst = useMemo(() => {
    const pool =
      onlyRecovery || onlySignals
        ? props.commits.filter(
            (c) => (onlyRecovery && props.recovery.has(c.version)) || (onlySignals && hasSignals(c)),
          )
        : props.commits;
    return [...pool].reverse();
  }, [props.commits, props.recovery, onlyRecovery, onlySignals]);
  return (
    <>
      <label class="filter">
        <input
          type="checkbox"
          data-testid="recovery-only"
          checked={onlyRecovery}
          onChange={(e) => setOnlyRecovery(e.currentTarget.checked)}
        />{" "}
        recovery only ({counted(props.recovery.size, "commit")})
      </label>{" "}
      <label class="filter">
        <input
          type="checkbox"
          data-testid="signals-only"
          checked={onlySignals}
          onChange={(e) => setOnlySignals(e.currentTarget.checked)}
        />{" "}
        signals only ({counted(withSignals, "commit")})
      </label>
      <VirtualList
        items={newestFirst}
        as="ol"
        list={{ class: "timeline", "data-testid": "timeline" }}
        label={`${counted(newestFirst.length, "commit")}, newest first`}
        keyOf={(change) => change.version}
        numberOf={(change) => change.version}
        estimate={(change) =>
          26 +
          19 *
            (change.submissions.length +
              change.entries.length +
              change.tasks.length +
              change.documents.length) +
          22 * (props.recovery.get(change.version)?.length ?? 0) +
          22 * ((change.signals?.length ?? 0) + (change.droppedSignals?.length ?? 0))
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
            {hasSignals(change) && (
              <ul class="signal-lines" data-testid="commit-signals">
                {describeSignals(change).map((line) => (
                  <li key={`${line.kind}:${line.key}`} data-kind={line.kind} data-key={line.key}>
                    <span class="tag">{line.kind === "dropped" ? "signal dropped" : "signal"}</span>{" "}
                    {line.text}
                    {line.taskId && (
                      <>
                        {" "}
                        <button type="button" class="link" onClick={() => props.onTask(line.taskId ?? "")}>
                          show task
                        </button>
                      </>
                    )}
                  </li>
                ))}
              </ul>
            )}
            <ul>
              {describeCommit(change, props.below).map((line) => (
                <li key={line}>{line}</li>
              ))}
            </ul>
          </>
        )}
      />
    </>
  );
}

/** Whether a commit took in, handed over or dropped a signal. */
const hasSignals = (change: CommitRecord) =>
  (change.signals?.length ?? 0) + (change.droppedSignals?.length ?? 0) > 0;
