/**
 * Parked waits left in storage (see `parking.ts`): read back into the working set when they are needed —
 * a signal for one of their keys, a cancellation by id, their deadline — and listed a page at a time.
 * Reads happen outside any commit; what they bring is adopted through the reducer, and only when memory does
 * not hold the tree yet (a concurrent read of the same wait adopts it once).
 */
import { CorruptRecordError, InvalidArgumentError } from "../errors.ts";
import type { ErrorInfo, Task } from "../records/schemas.ts";
import { SignalSchema, TaskSchema } from "../records/schemas.ts";
import { deepFreeze, summarizeIssues } from "../records/validate.ts";
import { isInternalKey, isKernelPrefix, taskOfKey } from "../signals/define-signal.ts";
import type { ParkedCursor, Storage, StoredRecord } from "../storage/storage.ts";
import { deadlineOfRow } from "../storage/working-set.ts";
import { taskError } from "../tasks/error-info.ts";
import { isStandaloneRoot } from "./items.ts";
import { KeyedReads } from "./keyed-reads.ts";
import { type PendingWait, pendingWaits } from "./pending.ts";
import { reduceSession, type SessionState, type StateReader } from "./state.ts";

/** In the commit that would begin a wait: why it may not begin, if it may not (see `checkWait`). */
export type WaitCheck = (draft: StateReader) => ErrorInfo | undefined;

/** How many deadline rows are read at a time while looking for due waits. */
const DEADLINE_PAGE = 64;
/** How long after a failed read of due parked waits it is tried again. */
const RETRY_MS = 1_000;

export class ParkedWaits {
  /** Stored signals by key, read together (see `checkWait`). */
  private readonly signals: KeyedReads<StoredRecord | undefined>;
  /** Parked wait trees by key, read together. */
  private readonly waiting: KeyedReads<StoredRecord[]>;

  constructor(
    private readonly state: SessionState,
    private readonly storage: Storage,
    /** Tasks read back: the scheduler learns their deadlines. */
    private readonly loaded: (tasks: readonly Task[]) => void,
  ) {
    this.signals = new KeyedReads((keys) => storage.readSignals(state.id, keys));
    this.waiting = new KeyedReads((keys) => storage.readWaiting(state.id, keys));
  }

  /** Reads back the parked wait on `key`, if storage holds one memory does not. */
  async loadByKey(key: string): Promise<void> {
    if (!this.state.mayHoldParked || this.state.awaiter(key)) return;
    await this.watched(async () => this.adopt(await this.waiting.read(key), key));
  }

  /**
   * A wait task `taskId` is about to begin, checked before its commit and then in it: a parked wait on one of
   * its keys is read back (the commit then sees who holds each key), and each key's stored signal is read —
   * a key takes one signal, and memory keeps only those no wait took. In its commit the wait is refused
   * (`key-resolved`) when it could never end: all its keys spent (`any`), or one (`all`). A key is spent when
   * a wait took its signal, or when another task awaited it at the read and no longer does in the commit
   * (that wait ended meanwhile, most likely by taking the signal). Kernel keys name a new task or attempt and
   * are never read. A failed read spends nothing (the commit still checks what memory holds).
   */
  async checkWait(
    taskId: string,
    wait: { keys: readonly string[]; mode: "any" | "all" },
  ): Promise<WaitCheck> {
    const spent = new Map<string, (draft: StateReader) => string | undefined>();
    for (const key of wait.keys) {
      if (isInternalKey(key) || taskOfKey(key) !== undefined) continue;
      await this.loadByKey(key).catch(() => undefined);
      const holder = this.state.awaiter(key)?.id;
      if (holder !== undefined && holder !== taskId) {
        const ended = `was awaited by task ${holder} when this wait began, and that wait ended meanwhile`;
        spent.set(key, (draft) => (draft.awaiter(key)?.id === holder ? undefined : ended));
      } else if (holder === undefined && !this.state.signal(key)) {
        const row = await this.signals.read(key).catch(() => undefined);
        const taken = row && SignalSchema.safeParse(row.value).data?.consumedBy;
        if (taken !== undefined) spent.set(key, () => `already received its signal (taken by task ${taken})`);
      }
    }
    if (spent.size === 0) return () => undefined;
    return (draft) => {
      const reasons = wait.keys.map((key) => [key, spent.get(key)?.(draft)] as const);
      const found = reasons.filter(([, reason]) => reason !== undefined);
      if (wait.mode === "any" ? found.length < wait.keys.length : found.length === 0) return undefined;
      const [key, reason] = found[0] as readonly [string, string];
      const message = `key "${key}" ${reason}; a key takes one signal, so wait on a new key`;
      return taskError("key-resolved", message);
    };
  }

