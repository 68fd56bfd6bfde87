/**
 * The kernel's draft: the changes one commit is about to make, layered over the committed state (or over an
 * earlier draft of the same group commit). Nothing in a draft is visible until storage confirms it. It can
 * write every kind of record; code outside the kernel only ever sees it through a role's narrower view
 * (`role-drafts.ts`), and task and Submission records are written only by the task machine.
 */

import { z } from "zod";
import { DEFAULT_BASELINE_EVERY } from "../documents/define-document.ts";
import { applyJsonPatch, diffJson } from "../documents/json-patch.ts";
import { BlockedRecordError, RefusedWriteError, ValidationError } from "../errors.ts";
import type {
  CommitRecord,
  Conversation,
  DocumentChange,
  Entry,
  EntryContent,
  Json,
  PatchOperation,
  RemovedItem,
  Signal,
  Submission,
  SummaryFields,
  Task,
} from "../records/schemas.ts";
import {
  ConversationSchema,
  EntrySchema,
  JsonSchema,
  SignalSchema,
  SubmissionSchema,
  TaskSchema,
  TextSchema,
} from "../records/schemas.ts";
import { assertStorable, deepFreeze, validateAll, validateRecord } from "../records/validate.ts";
import type { Registry } from "../registry.ts";
import { ChildIndex } from "./child-index.ts";
import type { EntryLinks } from "./draft-types.ts";
import { awaiterOf, noteAwaiting } from "./overlay-lookups.ts";
import { parkingOf } from "./parking.ts";
import { SignalLayer } from "./signal-layer.ts";
import type { BlockedKind, BlockedRecord, DocumentState, ParkingReader, StateReader } from "./state.ts";

/**
 * A validated commit plus the document values the writer already computed. The commit pipeline deep-freezes
 * it with {@link freezeSealed} as soon as storage has taken its copy, before anything else can see it.
 */
export interface SealedCommit {
  readonly commit: CommitRecord;
  readonly documentValues: ReadonlyMap<string, Json>;
}

/**
 * Makes a sealed commit immutable: records and document values are shared with views from now on.
 * Done after storage serialized them: V8 serializes frozen arrays on a slower path (a frozen commit took twice
 * as long to turn into JSON in workerd).
 */
export function freezeSealed(sealed: SealedCommit): void {
  deepFreeze(sealed.commit);
  for (const value of sealed.documentValues.values()) deepFreeze(value);
}

/** A document's id and type, checked like every other id (an app's value schema does not cover them). */
const DocumentKeySchema = z.object({ id: TextSchema.min(1).max(256), type: TextSchema.min(1).max(256) });

/** How often a progress document without a definition of its own (a model stream) is stored in full. */
const PROGRESS_BASELINE_EVERY = 1024;

/** Shared by every draft until it writes: most commits touch one or two kinds of record. */
const NONE: ReadonlyMap<never, never> = new Map<never, never>();

/** Sets `key` in `map`, first giving the draft its own map if it still shares {@link NONE}. */
function put<K, V>(map: ReadonlyMap<K, V>, key: K, value: V): Map<K, V> {
  const own = map === NONE ? new Map<K, V>() : (map as Map<K, V>);
  own.set(key, value);
  return own;
}

/** The write side of a commit. Reads see the draft's own changes first, then the state below it. */
export class KernelDraft implements StateReader {
  // Allocated on first write (see NONE): drafts are made per commit, on the hot path.
  private conversations: ReadonlyMap<string, Conversation> = NONE;
  /** What this commit appended so far, in order (kernel only: a cancelled task's `onCancelled` reads it). */
  entries: Entry[] | undefined;
  /** Values set in this draft; `undefined` marks a document this draft deletes. */
  private documents: ReadonlyMap<string, { type: string; value: Json | undefined }> = NONE;
  private tasks: ReadonlyMap<string, Task> = NONE;
  /** The last task this draft wrote awaiting each key. */
  private awaiting: Map<string, string> | undefined;
  private submissions: ReadonlyMap<string, Submission> = NONE;
  private requestIndex: ReadonlyMap<string, string> = NONE;
  private signals: SignalLayer | undefined;
  private children: ChildIndex | undefined;
  private removed: RemovedItem[] | undefined;

