/**
 * The in-memory state of one session and the reducer that is the only place it changes. The reducer
 * applies committed changes (never drafts), so memory always equals storage after a confirmed commit.
 *
 * It updates the maps in place rather than returning copies: a session may hold tens of thousands of
 * tasks, and copying them per commit would make every commit O(session). Views copy on demand instead.
 */
import { assertNever } from "../assert-never.ts";
import { applyJsonPatch } from "../documents/json-patch.ts";
import type {
  CommitRecord,
  Conversation,
  DocumentHead,
  Entry,
  Json,
  Signal,
  Submission,
  Task,
} from "../records/schemas.ts";
import { headAfter, isSubmissionFinished } from "../records/schemas.ts";
import { ChildIndex } from "./child-index.ts";
import { ItemTracker, isStandaloneRoot, treeOf, type WorkItem } from "./items.ts";
import { DEFAULT_SETTLED } from "./limits.ts";

/** A document's head and current value. */
export interface DocumentState {
  readonly head: DocumentHead;
  readonly value: Json;
}

/** A conversation's record and the entries held in memory (its latest ones, oldest first). */
export interface ConversationState {
  readonly record: Conversation;
  readonly entries: Entry[];
}

export type BlockedKind = "conversation" | "document" | "task" | "submission" | "signal";

/** A record that failed to load: what it belongs to, and why. The stored row is kept as it is. */
export interface BlockedRecord {
  readonly kind: BlockedKind;
  readonly id: string;
  /** The stored row that failed, e.g. `tasks/t_1` or `entries/main/4`. */
  readonly record: string;
  readonly reason: string;
}

/** Read access shared by the committed state and by drafts layered over it. */
export interface StateReader {
  conversation(id: string): Conversation | undefined;
  document(id: string): DocumentState | undefined;
  task(id: string): Task | undefined;
  submission(id: string): Submission | undefined;
  submissionByRequest(requestId: string): Submission | undefined;
  blocked(kind: BlockedKind, id: string): BlockedRecord | undefined;
  /** How many tasks owned by `parentId` are not terminal. O(1): kept as an index, never counted. */
  openChildCount(parentId: string): number;
  /** Ids of the tasks owned by `parentId`, in creation order. */
  ownedChildren(parentId: string): readonly string[];
  /** The signal stored for `key` that no wait has taken yet (memory keeps only those). */
  signal(key: string): Signal | undefined;
  /** The task awaiting `key`, if one is. O(1): an index kept as tasks change. */
  awaiter(key: string): Task | undefined;
  /** How many stored signals no wait has taken yet (early ones). */
  earlySignals(): number;
}

/** What a commit below the drafts knows of parked waits (the state, or a group of commits over it). */
export interface ParkingReader {
  /** Whether the wait of task `taskId` is parked (stored apart from live work, see `parking.ts`). */
  isParked(taskId: string): boolean;
  /** How many waits of task trees started without a Submission memory holds that are not parked. O(1). */
  liveWaits(): number;
}

