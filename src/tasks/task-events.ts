/**
 * Every state a task and a Submission can be in, every event that moves them, and which event applies to
 * which state: the one place to learn the task machine (DESIGN §3, §4). `machine.ts` applies them.
 *
 * A task is in one of these states (`task.state.status`):
 * - `running`    — its phase `checkpoint.phase` runs (or is about to, after a restart);
 * - `pending`    — its phase `checkpoint.phase` has not started: it waits for its exclusive key (another
 *                  phase of `exclusiveKey` runs), and starts when that one ends, or on resume — never
 *                  counted as a restart, since nothing of it ran (older versions stored it too);
 * - `sleeping`   — until `state.until`, then runs `checkpoint.phase`;
 * - `waiting`    — for owned children under a join policy, then runs `state.thenPhase`;
 * - `awaiting`   — for signals from outside (`state.keys`), then runs `state.thenPhase`, or at
 *                  `state.deadline.at` runs `state.deadline.phase`;
 * - `completing` — its own work ended with an outcome; owned children are winding down;
 * - `succeeded` | `failed` | `cancelled` — terminal: never changes again.
 *
 * A Submission is `accepted` → `running` (its root task exists) → `succeeded | failed | cancelled`, ended
 * by its root task's end in the same commit.
 *
 * What moves them is a {@link TaskEvent}, applied by `dispatch` on the kernel's draft of a commit.
 * The scheduler decides only *when* an event happens (a phase returned, a sleeper is due); recovery plans
 * events; hosts and apps reach the machine only through the session's methods. An event that does not
 * apply to the current state is refused with a typed error and changes nothing: see {@link APPLIES_TO}.
 */
import type { ErrorInfo, Json, Signal, TaskStatus } from "../records/schemas.ts";
import { TERMINAL_STATUSES } from "../records/schemas.ts";
import type { Transition } from "./define-task.ts";

/**
 * What a Submission's root task does when an earlier Submission of its conversation is unfinished: wait
 * for it (`queue`), cancel it and then start (`interrupt`), or wait while the running turn reads its
 * message (`steer`). See `follow-up.ts`.
 */
export type FollowUp = "queue" | "interrupt" | "steer";

/** What a new task needs. */
export interface TaskSpec {
  readonly id: string;
  readonly kind: string;
  readonly input: Json;
  readonly parentId?: string;
  readonly submissionId?: string;
  readonly conversationId?: string;
  /** Start in this phase (default the kind's first) with this checkpoint data. */
  readonly phase?: string;
  readonly data?: Json;
  /** The id was chosen by an app or a phase, not generated: looked up in storage too (`chosen-ids.ts`). */
  readonly chosenId?: boolean;
}

/** A Submission being accepted: its user entry is already staged at `entrySeq`. */
export interface NewSubmission {
  readonly id: string;
  readonly requestId: string;
  readonly conversationId: string;
  readonly input: Json;
  readonly entrySeq: number;
  /** The root task the registry starts for it, created in the same commit. */
  readonly root?: {
    readonly taskId: string;
    readonly kind: string;
    readonly input: Json;
    /** What it does when an earlier Submission of its conversation is unfinished (default `queue`). */
    readonly followUp?: FollowUp;
  };
  /**
   * Accepted already cancelled, for this reason: its root task ends `cancelled` in the same commit, never
   * run, and it does not take its conversation's turn (it neither queues nor interrupts anything).
   */
  readonly cancelled?: string;
}

/**
 * What recovery does to one unfinished task on resume (DESIGN §4); `planRecovery` lists them, and the
 * recovery preview is that list.
 */
export type RecoveryEvent =
  /** sleeping → running: a sleeper whose time has come runs its phase (also the scheduler's timer). */
  | { readonly type: "woke"; readonly taskId: string; readonly phase: string }
  /** awaiting → running in its deadline phase, with the signals that arrived in time (also the timer's). */
  | { readonly type: "deadline-passed"; readonly taskId: string; readonly phase: string }
  /** pending → running: starts its phase (not a restart). */
  | { readonly type: "started"; readonly taskId: string; readonly phase: string; readonly detail?: string }
  /** running → running: a phase a dead process was running is re-entered from its start, `restarts` + 1. */
  | {
      readonly type: "restarted";
      readonly taskId: string;
      readonly phase: string;
      /** What re-entering will do, from the kind's `describeRecovery`. */
      readonly detail?: string;
    }
  /**
   * Cut off more often than the kind allows, so no crash loop: running → running in `settleIn` (the kind's
   * `onRestartLimit` phase, which learns the outcome without repeating the work), or → failed
   * (`restart-limit`) when the kind has none or it was that phase that kept being cut off.
   */
  | {
      readonly type: "restart-limit";
      readonly taskId: string;
      readonly phase: string;
      readonly restarts: number;
      readonly settleIn?: string;
      readonly detail?: string;
    }
  /**
   * waiting → running (join satisfied) or failed (failFast, a child failed); completing → its stored
   * outcome once no owned child is open; otherwise unchanged.
   */
  | { readonly type: "join-rechecked"; readonly taskId: string; readonly open: number }
  /** Any unfinished state, unchanged: the task's input and checkpoint are migrated to a newer kind version. */
  | {
      readonly type: "migrated";
      readonly taskId: string;
      readonly from: number;
      readonly to: number;
      readonly input: Json;
      readonly checkpoint: { readonly phase: string; readonly data: Json };
    };