  constructor(
    private readonly base: StateReader & ParkingReader,
    readonly registry: Registry,
    /** The session version this draft will become. */
    readonly version: number,
    /** The commit's timestamp. */
    readonly at: number,
  ) {}

  conversation(id: string): Conversation | undefined {
    return this.conversations.get(id) ?? this.base.conversation(id);
  }
  document(id: string): DocumentState | undefined {
    const changed = this.documents.get(id);
    if (!changed) return this.base.document(id);
    if (changed.value === undefined) return undefined; // deleted in this draft
    const before = this.base.document(id);
    const head = before?.head ?? {
      id,
      type: changed.type,
      version: 0,
      baselineVersion: 0,
      deltaBytes: 0,
      updatedAt: this.at,
    };
    return { head: { ...head, type: changed.type }, value: changed.value };
  }
  task(id: string): Task | undefined {
    return this.tasks.get(id) ?? this.base.task(id);
  }
  submission(id: string): Submission | undefined {
    return this.submissions.get(id) ?? this.base.submission(id);
  }
  submissionByRequest(requestId: string): Submission | undefined {
    const id = this.requestIndex.get(requestId);
    return id !== undefined ? this.submissions.get(id) : this.base.submissionByRequest(requestId);
  }
  blocked(kind: BlockedKind, id: string): BlockedRecord | undefined {
    return this.base.blocked(kind, id);
  }
  signal(key: string): Signal | undefined {
    return this.signals ? this.signals.open(key) : this.base.signal(key);
  }
  awaiter(key: string): Task | undefined {
    return awaiterOf(this.awaiting, this.base, this, key);
  }
  earlySignals(): number {
    return this.signals ? this.signals.openCount() : this.base.earlySignals();
  }
  openChildCount(parentId: string): number {
    return this.children ? this.children.openChildCount(parentId) : this.base.openChildCount(parentId);
  }
  ownedChildren(parentId: string): readonly string[] {
    return this.children ? this.children.ownedChildren(parentId) : this.base.ownedChildren(parentId);
  }

  /** Appends an entry to a conversation (creating the conversation if it is new) and returns it. */
  appendEntry(conversationId: string, content: EntryContent, links: EntryLinks = {}): Entry {
    const blocked = this.blocked("conversation", conversationId);
    let conversation = this.conversation(conversationId);
    if (blocked && !conversation) throw new BlockedRecordError(blocked.record, blocked.reason);
    conversation ??= { id: conversationId, createdAt: this.at, entryCount: 0 };
    const entry: Entry = {
      conversationId,
      seq: conversation.entryCount,
      version: this.version,
      at: this.at,
      ...(links.submissionId !== undefined && { submissionId: links.submissionId }),
      ...(links.taskId !== undefined && { taskId: links.taskId }),
      content,
    };
    this.conversations = put(this.conversations, conversationId, {
      ...conversation,
      entryCount: conversation.entryCount + 1,
    });
    this.entries ??= [];
    this.entries.push(entry);
    return entry;
  }

  /** Makes `submissionId` the conversation's latest turn; returns the one before (kernel only: follow-ups). */
  takeTurn(conversationId: string, submissionId: string): string | undefined {
    const conversation = this.conversation(conversationId);
    if (conversation) this.writeConversation({ ...conversation, lastTurn: submissionId });
    return conversation?.lastTurn;
  }

  /** Replaces a conversation's record as it is (kernel only: the task machine withdrawing an entry). */
  writeConversation(conversation: Conversation): void {
    this.conversations = put(this.conversations, conversation.id, conversation);
  }

  /**
   * Appends a `summary` entry covering entries up to `coversThroughSeq` and moves the conversation's context
   * start past them, in this commit: later model rounds read from there (the covered entries stay stored).
   */
  appendSummary(conversationId: string, summary: SummaryFields, links: EntryLinks = {}): Entry {
    const entry = this.appendEntry(conversationId, { kind: "summary", ...summary }, links);
    const conversation = this.conversation(conversationId) as Conversation;
    const start = Math.max(conversation.contextStart ?? 0, summary.coversThroughSeq + 1);
    this.writeConversation({ ...conversation, contextStart: start });
    return entry;
  }