  /** Reads back the parked wait whose root is `taskId`, if it is one memory does not hold. */
  async loadById(taskId: string): Promise<void> {
    if (!this.state.mayHoldParked || this.state.task(taskId)) return;
    await this.watched(async () => {
      const row = await this.storage.readTask(this.state.id, taskId);
      if (!row) return;
      const root = storedTask(row);
      if (!isStandaloneRoot(root) || root.state.status !== "awaiting") return;
      // Parked, not a live wait this (lagging, read-only) session has not seen yet: its key index names it.
      const key = root.state.keys[0] as string;
      this.adopt(await this.waiting.read(key), key);
    });
  }

  /**
   * Reads back every parked wait whose deadline is at or before `now` and looks up the next deadline among
   * those still in storage (the scheduler wakes then). A corrupt tree is reported blocked and skipped; a
   * failed read is tried again a little later.
   */
  async loadDue(now: number): Promise<void> {
    if (this.state.parkedDue === undefined || this.state.parkedDue > now) return;
    let next: number | undefined;
    try {
      for (let limit = DEADLINE_PAGE; ; limit *= 2) {
        const rows = await this.storage.readDeadlines(this.state.id, limit);
        for (const row of rows) {
          const { at, id } = deadlineOfRow(row);
          if (this.state.task(id) || this.state.blocked("task", id)) continue;
          if (at > now) {
            next = at;
            break;
          }
          await this.watched(async () => {
            const tree = await this.storage.readTaskTree(this.state.id, id);
            try {
              this.adopt(tree);
            } catch (error) {
              if (!(error instanceof CorruptRecordError)) throw error;
              this.block(id, error);
            }
          });
        }
        if (next !== undefined || rows.length < limit) break;
      }
    } catch (error) {
      reduceSession(this.state, { type: "parked-due", at: now + RETRY_MS });
      throw error;
    }
    reduceSession(this.state, { type: "parked-due", at: next });
  }

  /**
   * The pending waits of parked waits memory does not hold: a page of up to `limit` parked waits, newest
   * first, below `before` (the `next` of the previous page: `<version>/<id>` of the last one listed), their
   * keys listed in key order. A corrupt one is reported blocked and left out.
   */
  async readPage(options: { before?: string; limit?: number } = {}): Promise<{
    waits: PendingWait[];
    next?: string;
  }> {
    const limit = pageLimit(options.limit);
    const { waits, last, full } = await this.readWaits(cursorOf(options.before), limit);
    return {
      waits: pendingWaits(waits.map((wait) => wait.task)),
      ...(full && last && { next: `${last.version}/${last.id}` }),
    };
  }

  /**
   * Every wait of the session, in memory and parked in storage, a page at a time: up to `limit` waiting
   * tasks, newest first by the commit that created each (`<version>/<id>`, below `before`), their keys in
   * key order; `next` continues, and `stored` counts the keys read from storage. A page is bounded however
   * many waits memory holds (waits parked while the session ran stay in memory until it reopens). With
   * `prefix`, only keys that start with it are listed (a kernel prefix — `run-on:`, `done:`, `approval:` —
   * reads no storage: those waits are never parked).
   */
  async readAll(options: { before?: string; limit?: number; prefix?: string } = {}): Promise<{
    waits: PendingWait[];
    next?: string;
    stored: number;
  }> {
    const limit = pageLimit(options.limit);
    const before = cursorOf(options.before);
    const prefix = options.prefix ?? "";
    const parked = this.state.parkedInStorage > 0 && !isKernelPrefix(prefix);
    const fromStorage = parked ? await this.readWaits(before, limit) : undefined;
    // Memory after storage: a wait read back meanwhile is listed once, from memory.
    const stored = (fromStorage?.waits ?? []).filter((wait) => !this.state.task(wait.id));
    const waits = [...stored];
    for (const task of this.state.tasks.values()) {
      const at = { version: task.createdVersion ?? 0, id: task.id };
      if (task.state.status === "awaiting" && (!before || isBelow(at, before))) waits.push({ ...at, task });
    }
    // Storage listed a full page and may hold more below its last row: nothing below that row is listed
    // now (memory's older waits come with the page that reads storage there).
    const floor = fromStorage?.full ? fromStorage.last : undefined;
    const candidates = waits.filter(
      (wait) =>
        (!floor || !isBelow(wait, floor)) && pendingWaits([wait.task]).some((w) => w.key.startsWith(prefix)),
    );
    candidates.sort((a, b) => (isBelow(a, b) ? 1 : isBelow(b, a) ? -1 : 0));
    const page = candidates.slice(0, limit);
    const end = page.length === limit ? page.at(-1) : floor;
    const more = candidates.length > limit || floor !== undefined;
    const listed = pendingWaits(page.map((wait) => wait.task)).filter((w) => w.key.startsWith(prefix));
    const storedIds = new Set(stored.map((wait) => wait.id));
    return {
      waits: listed,
      ...(more && end && { next: `${end.version}/${end.id}` }),
      stored: listed.filter((wait) => storedIds.has(wait.taskId)).length,
    };
  }

