/**
 * The narrow drafts code outside the kernel gets (DESIGN §3, "who may write what"). Each wraps the kernel's
 * draft of one commit and offers only what its role may do, so an app cannot rewrite a task or end a
 * Submission, and a deferred commit cannot carry a critical fact. The wrappers are the boundary at run time
 * too, not only in types: their kernel draft is private.
 */
import type { IdSource } from "../clock.ts";
import { RefusedWriteError } from "../errors.ts";
import type { Entry, EntryContent, Json, PatchOperation, Submission, Task } from "../records/schemas.ts";
import { dispatch } from "../tasks/machine.ts";
import type { KernelDraft } from "./draft.ts";
import type { AppSpawnOptions, Draft, EntryLinks, ProgressDraft } from "./draft-types.ts";
import type { DocumentState } from "./state.ts";

/** An app's view of a commit's draft: entries, its own documents, and spawns through the task machine. */
export class AppDraft implements Draft {
  readonly #draft: KernelDraft;
  readonly #ids: IdSource;

  constructor(draft: KernelDraft, ids: IdSource) {
    this.#draft = draft;
    this.#ids = ids;
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
    const conversation =
      options.conversationId === undefined ? {} : { conversationId: options.conversationId };
    const chosen = options.id !== undefined ? { chosenId: true } : {};
    dispatch(this.#draft, { type: "spawn", task: { id, kind, input, ...conversation, ...chosen } });
    return id;
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
