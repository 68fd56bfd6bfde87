/** The commit timeline: every commit, newest first, with what it changed and what recovery did in it. */

import { useMemo, useState } from "preact/hooks";
import type { CommitRecord } from "../../src/index.ts";
import { describeCommit, formatTime } from "./derive.ts";
import type { RecoveryMark } from "./outcome.ts";
import { VirtualList } from "./virtual-list.tsx";

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