/**
 * Every way a task or Submission changes. A task that ends (succeeded, failed, cancelled) with owned
 * children still open goes to `completing` first (asking them to stop unless it succeeded), and becomes
 * terminal with the last of them; a root task's end ends its Submission; a child's end is a `child-ended`
 * event for its parent — all in the same commit.
 */
export type TaskEvent =
  /** A new task, running in its first (or the given) phase. Refused: unknown kind, bad input, used id. */
  | { readonly type: "spawn"; readonly task: TaskSpec }
  /** A new Submission: `accepted`, or `running` with its root task. Refused: id or requestId taken. */
  | { readonly type: "submission-accepted"; readonly submission: NewSubmission }
  /** Cancels the Submission's task tree, or ends it `cancelled` when it has no task; ended: unchanged. */
  | { readonly type: "submission-cancel-requested"; readonly submissionId: string; readonly reason: string }
  /**
   * A signal from outside, its payload already validated: stored, and taken by the task awaiting its key
   * (awaiting → running in `thenPhase` once its wait is met). Nobody awaits it yet: it is kept, and taken by
   * the wait that names its key when that begins. Refused: the key already has a signal.
   */
  | { readonly type: "signal-received"; readonly signal: Signal }
  /**
   * running → what the phase returned: `next` running, `sleep` sleeping, `wait` waiting (or on at once if
   * the join is already due), `complete` succeeded, `fail` failed. A cancel requested meanwhile wins over
   * anything but `complete` (and over a `fail` its abort caused). `aborted`: the phase's signal had fired.
   */
  | {
      readonly type: "phase-ended";
      readonly taskId: string;
      readonly transition: Transition;
      readonly aborted: boolean;
    }
  /**
   * running → pending: its phase did not start, because another phase of its exclusive key runs. Stored,
   * so a process that dies meanwhile leaves a task that never ran, not one cut off (`started` runs it). A
   * task asked to stop whose phase never ran (no restart counted) is cancelled instead.
   */
  | { readonly type: "queued"; readonly taskId: string }
  /** running → failed: what the phase staged or returned does not validate. */
  | { readonly type: "phase-failed"; readonly taskId: string; readonly error: ErrorInfo }
  /**
   * Records the intent (`cancelRequested`). running: stays running, its phase is signalled and its end is
   * then a cancellation; completing: keeps its outcome (a failure stays one), its children are asked to
   * stop; any other unfinished state → cancelled (children asked to stop first); ended: unchanged.
   */
  | { readonly type: "cancel-requested"; readonly taskId: string; readonly reason: string }
  /** An owned child became terminal: a waiting or completing parent re-checks its join (see above). */
  | { readonly type: "child-ended"; readonly taskId: string; readonly childId: string }
  | RecoveryEvent;

/** The events about one existing task. */
export type TaskTargetEvent = Exclude<
  TaskEvent,
  | { type: "spawn" }
  | { type: "submission-accepted" }
  | { type: "submission-cancel-requested" }
  | { type: "signal-received" }
>;

const ALL_STATUSES: readonly TaskStatus[] = [
  "pending",
  "running",
  "sleeping",
  "waiting",
  "awaiting",
  "completing",
  "succeeded",
  "failed",
  "cancelled",
];
const UNFINISHED = ALL_STATUSES.filter((status) => !TERMINAL_STATUSES.has(status));

/**
 * Which task statuses each event applies to; any other is refused. `cancel-requested` and `child-ended`
 * apply to every status but change nothing on a task that has already ended.
 */
export const APPLIES_TO: { readonly [T in TaskTargetEvent["type"]]: readonly TaskStatus[] } = {
  "phase-ended": ["running", "pending"],
  "phase-failed": ["running", "pending"],
  "cancel-requested": ALL_STATUSES,
  "child-ended": ALL_STATUSES,
  woke: ["sleeping"],
  "deadline-passed": ["awaiting"],
  started: ["pending"],
  queued: ["running"],
  restarted: ["running"],
  "restart-limit": ["running"],
  "join-rechecked": ["waiting", "completing"],
  migrated: UNFINISHED,
};