export class SessionState implements StateReader, ParkingReader {
  version = 0;
  epoch = 0;
  /** The stored session's incarnation (`SessionMeta.incarnation`): commits are refused by another. */
  incarnation: string | undefined;
  readonly conversations = new Map<string, ConversationState>();
  readonly documents = new Map<string, DocumentState>();
  readonly tasks = new Map<string, Task>();
  readonly submissions = new Map<string, Submission>();
  readonly requestIndex = new Map<string, string>();
  readonly blockedRecords = new Map<string, BlockedRecord>();
  /** Tasks the scheduler cannot run (unknown kind, unmigratable version), with the reason. Writable. */
  readonly blockedTasks = new Map<string, string>();
  /** How many tasks are `running` or `pending`: work that should be executing now. */
  runnableTasks = 0;
  /** How many Submissions have not ended. Kept as they change, never counted. */
  unfinishedSubmissions = 0;
  private readonly children = new ChildIndex();
  /** Signals no wait has taken yet, by key. */
  readonly signals = new Map<string, Signal>();
  /** The awaiting task of each key. */
  private readonly awaiters = new Map<string, string>();
  /** Which Submissions and task trees stay in memory (DESIGN §9). */
  readonly items: ItemTracker;
  /** Root tasks in memory whose wait is parked (kept from commits and reads back), and how many roots await. */
  private readonly parked = new Set<string>();
  private awaitingRoots = 0;
  /** Parked waits left in storage when the session opened and not moved on by a commit since (`parking.ts`). */
  parkedInStorage = 0;
  /**
   * Tasks of parked waits read back from storage that no commit has touched since: in memory for the calls
   * that need them, but not shown in views, which show what the change log says (a read back is not a change).
   */
  readonly readBack = new Set<string>();
  /**
   * Whether storage may hold parked waits memory does not: some were stored when the session opened, or a
   * commit it adopted parked one. Reads for them are skipped while false (most sessions never park).
   */
  mayHoldParked = false;
  /** The version at which each read of parked waits in flight began (see `beginParkedRead`). */
  private readonly parkedReads: number[] = [];
  /**
   * While reads of parked waits are in flight, the roots whose wait a commit moved on meanwhile, with that
   * commit's version: a read that began before such a commit may bring the wait back as it was (awaiting),
   * and must not be adopted (see `ParkedWaits`).
   */
  readonly movedOn = new Map<string, number>();
  /** A lower bound of the earliest deadline among them: the scheduler wakes then to read the due ones. */
  parkedDue: number | undefined;

  constructor(
    readonly id: string,
    readonly createdAt: number,
    /** How many latest entries per conversation stay in memory. */
    readonly entryTail: number,
    /** How many finished Submissions (and root task trees) stay in memory besides unfinished ones. */
    readonly settledLimit: number = DEFAULT_SETTLED,
  ) {
    this.items = new ItemTracker(settledLimit);
  }

  conversation(id: string): Conversation | undefined {
    return this.conversations.get(id)?.record;
  }
  document(id: string): DocumentState | undefined {
    return this.documents.get(id);
  }
  task(id: string): Task | undefined {
    return this.tasks.get(id);
  }
  submission(id: string): Submission | undefined {
    return this.submissions.get(id);
  }
  submissionByRequest(requestId: string): Submission | undefined {
    const id = this.requestIndex.get(requestId);
    return id === undefined ? undefined : this.submissions.get(id);
  }
  blocked(kind: BlockedKind, id: string): BlockedRecord | undefined {
    // Asked on every write; almost always nothing is blocked, so skip building the key.
    if (this.blockedRecords.size === 0) return undefined;
    return this.blockedRecords.get(`${kind}:${id}`);
  }
  openChildCount(parentId: string): number {
    return this.children.openChildCount(parentId);
  }
  ownedChildren(parentId: string): readonly string[] {
    return this.children.ownedChildren(parentId);
  }
  signal(key: string): Signal | undefined {
    return this.signals.get(key);
  }
  earlySignals(): number {
    return this.signals.size;
  }
  awaiter(key: string): Task | undefined {
    const id = this.awaiters.get(key);
    return id === undefined ? undefined : this.tasks.get(id);
  }

  isParked(taskId: string): boolean {
    return this.parked.has(taskId);
  }
  liveWaits(): number {
    return this.awaitingRoots - this.parked.size;
  }

  /** A read of parked waits begins: until it ends, waits commits move on are noted in `movedOn`. */
  beginParkedRead(): number {
    this.parkedReads.push(this.version);
    return this.version;
  }

  /** The read that began at `began` ended: a wait moved on before every read still in flight began is forgotten. */
  endParkedRead(began: number): void {
    this.parkedReads.splice(this.parkedReads.indexOf(began), 1);
    // Reads are noted as they begin, so the first still in flight began earliest.
    const oldest = this.parkedReads[0] ?? Number.POSITIVE_INFINITY;
    for (const [id, version] of this.movedOn) if (version <= oldest) this.movedOn.delete(id);
  }

