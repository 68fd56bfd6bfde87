/**
 * Parked waits (DESIGN §9): a task tree started without a Submission whose root awaits outside keys, with
 * nothing else of the tree open, needs nothing until a signal, a cancellation or its deadline. Such a tree
 * is stored apart from the live work (the `parked` index, its keys in `waitKeys`, its deadline in
 * `deadlines`), so opening a session with thousands of them reads only the newest few; the others are read
 * back when one of their keys is signalled, when they are cancelled by id, or when their deadline comes.
 * Parking costs index rows, so only a session with many waits pays it: up to `liveWaits` of them stay live
 * (loaded on open, like any unfinished work), later ones are parked. Which waits a commit parks, and which
 * it moves on, is decided here and written into the commit, so every store and replica keeps the same rows.
 */
import type { ParkedWait, Task } from "../records/schemas.ts";
import { isStandaloneRoot } from "./items.ts";
import type { ParkingReader, StateReader } from "./state.ts";

function parkedWaitOf(task: Task): ParkedWait | undefined {
  if (task.state.status !== "awaiting" || task.createdVersion === undefined || !isStandaloneRoot(task))
    return undefined;
  const at = task.state.deadline?.at;
  return {
    version: task.createdVersion,
    id: task.id,
    keys: [...task.state.keys],
    ...(at !== undefined && { at }),
  };
}

/** The waits `tasks` park (`after` sees the commit's own changes) and the parked waits they move on. */
export function parkingOf(
  tasks: readonly Task[],
  before: StateReader & ParkingReader,
  after: StateReader,
  liveWaits: number,
): { parked?: ParkedWait[]; unparked?: ParkedWait[] } {
  const parked: ParkedWait[] = [];
  const unparked: ParkedWait[] = [];
  let live = before.liveWaits();
  for (const task of tasks) {
    const previous = before.task(task.id);
    const old = previous && before.isParked(task.id) ? parkedWaitOf(previous) : undefined;
    if (old) unparked.push(old);
    const now = parkedWaitOf(task);
    if (!now || after.openChildCount(task.id) > 0) continue;
    // A parked wait stays parked as it takes signals (an `all` wait); a new one parks once enough are live.
    if (old || live >= liveWaits) parked.push(now);
    else live++;
  }
  return { ...(parked.length > 0 && { parked }), ...(unparked.length > 0 && { unparked }) };
}