  /** Replaces a document's value. The stored change is the JSON Patch between the old and new value. */
  setDocument(id: string, type: string, value: Json): void {
    this.assertWritable("document", id);
    const existing = this.document(id);
    if (existing && existing.head.type !== type) {
      throw new ValidationError(
        `document ${id} is of type "${existing.head.type}", not "${type}"`,
        `documents/${id}`,
        [{ path: "type", message: `expected "${existing.head.type}"` }],
      );
    }
    this.documents = put(this.documents, id, { type, value });
  }

  /** Deletes a document (and its stored rows), if it exists: a per-run document whose run ended. */
  deleteDocument(id: string): void {
    this.assertWritable("document", id);
    const existing = this.document(id);
    if (!existing) return;
    this.documents = put(this.documents, id, { type: existing.head.type, value: undefined });
  }

  /** Applies JSON Patch operations to an existing document. */
  patchDocument(id: string, patch: readonly PatchOperation[]): void {
    const existing = this.document(id);
    if (!existing) {
      throw new ValidationError(`document ${id} does not exist`, `documents/${id}`, [
        { path: "id", message: "unknown document" },
      ]);
    }
    this.setDocument(id, existing.head.type, applyJsonPatch(existing.value, patch));
  }

  /** Creates or replaces a task record. Only the task machine calls it (`tasks/machine.ts`). */
  writeTask(task: Task): void {
    this.assertWritable("task", task.id);
    const before = this.task(task.id);
    this.tasks = put(this.tasks, task.id, task);
    this.awaiting = noteAwaiting(this.awaiting, task);
    if (task.parentId === undefined) return;
    this.children ??= new ChildIndex(this.base);
    this.children.track(before, task);
  }

  /**
   * The signals this draft stores (new, or taken by a wait: the task machine, `tasks/awaiting.ts`) and the
   * early ones it drops (`signals/expiry.ts`). Kernel only.
   */
  get signalWrites(): SignalLayer {
    this.signals ??= new SignalLayer(this.base);
    return this.signals;
  }

  /** Creates or replaces a Submission record. Only the task machine calls it (`tasks/machine.ts`). */
  writeSubmission(submission: Submission): void {
    this.assertWritable("submission", submission.id);
    const other = this.submissionByRequest(submission.requestId);
    if (other && other.id !== submission.id) {
      throw new ValidationError(
        `requestId ${submission.requestId} already belongs to submission ${other.id}`,
        `submissions/${submission.id}`,
        [{ path: "requestId", message: "duplicate requestId" }],
      );
    }
    this.submissions = put(this.submissions, submission.id, submission);
    this.requestIndex = put(this.requestIndex, submission.requestId, submission.id);
  }

  /** Removes a finished item's rows from storage (retention only, `session/retention.ts`). */
  removeSettled(item: RemovedItem): void {
    this.removed ??= [];
    this.removed.push(item);
  }

  /** True when the draft changes nothing. */
  get isEmpty(): boolean {
    return (
      this.entries === undefined &&
      this.documents.size === 0 &&
      this.tasks.size === 0 &&
      this.submissions.size === 0 &&
      (this.signals?.isEmpty ?? true) &&
      this.conversations.size === 0 &&
      this.removed === undefined
    );
  }