  /** Takes note of the waits a commit parked or moved on, and of one read back from storage (parked). */
  trackParking(
    unparked: readonly { id: string }[],
    parked: readonly { id: string }[],
    version: number,
  ): void {
    for (const wait of unparked) {
      this.parked.delete(wait.id);
      if (this.parkedReads.length > 0) this.movedOn.set(wait.id, version);
    }
    for (const wait of parked) this.parked.add(wait.id);
    if (parked.length > 0) this.mayHoldParked = true;
  }

  /** Keeps a signal while no wait has taken it (taken ones live in storage only). */
  putSignal(signal: Signal): void {
    if (signal.consumedBy === undefined) this.signals.set(signal.key, signal);
    else this.signals.delete(signal.key);
  }

  /** Stores a Submission record and keeps the requestId index and the unfinished count in step. */
  putSubmission(submission: Submission): void {
    const before = this.submissions.get(submission.id);
    this.submissions.set(submission.id, submission);
    this.requestIndex.set(submission.requestId, submission.id);
    this.unfinishedSubmissions +=
      (isSubmissionFinished(submission) ? 0 : 1) -
      (before === undefined || isSubmissionFinished(before) ? 0 : 1);
  }

  /**
   * Read-back trees a commit touched are shown whole from now on, as a session that opened after it would
   * show them (the commit made their wait live again).
   */
  showReadBack(touched: readonly Task[]): void {
    for (const task of touched) {
      if (!this.readBack.has(task.id)) continue;
      let root = task;
      for (let up = this.tasks.get(root.parentId ?? ""); up; up = this.tasks.get(up.parentId ?? ""))
        root = up;
      for (const id of treeOf(root.id, (parent) => this.children.ownedChildren(parent)))
        this.readBack.delete(id);
    }
  }

  /** Removes a finished item's Submission and task tree from memory (they stay in storage). */
  evict(item: WorkItem): void {
    if (item.submission !== undefined) {
      const submission = this.submissions.get(item.submission);
      this.submissions.delete(item.submission);
      if (submission && this.requestIndex.get(submission.requestId) === submission.id)
        this.requestIndex.delete(submission.requestId);
    }
    if (item.root === undefined || !this.tasks.has(item.root)) return;
    for (const id of treeOf(item.root, (parent) => this.children.ownedChildren(parent))) {
      const task = this.tasks.get(id);
      if (task && isRunnable(task)) this.runnableTasks--;
      this.tasks.delete(id);
      this.readBack.delete(id);
      this.blockedTasks.delete(id);
      this.children.forget(id);
    }
  }

  /** Stores a task record and keeps the parent indexes in step. Only the reducer and loader call it. */
  putTask(task: Task): void {
    const before = this.tasks.get(task.id);
    this.tasks.set(task.id, task);
    this.runnableTasks += (isRunnable(task) ? 1 : 0) - (before && isRunnable(before) ? 1 : 0);
    this.children.track(before, task);
    // A key is let go only by the task holding it: another may take it in the commit that ends this wait.
    if (before?.state.status === "awaiting")
      for (const key of before.state.keys) if (this.awaiters.get(key) === task.id) this.awaiters.delete(key);
    if (task.state.status === "awaiting") for (const key of task.state.keys) this.awaiters.set(key, task.id);
    if (isStandaloneRoot(task))
      this.awaitingRoots +=
        (task.state.status === "awaiting" ? 1 : 0) - (before?.state.status === "awaiting" ? 1 : 0);
  }
}