  /**
   * Up to `limit` parked waits in storage below `before`, newest first, those memory does not hold read with
   * their root task; `last` is the last one storage listed, `full` whether it listed `limit` (more may follow).
   */
  private async readWaits(before: ParkedCursor | undefined, limit: number) {
    const items = await this.storage.readParked(this.state.id, before, limit);
    const waits: { version: number; id: string; task: Task }[] = [];
    for (const item of items) {
      // A wait read back but not moved on by a commit is still parked: listed (the view does not show it).
      const inMemory = this.state.task(item.id) && !this.state.readBack.has(item.id);
      if (inMemory || this.state.blocked("task", item.id)) continue;
      const row = await this.storage.readTask(this.state.id, item.id);
      if (!row) continue;
      try {
        waits.push({ version: item.version, id: item.id, task: storedTask(row) });
      } catch (error) {
        if (!(error instanceof CorruptRecordError)) throw error;
        this.block(item.id, error); // listed as blocked instead, and the page goes on
      }
    }
    return { waits, last: items.at(-1), full: items.length === limit };
  }

  /** Reports a parked wait whose stored tree failed to load (the row stays as it is). */
  private block(id: string, error: CorruptRecordError): void {
    const record = { kind: "task" as const, id, record: error.record, reason: error.reason };
    reduceSession(this.state, { type: "blocked", record });
  }

  /**
   * Runs a read of parked waits and its adoption, noting meanwhile which waits commits move on: a tree read
   * before its wait moved on (taken by a signal, cancelled; then perhaps gone from memory) is not adopted.
   */
  private async watched(readAndAdopt: () => Promise<void>): Promise<void> {
    const began = this.state.beginParkedRead();
    try {
      await readAndAdopt();
    } finally {
      this.state.endParkedRead(began);
    }
  }

  /**
   * Adopts a parked wait's tree as read: only a standalone root awaiting (`key`, when given) not in memory,
   * and not moved on since the read began (see `watched`).
   */
  private adopt(rows: readonly StoredRecord[], key?: string): void {
    const tasks = rows.map((row) => deepFreeze(storedTask(row)));
    const root = tasks[0];
    if (!root || root.createdVersion === undefined || this.state.task(root.id)) return;
    if (this.state.movedOn.has(root.id)) return;
    if (!isStandaloneRoot(root) || root.state.status !== "awaiting") return;
    if (key !== undefined && !root.state.keys.includes(key)) return;
    const item = { version: root.createdVersion, id: root.id, root: root.id };
    reduceSession(this.state, { type: "parked-loaded", item, tasks });
    this.loaded(tasks);
  }
}

/** A task row read back from storage, validated: one that fails is a corrupt record, named. */
function storedTask(row: StoredRecord): Task {
  const parsed = TaskSchema.safeParse(row.value);
  if (!parsed.success)
    throw new CorruptRecordError(row.key, summarizeIssues(parsed.error), { cause: parsed.error });
  return parsed.data;
}

/** A page's size: 100 unless asked, between 1 and 1,000. */
const pageLimit = (limit: number | undefined) => Math.min(Math.max(1, limit ?? 100), 1000);

/** Whether `a` lists after `b` (older: a lower version, or the same with a lower id). */
const isBelow = (a: ParkedCursor, b: ParkedCursor) =>
  a.version < b.version || (a.version === b.version && a.id < b.id);

/** A page cursor `<version>/<id>` (ids may hold `/`); refused with a typed error when it is not one. */
function cursorOf(before: string | undefined): ParkedCursor | undefined {
  if (before === undefined) return undefined;
  const slash = before.indexOf("/");
  const version = Number(before.slice(0, slash));
  if (slash < 1 || !Number.isSafeInteger(version) || slash === before.length - 1)
    throw new InvalidArgumentError(`"${before.slice(0, 80)}" is not a page cursor of parked waits`, [
      { path: "before", message: "must be the next of an earlier page" },
    ]);
  return { version, id: before.slice(slash + 1) };
}
