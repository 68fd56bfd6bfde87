/**
 * The narrow drafts code outside the kernel gets (DESIGN §3, "who may write what"). Each wraps the kernel's
 * draft of one commit and offers only what its role may do, so an app cannot rewrite a task or end a
 * Submission, and a deferred commit cannot carry a critical fact. The wrappers are the boundary at run time
 * too, not only in types: their kernel draft is private.
 */
import type { IdSource } from "../clock.ts";
import { InvalidArgumentError, RefusedWriteError } from "../errors.ts";
import type { Entry, EntryContent, Json, PatchOperation, Submission, Task } from "../records/schemas.ts";
import { dispatch } from "../tasks/machine.ts";
import { taskExists } from "../tasks/refusals.ts";
import type { CommitResult, KernelCommit } from "./commit-pipeline.ts";
import type { KernelDraft } from "./draft.ts";
import type { AppSpawnOptions, BuildCommit, Draft, EntryLinks, ProgressDraft } from "./draft-types.ts";
import type { DocumentState } from "./state.ts";

/** An app's view of a commit's draft: entries, its own documents, and spawns through the task machine. */
export class AppDraft implements Draft {
  readonly #draft: KernelDraft;
  readonly #ids: IdSource;
  /** Task ids the app chose, looked up in storage and found absent (see `commitAsApp`). */
  readonly #absent: ReadonlySet<string>;
  /** Task ids the app chose that neither memory nor `#absent` knows. */
  readonly #unchecked: string[] = [];

  constructor(draft: KernelDraft, ids: IdSource, absent: ReadonlySet<string>) {
    this.#draft = draft;
    this.#ids = ids;
    this.#absent = absent;
  }

  get version(): number {
    return this.#draft.version;
  }
  get at(): number {
    return this.#draft.at;
  }
  conversation(id: string) {
    return this.#draft.conversation(id);
  }
  document(id: string): DocumentState | undefined {
    return this.#draft.document(id);
  }
  task(id: string): Task | undefined {
    return this.#draft.task(id);
  }
  submission(id: string): Submission | undefined {
    return this.#draft.submission(id);
  }
  appendEntry(conversationId: string, content: EntryContent, links?: EntryLinks): Entry {
    return this.#draft.appendEntry(conversationId, content, links);
  }
  setDocument(id: string, type: string, value: Json): void {
    refuseKernelDocument(this.#draft, id, type);
    this.#draft.setDocument(id, type, value);
  }
  patchDocument(id: string, patch: readonly PatchOperation[]): void {
    const type = this.#draft.document(id)?.head.type;
    if (type !== undefined) refuseKernelDocument(this.#draft, id, type);
    this.#draft.patchDocument(id, patch);
  }
  deleteDocument(id: string): void {
    const type = this.#draft.document(id)?.head.type;
    if (type !== undefined) refuseKernelDocument(this.#draft, id, type);
    this.#draft.deleteDocument(id);
  }
  spawn(kind: string, input: Json, options: AppSpawnOptions = {}): string {
    const id = options.id ?? this.#ids.next("task");
    if (options.id !== undefined && !this.#absent.has(id) && !this.#draft.task(id)) this.#unchecked.push(id);
    const conversation =
      options.conversationId === undefined ? {} : { conversationId: options.conversationId };
    dispatch(this.#draft, { type: "spawn", task: { id, kind, input, ...conversation } });
    return id;
  }

  /** Throws when the build chose a task id that memory does not hold and storage was not asked about. */
  assertChecked(): void {
    if (this.#unchecked.length > 0) throw new UncheckedTaskIds(this.#unchecked);
  }
}

/** Task ids a build chose that must be looked up in storage before it can commit (see `commitAsApp`). */
class UncheckedTaskIds extends Error {
  constructor(readonly ids: readonly string[]) {
    super(`task ids not yet looked up: ${ids.join(", ")}`);
  }
}

/** How many times an app's build runs while it chooses task ids not yet looked up. */
const ID_LOOKUP_ROUNDS = 4;

/** What an app's commit needs of its session. */
export interface AppCommitHost {
  readonly ids: IdSource;
  kernelCommit<T>(build: KernelCommit<T>): Promise<CommitResult<T>>;
  /** A task by id, from memory or storage. */
  readTask(taskId: string): Promise<Task | undefined>;
}

/**
 * An app's commit (`session.commit(build)`). A task id the app chose that memory does not hold may still
 * be in storage — a finished task that left the working set, a parked wait — so each one is looked up
 * before the build runs again (builds are plain functions of their draft), and one that exists is refused
 * as memory's would be, never written over.
 */
export async function commitAsApp<T>(host: AppCommitHost, build: BuildCommit<T>): Promise<CommitResult<T>> {
  const absent = new Set<string>();
  for (let round = 1; ; round++) {
    try {
      return await host.kernelCommit((draft) => {
        const appDraft = new AppDraft(draft, host.ids, absent);
        const value = build(appDraft);
        appDraft.assertChecked();
        return value;
      });
    } catch (error) {
      if (!(error instanceof UncheckedTaskIds)) throw error;
      if (round === ID_LOOKUP_ROUNDS)
        throw new InvalidArgumentError(
          "the commit's build chose other task ids each time it ran; a build must be a plain function of its draft",
          [{ path: "id", message: "task ids must not change between runs of the build" }],
        );
      for (const id of error.ids) {
        if (await host.readTask(id)) throw taskExists(id);
        absent.add(id);
      }
    }
  }
}

/** The draft of a deferred commit: progress documents only. */
export class ProgressOnlyDraft implements ProgressDraft {
  readonly #draft: KernelDraft;

  constructor(draft: KernelDraft) {
    this.#draft = draft;
  }

  get version(): number {
    return this.#draft.version;
  }
  get at(): number {
    return this.#draft.at;
  }
  document(id: string): DocumentState | undefined {
    return this.#draft.document(id);
  }
  setDocument(id: string, type: string, value: Json): void {
    refuseNonProgress(this.#draft, id, type);
    this.#draft.setDocument(id, type, value);
  }
  patchDocument(id: string, patch: readonly PatchOperation[]): void {
    refuseNonProgress(this.#draft, id, this.#draft.document(id)?.head.type);
    this.#draft.patchDocument(id, patch);
  }
}

function refuseKernelDocument(draft: KernelDraft, id: string, type: string): void {
  const existing = draft.document(id)?.head.type;
  for (const checked of existing === undefined ? [type] : [type, existing]) {
    if (draft.registry.isKernelDocument(checked))
      throw new RefusedWriteError(
        `document ${id} is of the kernel's own type "${checked}"; apps can read it but not write it`,
        `documents/${id}`,
      );
  }
}

function refuseNonProgress(draft: KernelDraft, id: string, type: string | undefined): void {
  if (type !== undefined && draft.registry.isProgressDocument(type)) return;
  throw new RefusedWriteError(
    `a deferred commit may only change progress documents; documents/${id} is ${type === undefined ? "missing" : `of type "${type}", which is not declared as progress`}`,
    `documents/${id}`,
  );
}