/** Every way the state can change. */
export type SessionAction =
  | {
      readonly type: "committed";
      readonly commit: CommitRecord;
      /**
       * Post-commit document values the writer already computed in its draft; without them (followers,
       * replays) the reducer applies the commit's patches.
       */
      readonly documentValues?: ReadonlyMap<string, Json>;
    }
  /** A parked wait read back from storage (its tree's tasks, validated), unless memory already holds it. */
  | { readonly type: "parked-loaded"; readonly item: WorkItem; readonly tasks: readonly Task[] }
  | { readonly type: "parked-due"; readonly at: number | undefined }
  | { readonly type: "blocked"; readonly record: BlockedRecord }
  | { readonly type: "task-blocked"; readonly taskId: string; readonly reason: string }
  | { readonly type: "task-unblocked"; readonly taskId: string };

/** Applies one action to the state. The only function that changes a {@link SessionState}. */
export function reduceSession(state: SessionState, action: SessionAction): void {
  switch (action.type) {
    case "committed":
      applyCommit(state, action.commit, action.documentValues);
      return;
    case "parked-loaded":
      if (state.tasks.has(action.item.id)) return;
      for (const task of action.tasks) {
        state.putTask(task);
        state.readBack.add(task.id);
      }
      state.trackParking([], [action.item], state.version);
      state.items.load([action.item], state);
      return;
    case "parked-due":
      state.parkedDue = action.at;
      return;
    case "blocked":
      state.blockedRecords.set(`${action.record.kind}:${action.record.id}`, action.record);
      return;
    case "task-blocked":
      state.blockedTasks.set(action.taskId, action.reason);
      return;
    case "task-unblocked":
      state.blockedTasks.delete(action.taskId);
      return;
    default:
      assertNever(action);
  }
}

function applyCommit(state: SessionState, commit: CommitRecord, values?: ReadonlyMap<string, Json>): void {
  for (const record of commit.conversations) {
    const existing = state.conversations.get(record.id);
    state.conversations.set(record.id, { record, entries: existing ? existing.entries : [] });
  }
  for (const entry of commit.entries) {
    const conversation = state.conversations.get(entry.conversationId);
    if (!conversation) continue;
    // Appended in place (views copy on demand), trimmed in chunks so memory stays bounded for long
    // conversations; older entries stay readable from storage.
    conversation.entries.push(entry);
    if (conversation.entries.length > state.entryTail * 5) {
      conversation.entries.splice(0, conversation.entries.length - state.entryTail);
    }
  }
  for (const change of commit.documents) {
    if (change.deleted) {
      state.documents.delete(change.id);
      continue;
    }
    const before = state.documents.get(change.id);
    const value =
      values?.get(change.id) ??
      (change.baseline !== undefined ? change.baseline : applyJsonPatch(before?.value ?? null, change.patch));
    state.documents.set(change.id, { head: headAfter(change, commit.at), value });
  }
  if (commit.parked || commit.unparked) {
    // A wait that comes back from storage in a commit another process made (a follower's view): it is no
    // longer among the parked waits left in storage.
    for (const wait of commit.unparked ?? [])
      if (!state.tasks.has(wait.id) || state.readBack.has(wait.id))
        state.parkedInStorage = Math.max(0, state.parkedInStorage - 1);
    state.trackParking(commit.unparked ?? [], commit.parked ?? [], commit.version);
  }
  for (const task of commit.tasks) state.putTask(task);
  if (state.readBack.size > 0) state.showReadBack(commit.tasks);
  for (const submission of commit.submissions) state.putSubmission(submission);
  for (const { key } of commit.droppedSignals ?? []) state.signals.delete(key);
  for (const signal of commit.signals ?? []) state.putSignal(signal);
  for (const item of state.items.observe(commit.submissions, commit.tasks, state, commit.version))
    state.evict(item);
  // Retention removes only items outside the writer's working set; a replica may still hold one.
  for (const removed of commit.removed ?? []) {
    const item = state.items.forget(removed.id);
    if (item) state.evict(item);
  }
  state.version = commit.version;
}

const isRunnable = (task: Task) => task.state.status === "running" || task.state.status === "pending";
