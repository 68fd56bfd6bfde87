/**
 * Waits on the outside world (DESIGN §4): how the task machine starts a wait on signal keys, hands it a
 * signal, and ends it at its deadline. A wait ends exactly once — by its signals, its deadline or a
 * cancellation — because each of those is a task-machine event that applies only to an `awaiting` task. A
 * signal that came first is stored and taken, in the commit that starts the wait.
 */
import type { ErrorInfo, Json, Signal, Task } from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";
import { isInternalKey, unnamableKey } from "../signals/define-signal.ts";
import { dropExpired } from "../signals/keep-early.ts";
import type { Received, Transition } from "./define-task.ts";
import { taskError } from "./error-info.ts";

/** The machine's own moves the wait logic uses (passed in: the machine owns them). */
export interface AwaitMoves {
  reenter(draft: KernelDraft, task: Task, phase: string, data: Json): void;
  fail(draft: KernelDraft, task: Task, error: ErrorInfo): void;
  cancel(draft: KernelDraft, task: Task, reason: string): void;
}

/** The data of an awaiting task: what its phase passed, and the payloads received so far. */
function awaited(task: Task): Received {
  const data = task.checkpoint.data as Partial<Received> | null;
  return { data: data?.data ?? null, signals: data?.signals ?? {} };
}

/** Whether the awaiting `task` already took a signal of `key` (an `all` wait that needs more keys). */
export function hasReceived(task: Task, key: string): boolean {
  return task.state.status === "awaiting" && Object.hasOwn(awaited(task).signals, key);
}

/** A phase ended with `waitFor`: the task awaits its keys, taking at once any signal already stored for them. */
export function startAwaiting(
  draft: KernelDraft,
  task: Task,
  wait: Extract<Transition, { type: "await" }>,
  moves: AwaitMoves,
): void {
  const unknown = wait.keys.find((key) => !draft.registry.signalFor(key));
  if (unknown !== undefined) {
    moves.fail(
      draft,
      task,
      taskError(
        "unknown-signal",
        unnamableKey(unknown) ?? `no signal is defined for key "${unknown}" (defineSignal)`,
      ),
    );
    return;
  }
  const taken = awaiterOfAny(draft, wait.keys, task.id);
  if (taken) {
    const message = `key "${taken.key}" is already awaited by task ${taken.task}`;
    moves.fail(draft, task, taskError("key-taken", message));
    return;
  }
  const waiting: Task = {
    ...task,
    state: {
      status: "awaiting",
      keys: [...new Set(wait.keys)], // a key named twice is one key
      mode: wait.mode,
      thenPhase: wait.thenPhase,
      since: draft.at,
      ...(wait.deadline && { deadline: wait.deadline }),
      ...(wait.about !== undefined && { about: wait.about }),
    },
    checkpoint: { phase: wait.thenPhase, data: { data: wait.data, signals: {} } as unknown as Json },
    restarts: 0,
    updatedAt: draft.at,
  };
  draft.writeTask(waiting);
  // Early signals: stored before anyone waited for their key, taken now, in this same commit — but one whose
  // `keepEarlyMs` ran out before its drop was committed (a late timer, a process that was down) is dropped.
  dropExpired(draft, wait.keys, draft.at);
  let current = waiting;
  for (const key of wait.keys) {
    const early = draft.signal(key);
    if (early && early.consumedBy === undefined) current = take(draft, current, early, moves) ?? current;
    if (current.state.status !== "awaiting") return;
  }
}

/** A new signal, accepted: stored, and taken by the wait that names its key, if one does. */
export function receiveSignal(draft: KernelDraft, signal: Signal, moves: AwaitMoves): void {
  draft.signalWrites.write(signal);
  const waiting = draft.awaiter(signal.key);
  if (waiting) take(draft, waiting, signal, moves);
}

/** The deadline of an awaiting task passed: it continues in its deadline phase with what arrived in time. */
export function passDeadline(draft: KernelDraft, task: Task, moves: AwaitMoves): void {
  if (task.state.status !== "awaiting" || !task.state.deadline) return;
  moves.reenter(draft, task, task.state.deadline.phase, awaited(task) as unknown as Json);
}

/** Gives `signal` to the awaiting `task`; it goes on if its wait is met. Returns the task as written. */
function take(draft: KernelDraft, task: Task, signal: Signal, moves: AwaitMoves): Task | undefined {
  if (task.state.status !== "awaiting") return undefined;
  draft.signalWrites.write({ ...signal, consumedBy: task.id, consumedAt: draft.at });
  const received = awaited(task);
  const signals = { ...received.signals, [signal.key]: signal.payload };
  const data = { data: received.data, signals } as unknown as Json;
  const met = task.state.mode === "any" || task.state.keys.every((key) => key in signals);
  if (met) {
    // A kernel-internal wait (a queued turn) continues with its checkpoint as it was, not the signal.
    const next = isInternalKey(signal.key) ? (received.data as Json) : data;
    moves.reenter(draft, task, task.state.thenPhase, next);
    return draft.task(task.id);
  }
  const updated: Task = { ...task, checkpoint: { ...task.checkpoint, data }, updatedAt: draft.at };
  draft.writeTask(updated);
  return updated;
}

/** The first of `keys` another task than `except` already awaits, and that task. */
function awaiterOfAny(
  draft: KernelDraft,
  keys: readonly string[],
  except: string,
): { key: string; task: string } | undefined {
  for (const key of keys) {
    const task = draft.awaiter(key);
    if (task && task.id !== except) return { key, task: task.id };
  }
  return undefined;
}

/**
 * An awaiting task waits on `keys` instead, for `about` (the kernel's own turn keys: a queued turn whose turn
 * before it was cancelled waits for the one before that).
 */
export function moveWait(draft: KernelDraft, task: Task, keys: readonly string[], about: Json): void {
  if (task.state.status !== "awaiting") return;
  draft.writeTask({ ...task, state: { ...task.state, keys: [...keys], about }, updatedAt: draft.at });
}
