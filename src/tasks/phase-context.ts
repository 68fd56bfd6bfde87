/** The context a phase runs with: reads of committed state, staging for its commit, and transition builders. */
import type { Clock, IdSource } from "../clock.ts";
import type {
  Conversation,
  Entry,
  EntryContent,
  ErrorInfo,
  Json,
  PatchOperation,
  Task,
} from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { Draft, EntryLinks } from "../session/draft.ts";
import type { DocumentState, StateReader } from "../session/state.ts";
import type { JoinPolicy, PhaseContext, SpawnOptions, Transition } from "./define-task.ts";
import { createTask, errorInfo } from "./transitions.ts";

/** A change a phase staged, applied to the draft of its transition's commit. */
export type StagedChange = (draft: Draft) => void;

export class PhaseContextImpl<Input, Data> implements PhaseContext<Input, Data> {
  readonly staged: StagedChange[] = [];
  readonly phase: string;
  readonly data: Data;
  readonly attempt: number;
  readonly restarts: number;

  constructor(
    readonly task: Task,
    readonly input: Input,
    private readonly signalOf: () => AbortSignal,
    readonly clock: Clock,
    private readonly state: StateReader & { tasks: ReadonlyMap<string, Task> },
    private readonly registry: Registry,
    private readonly ids: IdSource,
    private readonly host: {
      readEntries(conversationId: string, fromSeq: number): Promise<Entry[]>;
      progress(build: StagedChange): void;
    },
  ) {
    this.phase = task.checkpoint.phase;
    this.data = task.checkpoint.data as Data;
    this.attempt = task.attempts;
    this.restarts = task.restarts;
  }

  get signal(): AbortSignal {
    return this.signalOf();
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
  progress(build: StagedChange): void {
    this.host.progress(build);
  }
  children(): Task[] {
    return this.state.ownedChildren(this.task.id).flatMap((id) => this.state.task(id) ?? []);
  }

  appendEntry(conversationId: string, content: EntryContent, links?: EntryLinks): void {
    this.staged.push((draft) =>
      draft.appendEntry(conversationId, content, { taskId: this.task.id, ...links }),
    );
  }
  setDocument(id: string, type: string, value: Json): void {
    this.staged.push((draft) => draft.setDocument(id, type, value));
  }
  patchDocument(id: string, patch: readonly PatchOperation[]): void {
    this.staged.push((draft) => draft.patchDocument(id, patch));
  }
  spawn(kind: string, input: Json, options: SpawnOptions = {}): string {
    const id = options.id ?? this.ids.next("task");
    const parent = this.task;
    this.staged.push((draft) => {
      createTask(draft, this.registry, {
        id,
        kind,
        input,
        parentId: parent.id,
        ...(parent.submissionId !== undefined && { submissionId: parent.submissionId }),
        ...(parent.conversationId !== undefined && { conversationId: parent.conversationId }),
        ...(options.phase !== undefined && { phase: options.phase, data: options.data ?? null }),
      });
    });
    return id;
  }

  next(phase: string, data: Json = null): Transition {
    return { type: "next", phase, data };
  }
  sleep(until: number, phase: string, data: Json = null): Transition {
    return { type: "sleep", until, phase, data };
  }
  wait(
    children: readonly string[],
    options: { policy: JoinPolicy; next: string },
    data: Json = null,
  ): Transition {
    return { type: "wait", children, policy: options.policy, thenPhase: options.next, data };
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
