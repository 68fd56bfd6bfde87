/** The context a phase runs with: reads of committed state, staging for its commit, and transition builders. */
import type { Clock, IdSource, Timers } from "../clock.ts";
import type {
  Conversation,
  Entry,
  EntryContent,
  ErrorInfo,
  Json,
  PatchOperation,
  SummaryFields,
  Task,
  TokenUsage,
} from "../records/schemas.ts";
import type { KernelDraft } from "../session/draft.ts";
import type { EntryLinks, ProgressDraft } from "../session/draft-types.ts";
import type { DocumentState, StateReader } from "../session/state.ts";
import type {
  AnyPhaseData,
  JoinPolicy,
  PhaseContext,
  PhaseName,
  SpawnOptions,
  Transition,
  WaitForOptions,
} from "./define-task.ts";
import { errorInfo } from "./error-info.ts";
import { dispatch } from "./machine.ts";
import type { Preview } from "./preview.ts";

/** A change a phase staged, applied to the kernel's draft of its transition's commit. */
export type StagedChange = (draft: KernelDraft) => void;

/** What the context needs from the scheduler besides committed state. */
export interface PhaseHost {
  readEntries(conversationId: string, fromSeq: number): Promise<Entry[]>;
  progress(build: (draft: ProgressDraft) => void): void;
  preview(preview: Preview): void;
  /** `signal` is a getter: the phase's AbortController is made only for a gate that looks at it. */
  beforeEffect(signal: () => AbortSignal): Promise<void>;
  readonly hostKind?: "browser" | "edge";
  readonly timers: Timers;
}

/**
 * The context of one phase run. Its data types are erased here (the phase code sees its definition's own
 * types through {@link PhaseContext}); what it stages is applied on the kernel's draft of the phase's commit.
 */
export class PhaseContextImpl implements PhaseContext<unknown, AnyPhaseData, string> {
  readonly staged: StagedChange[] = [];
  readonly phase: string;
  readonly data: Json;
  readonly attempt: number;
  readonly restarts: number;

  constructor(
    readonly task: Task,
    readonly input: unknown,
    /** The phase's abort (its AbortController is made only when `signal` is read). */
    private readonly stop: { readonly signal: AbortSignal; readonly aborted: boolean },
    readonly clock: Clock,
    private readonly state: StateReader,
    private readonly ids: IdSource,
    private readonly host: PhaseHost,
  ) {
    this.phase = task.checkpoint.phase;
    this.data = task.checkpoint.data;
    this.attempt = task.attempts;
    this.restarts = task.restarts;
  }

  get signal(): AbortSignal {
    return this.stop.signal;
  }
  get aborted(): boolean {
    return this.stop.aborted;
  }
  get timers(): Timers {
    return this.host.timers;
  }
  get hostKind(): "browser" | "edge" | undefined {
    return this.host.hostKind;
  }
  document(id: string): DocumentState | undefined {
    return this.state.document(id);
  }
  conversation(id: string): Conversation | undefined {
    return this.state.conversation(id);
  }
  conversationEntries(conversationId: string, fromSeq = 0): Promise<Entry[]> {
    return this.host.readEntries(conversationId, fromSeq);
  }
  progress(build: (draft: ProgressDraft) => void): void {
    this.host.progress(build);
  }
  preview(preview: Preview): void {
    this.host.preview(preview);
  }
  beforeEffect(): Promise<void> {
    return this.host.beforeEffect(() => this.stop.signal);
  }
  children(): Task[] {
    return this.state.ownedChildren(this.task.id).flatMap((id) => this.state.task(id) ?? []);
  }
  child(id: string): Task | undefined {
    const task = this.state.task(id);
    return task?.parentId === this.task.id ? task : undefined;
  }
  isBelow(taskId: string): boolean {
    let parent = this.state.task(taskId)?.parentId;
    while (parent !== undefined) {
      if (parent === this.task.id) return true;
      parent = this.state.task(parent)?.parentId;
    }
    return false;
  }
  descendants(): Set<string> {
    const found = new Set<string>();
    const queue = [this.task.id];
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      for (const id of this.state.ownedChildren(next)) {
        found.add(id);
        queue.push(id);
      }
    }
    return found;
  }

  appendEntry(conversationId: string, content: EntryContent, links?: EntryLinks): void {
    this.staged.push((draft) =>
      draft.appendEntry(conversationId, content, { taskId: this.task.id, ...links }),
    );
  }
  appendSummary(conversationId: string, text: string, coversThroughSeq: number, usage?: TokenUsage): void {
    const summary: SummaryFields = { text, coversThroughSeq, ...(usage && { usage: { ...usage } }) };
    this.staged.push((draft) => draft.appendSummary(conversationId, summary, { taskId: this.task.id }));
  }
  setDocument(id: string, type: string, value: Json): void {
    this.staged.push((draft) => draft.setDocument(id, type, value));
  }
  patchDocument(id: string, patch: readonly PatchOperation[]): void {
    this.staged.push((draft) => draft.patchDocument(id, patch));
  }
  deleteDocument(id: string): void {
    this.staged.push((draft) => draft.deleteDocument(id));
  }
  spawn(kind: string, input: Json, options: SpawnOptions = {}): string {
    const id = options.id ?? this.ids.next("task");
    const parent = this.task;
    this.staged.push((draft) =>
      dispatch(draft, {
        type: "spawn",
        task: {
          id,
          kind,
          input,
          parentId: parent.id,
          ...(parent.submissionId !== undefined && { submissionId: parent.submissionId }),
          ...(parent.conversationId !== undefined && { conversationId: parent.conversationId }),
          ...(options.phase !== undefined && { phase: options.phase, data: options.data ?? null }),
          // One scoped by its parent's id ("<parent>/…", as the agent's tool calls are) is unique already.
          ...(options.id !== undefined && !options.id.startsWith(`${parent.id}/`) && { chosenId: true }),
        },
      }),
    );
    return id;
  }

  next<Q extends PhaseName<AnyPhaseData>>(phase: Q, data: Json = null): Transition {
    return { type: "next", phase, data };
  }
  sleep<Q extends PhaseName<AnyPhaseData>>(until: number, phase: Q, data: Json = null): Transition {
    return { type: "sleep", until, phase, data };
  }
  wait<Q extends PhaseName<AnyPhaseData>>(
    children: readonly string[],
    options: { policy: JoinPolicy; next: Q },
    data: Json = null,
  ): Transition {
    return { type: "wait", children, policy: options.policy, thenPhase: options.next, data };
  }
  waitFor<Q extends PhaseName<AnyPhaseData>>(
    keys: string | readonly string[],
    options: WaitForOptions<Q>,
    data: Json = null,
  ): Transition {
    return {
      type: "await",
      keys: typeof keys === "string" ? [keys] : [...keys],
      mode: options.mode ?? "any",
      thenPhase: options.next,
      ...(options.deadline && { deadline: { at: options.deadline.at, phase: options.deadline.next } }),
      ...(options.about !== undefined && { about: options.about }),
      data,
    };
  }
  complete(result: Json = null): Transition {
    return { type: "complete", result };
  }
  fail(error: string | Error | ErrorInfo): Transition {
    const info =
      typeof error === "string"
        ? { name: "TaskError", code: "failed", message: error }
        : errorInfo(error, "failed");
    return { type: "fail", error: info };
  }
}
