/**
 * What code outside the kernel may do inside a commit, by role. An app's commit gets a {@link Draft}: it
 * appends entries, edits its own documents and spawns tasks through the task machine. A deferred
 * (loss-tolerant) commit gets a {@link ProgressDraft}: it edits progress documents and nothing else. Task
 * and Submission records are written only by the kernel's task machine.
 */
import type {
  Conversation,
  Entry,
  EntryContent,
  Json,
  PatchOperation,
  Submission,
  Task,
} from "../records/schemas.ts";
import type { DocumentState } from "./state.ts";

/** Links an entry to the work that produced it. */
export interface EntryLinks {
  readonly submissionId?: string;
  readonly taskId?: string;
}

/** Reads of a draft: the committed state with this commit's own changes on top. */
export interface DraftReader {
  /** The session version this commit will become. */
  readonly version: number;
  /** The commit's timestamp. */
  readonly at: number;
  conversation(id: string): Conversation | undefined;
  document(id: string): DocumentState | undefined;
  task(id: string): Task | undefined;
  submission(id: string): Submission | undefined;
}

/**
 * The draft of a deferred commit: streamed text, live tool output. It may only edit documents whose type is
 * declared as progress (`defineDocument({ progress: true })`, and the kernel's own stream and tool-progress
 * documents); anything else throws {@link RefusedWriteError}.
 */
export interface ProgressDraft {
  readonly version: number;
  readonly at: number;
  document(id: string): DocumentState | undefined;
  setDocument(id: string, type: string, value: Json): void;
  patchDocument(id: string, patch: readonly PatchOperation[]): void;
}

/** How an app spawns a top-level task inside its own commit. */
export interface AppSpawnOptions {
  /** Id for the task; default a fresh one. */
  readonly id?: string;
  readonly conversationId?: string;
}

/**
 * What an app's `session.commit(build)` may stage. Documents of kernel-owned types (tool runs, usage,
 * streams) are refused with {@link RefusedWriteError}.
 *
 * @example
 * await session.commit((draft) => {
 *   draft.appendEntry("main", { kind: "note", text: "plan approved" });
 *   draft.setDocument("plan", "email-plan", { recipients, approved: true });
 * });
 */
export interface Draft extends DraftReader {
  /** Appends an entry to a conversation (creating the conversation if it is new) and returns it. */
  appendEntry(conversationId: string, content: EntryContent, links?: EntryLinks): Entry;
  /** Replaces a document's value; the stored change is the JSON Patch between the old and new value. */
  setDocument(id: string, type: string, value: Json): void;
  /** Applies JSON Patch operations to an existing document. */
  patchDocument(id: string, patch: readonly PatchOperation[]): void;
  /** Deletes one of the app's documents (its rows too; its history stays in the change log). */
  deleteDocument(id: string): void;
  /** Creates a top-level task (it runs once the session is resumed). Returns its id. */
  spawn(kind: string, input: Json, options?: AppSpawnOptions): string;
}

/** An app's commit: stages entries, documents and spawned tasks on its {@link Draft}. */
export type BuildCommit<T> = (draft: Draft) => T;
/** A deferred commit's build: progress documents only. */
export type BuildProgress<T> = (draft: ProgressDraft) => T;

/** Options of an app's commit. */
export interface CommitOptions {
  /**
   * Loss-tolerant progress (streamed text, live tool output): may be delayed and batched with other
   * deferred changes, and may be lost in a crash. Its build gets a {@link ProgressDraft}.
   */
  readonly deferred?: boolean;
}
