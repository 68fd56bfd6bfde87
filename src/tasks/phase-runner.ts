/**
 * Runs one phase of a task outside any commit and returns what it ended with: its transition and what it
 * staged. Knows nothing of when phases run (the scheduler) or how their ends are committed (the machine).
 */
import type { z } from "zod";
import type { Clock, IdSource, Timers } from "../clock.ts";
import { KernelError } from "../errors.ts";
import type { Task } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { StateReader } from "../session/state.ts";
import type { Phase, TaskDefinition, Transition } from "./define-task.ts";
import { hasPhase } from "./define-task.ts";
import { errorInfo, taskError } from "./error-info.ts";
import { PhaseContextImpl, type PhaseHost, type StagedChange } from "./phase-context.ts";

/** How a phase run ended: the transition to commit and what it staged for that commit. */
export interface PhaseOutcome {
  readonly transition: Transition;
  readonly staged: readonly StagedChange[];
}

/** What running a phase needs. */
export interface PhaseRunnerHost extends PhaseHost {
  readonly state: StateReader;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly ids: IdSource;
}

// biome-ignore lint/suspicious/noExplicitAny: definitions of any input and phase data type
type SomeTaskDefinition = TaskDefinition<any, any>;

export class PhaseRunner {
  private readonly parsedInputs = new Map<
    string,
    { version: number; parsed: ReturnType<z.ZodType["safeParse"]> }
  >();

  constructor(private readonly host: PhaseRunnerHost) {}

  /**
   * Runs the task's current phase. A phase that throws ends with a `fail` transition; a stored phase or
   * input the definition does not know ends the same way, naming it.
   */
  async run(task: Task, definition: SomeTaskDefinition, abort: PhaseAbort): Promise<PhaseOutcome> {
    const failure = (code: string, message: string): PhaseOutcome => ({
      transition: { type: "fail", error: taskError(code, message) },
      staged: [],
    });
    if (!hasPhase(definition, task.checkpoint.phase))
      return failure("unknown-phase", `task kind "${task.kind}" has no phase "${task.checkpoint.phase}"`);
    const phase = definition.phases[task.checkpoint.phase] as Phase<unknown>;
    const input = this.parseInput(definition, task);
    if (!input.success)
      return failure("invalid-input", `stored input does not match "${task.kind}": ${input.error.message}`);
    const { state, clock, ids } = this.host;
    const context = new PhaseContextImpl(task, input.data, abort, clock, state, ids, this.host);
    try {
      return { transition: await phase(context), staged: context.staged };
    } catch (error) {
      return { transition: { type: "fail", error: errorInfo(error) }, staged: [] };
    }
  }

  /** A task has ended: its cached input is no longer needed. */
  forget(taskId: string): void {
    this.parsedInputs.delete(taskId);
  }

  /**
   * A task's input only changes by migration (which changes its kind version), so it is parsed once per
   * task and version rather than on every phase of a long chain.
   */
  private parseInput(definition: SomeTaskDefinition, task: Task) {
    const cached = this.parsedInputs.get(task.id);
    if (cached && cached.version === task.kindVersion) return cached.parsed;
    const parsed = definition.input.safeParse(task.input);
    this.parsedInputs.set(task.id, { version: task.kindVersion, parsed });
    return parsed;
  }
}

/** A phase's abort: the AbortController is only made if the phase looks at its signal (most never do). */
export class PhaseAbort {
  private controller: AbortController | undefined;
  private reason: unknown;
  aborted = false;

  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    if (this.aborted && !this.controller.signal.aborted) this.controller.abort(this.reason);
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
  }

  /** Aborts the phase of `task` if its cancel was requested (a phase started after one begins aborted). */
  abortIfCancelled(task: Task): void {
    if (task.cancelRequested !== undefined)
      this.abort(new KernelError("session-closed", `cancelled: ${task.cancelRequested}`));
  }
}