  /**
   * Validates every record and returns the commit to store. Throws {@link ValidationError}, or
   * {@link RefusedWriteError} for a deferred commit that carries more than progress; writes nothing.
   */
  /** `liveWaits`: past this many live waits of trees without a Submission, new ones are parked. */
  seal(epoch: number, deferred: boolean, liveWaits = Number.POSITIVE_INFINITY): SealedCommit {
    if (deferred) this.assertOnlyProgress();
    const documentValues = new Map<string, Json>();
    const documents: DocumentChange[] = [];
    for (const [id, { type, value }] of this.documents) {
      const before = this.base.document(id);
      if (value === undefined) {
        if (!before) continue; // created and deleted in the same draft: nothing to store
        const { version, baselineVersion } = before.head;
        documents.push({
          id,
          type,
          version: version + 1,
          baselineVersion,
          deltaBytes: 0,
          patch: [],
          deleted: true,
        });
        continue;
      }
      const definition = this.registry.documents.get(type);
      const checked = validateRecord(definition?.schema ?? JsonSchema, value, `documents/${id}`) as Json;
      // An app's schema says what the value means; that it is storable JSON is the kernel's rule either way.
      if (definition) assertStorable(checked, `documents/${id}`);
      validateRecord(DocumentKeySchema, { id, type }, `documents/${id}`);
      const patch = diffJson(before?.value ?? null, checked);
      if (before && patch.length === 0) continue;
      const version = (before?.head.version ?? 0) + 1;
      const progress = this.registry.isProgressDocument(type);
      const every =
        definition?.baselineEvery ?? (progress ? PROGRESS_BASELINE_EVERY : DEFAULT_BASELINE_EVERY);
      // A full baseline every `every` versions, or sooner once the deltas since the last one outweigh the
      // value itself: a reload then never reads more than about twice the document, however long its history.
      const deltaBytes = (before?.head.deltaBytes ?? 0) + JSON.stringify(patch).length;
      // A progress document (a stream of chunks) only grows and is deleted when its run ends: it is not
      // stored again in full as it grows, only every `every` versions.
      const isBaseline =
        !before ||
        version - before.head.baselineVersion >= every ||
        (!progress && deltaBytes > JSON.stringify(checked).length);
      documentValues.set(id, checked);
      documents.push({
        id,
        type,
        version,
        baselineVersion: isBaseline ? version : (before?.head.baselineVersion ?? version),
        deltaBytes: isBaseline ? 0 : deltaBytes,
        // A baseline holds the whole value: the change stores it once, not again as a patch.
        patch: isBaseline ? [] : patch,
        ...(isBaseline && { baseline: checked }),
      });
    }
    const tasks = validateAll(this.tasks.values(), TaskSchema, (t) => `tasks/${t.id}`);
    const commit: CommitRecord = {
      version: this.version,
      epoch,
      at: this.at,
      deferred,
      conversations: validateAll(
        this.conversations.values(),
        ConversationSchema,
        (c) => `conversations/${c.id}`,
      ),
      entries: validateAll(this.entries ?? [], EntrySchema, (e) => `entries/${e.conversationId}/${e.seq}`),
      documents,
      tasks,
      submissions: validateAll(this.submissions.values(), SubmissionSchema, (s) => `submissions/${s.id}`),
      ...(this.signals?.dropped.size && { droppedSignals: [...this.signals.dropped.values()] }),
      ...(this.signals?.written.size && {
        signals: validateAll(this.signals.written.values(), SignalSchema, (s) => `signals/${s.key}`),
      }),
      ...(this.removed && { removed: this.removed }),
      ...parkingOf(tasks, this.base, this, liveWaits),
    };
    return { commit, documentValues };
  }

  /** DESIGN §3: a deferred commit may be lost or delayed, so it may carry progress documents only. */
  private assertOnlyProgress(): void {
    const refuse = (record: string, what: string) => {
      throw new RefusedWriteError(
        `a deferred commit may only change progress documents, not ${what} (${record})`,
        record,
      );
    };
    const entry = this.entries?.[0];
    if (entry) refuse(`entries/${entry.conversationId}/${entry.seq}`, "an entry");
    for (const id of this.conversations.keys()) refuse(`conversations/${id}`, "a conversation");
    for (const id of this.tasks.keys()) refuse(`tasks/${id}`, "a task");
    for (const id of this.submissions.keys()) refuse(`submissions/${id}`, "a Submission");
    for (const key of this.signals?.written.keys() ?? []) refuse(`signals/${key}`, "a signal");
    for (const key of this.signals?.dropped.keys() ?? []) refuse(`signals/${key}`, "a signal drop");
    if (this.removed) refuse(`items/${this.removed[0]?.id}`, "a removal");
    for (const [id, { type }] of this.documents)
      if (!this.registry.isProgressDocument(type))
        refuse(`documents/${id}`, `a document of type "${type}", which is not declared as progress`);
  }

  private assertWritable(kind: BlockedKind, id: string): void {
    const blocked = this.blocked(kind, id);
    if (blocked) throw new BlockedRecordError(blocked.record, blocked.reason);
  }
}
