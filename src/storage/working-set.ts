/**
 * What a session reads when it opens, and how settled work is read back later — the same way in every
 * store (DESIGN §9). Open reads the working set only: each conversation's tail, the documents, every
 * unfinished Submission and task tree (the `live` index), and the latest `settled` finished ones (the
 * `items` index, newest first). Everything else stays in storage, reachable by id, by requestId and by
 * page. Stores supply a {@link SessionRowReader} over one transaction; the logic here is shared.
 */

import { childIdsOf } from "./child-runs.ts";
import type { KeyPart, RowWrite, Table } from "./rows.ts";
import { rawNumber, recordName } from "./rows.ts";
import type { ParkedCursor, StoredDocument, StoredItem, StoredRecord, StoredSession } from "./storage.ts";

export type { StoredItem } from "./storage.ts";

/** How a store reads its rows of one session, inside one transaction. */
export interface SessionRowReader {
  /** Every row of a table. */
  all(table: Table): Promise<StoredRecord[]> | StoredRecord[];
  /** The rows of `[id, n]` keys with `from` ≤ n ≤ `to`, in order. */
  range(table: Table, id: string, from: number, to: number): Promise<StoredRecord[]> | StoredRecord[];
  /** One row by its key. */
  get(table: Table, key: readonly KeyPart[]): Promise<StoredRecord | undefined> | StoredRecord | undefined;
  /**
   * Up to `limit` rows of a table keyed by a number first (`[version]` or `[version, id]`), whose number is
   * below `before`, highest first.
   */
  latest(
    table: "items" | "settled" | "changes",
    before: number,
    limit: number,
  ): Promise<StoredRecord[]> | StoredRecord[];
  /**
   * Up to `limit` rows of the `parked` index keyed below `[version, id]` (every row when undefined), highest
   * first: a page of parked waits that may cut one version's many waits anywhere.
   */
  parkedBefore(before: ParkedCursor | undefined, limit: number): Promise<StoredRecord[]> | StoredRecord[];
  /** Up to `limit` rows of the `settled` (or `deadlines`) index, lowest number first. */
  earliest(table: "settled" | "deadlines", limit: number): Promise<StoredRecord[]> | StoredRecord[];
  /** How many rows of the `settled` index (or of its tasks) the session holds. */
  count(table: "settled" | "tasks"): Promise<number> | number;
}

/** An `items` or `live` row as an item: `items/12/sub_3` is version 12, id `sub_3` (ids may hold `/`). */
export function itemOfRow(record: StoredRecord): StoredItem {
  const rest = record.key.slice(record.key.indexOf("/") + 1);
  const slash = rest.indexOf("/");
  return { version: Number(rest.slice(0, slash)), id: rest.slice(slash + 1), value: record.value };
}

/**
 * Reads what a session's state is made of on open: everything for a session stored in format 1 (it has no
 * indexes yet), else the working set.
 */
export async function readStoredSession(
  sessionId: string,
  meta: unknown,
  request: { readonly entryTail: number; readonly settled: number },
  reader: SessionRowReader,
): Promise<StoredSession> {
  const conversations = await reader.all("conversations");
  const entries: StoredRecord[] = [];
  for (const conversation of conversations) {
    const count = rawNumber(conversation.value, "entryCount") ?? 0;
    if (count === 0) continue;
    const id = conversation.key.slice("conversations/".length);
    entries.push(...(await reader.range("entries", id, Math.max(0, count - request.entryTail), count - 1)));
  }
  const documents: StoredDocument[] = [];
  for (const head of await reader.all("documents")) {
    const from = rawNumber(head.value, "baselineVersion");
    const id = head.key.slice("documents/".length);
    const rows =
      from === undefined ? [] : await reader.range("documentRows", id, from, Number.MAX_SAFE_INTEGER);
    documents.push({ head, rows });
  }
  const base = {
    meta: { key: recordName("sessions", [sessionId]), value: meta },
    conversations,
    entries,
    documents,
  };
  if (rawNumber(meta, "format") === 1) {
    return { ...base, tasks: await reader.all("tasks"), submissions: await reader.all("submissions") };
  }
  const live = (await reader.all("live")).map(itemOfRow);
  const liveIds = new Set(live.map((item) => item.id));
  // Format 3 keeps finished items in an index of their own: the latest are read directly, never by
  // stepping over unfinished ones (a session may hold thousands, such as open waits).
  const settled =
    rawNumber(meta, "format") === 2
      ? await latestSettled(reader, liveIds, request.settled)
      : (await reader.latest("settled", Number.MAX_SAFE_INTEGER, request.settled)).map(itemOfRow);
  const items = [...live, ...settled];
  const { tasks, submissions } = await readItems(reader, items);
  const signals: StoredRecord[] = [];
  for (const early of await reader.all("earlySignals")) {
    const row = await reader.get("signals", [early.key.slice("earlySignals/".length)]);
    if (row) signals.push(row);
  }
  return { ...base, tasks, submissions, items, signals, parked: await readParked(reader, meta) };
}

/** How many parked waits the session stores (the session row counts them), and their earliest deadline. */
async function readParked(reader: SessionRowReader, meta: unknown): Promise<{ count: number; due?: number }> {
  const count = rawNumber(meta, "parked") ?? 0;
  if (count === 0) return { count };
  const [first] = await reader.earliest("deadlines", 1);
  return { count, ...(first && { due: deadlineOfRow(first).at }) };
}

/** A `deadlines` row's time and wait (`deadlines/1700000000000/task_1`; ids may hold `/`). */
export function deadlineOfRow(row: StoredRecord): { at: number; id: string } {
  const { version, id } = itemOfRow(row);
  return { at: version, id };
}

/** A read of the trees of the parked waits on `keys`, in their order (see `readWaitingTree`). */
export const readWaitingTrees = (keys: readonly string[]) => (reader: SessionRowReader) =>
  Promise.all(keys.map((key) => readWaitingTree(reader, key)));

/** A read of the signal rows of `keys`, in their order, undefined where none is stored. */
export const readSignalRows = (keys: readonly string[]) => (reader: SessionRowReader) =>
  Promise.all(keys.map((key) => reader.get("signals", [key])));

/** What those two reads answer for a session the store does not hold. */
export const noSignalRows = (keys: readonly string[]) => keys.map((): StoredRecord | undefined => undefined);
export const noWaitingTrees = (keys: readonly string[]) => keys.map((): StoredRecord[] => []);

/** The task tree of the parked wait on `key`, empty when no parked wait has that key. */
export async function readWaitingTree(reader: SessionRowReader, key: string): Promise<StoredRecord[]> {
  const row = await reader.get("waitKeys", [key]);
  return typeof row?.value === "string" ? readTrees(reader, [row.value]) : [];
}

/** Up to `count` finished items, newest first, skipping unfinished ones (format 2, which has no settled index). */
async function latestSettled(
  reader: SessionRowReader,
  liveIds: ReadonlySet<string>,
  count: number,
): Promise<StoredItem[]> {
  const settled: StoredItem[] = [];
  const limit = count + liveIds.size + 16;
  let before = Number.MAX_SAFE_INTEGER;
  while (settled.length < count) {
    let page = (await reader.latest("items", before, limit)).map(itemOfRow);
    if (page.length === 0) break;
    const lowest = (page[page.length - 1] as StoredItem).version;
    // A full page may have cut the items of its lowest version: those are read whole with the next page.
    const cut = page.length === limit && page.some((item) => item.version > lowest);
    if (cut) page = page.filter((item) => item.version > lowest);
    for (const item of page) {
      if (!liveIds.has(item.id)) settled.push(item);
      if (settled.length === count) break;
    }
    if (page.length < limit && !cut) break;
    before = cut ? lowest + 1 : lowest;
  }
  return settled;
}

/** The Submissions and task trees of `items`, read by key. */
export async function readItems(
  reader: SessionRowReader,
  items: readonly StoredItem[],
): Promise<{ tasks: StoredRecord[]; submissions: StoredRecord[] }> {
  const submissions: StoredRecord[] = [];
  const roots: string[] = [];
  for (const { value } of items) {
    const submission = field(value, "submission");
    const root = field(value, "root");
    if (submission !== undefined) {
      const row = await reader.get("submissions", [submission]);
      if (row) submissions.push(row);
    }
    if (root !== undefined) roots.push(root);
  }
  return { tasks: await readTrees(reader, roots), submissions };
}

/** Every task of the trees under `roots`, level by level (a parent's children by their index rows). */
export async function readTrees(reader: SessionRowReader, roots: readonly string[]): Promise<StoredRecord[]> {
  // Many trees (thousands of open waits): when they are most of the stored tasks, one whole-table read
  // costs less than a read per task and per child list (each request has its own overhead in every store).
  if (roots.length >= BULK_TREES && (await reader.count("tasks")) <= roots.length * 4)
    return treesFromTables(reader, roots);
  const tasks: StoredRecord[] = [];
  let level = [...roots];
  while (level.length > 0) {
    // The level's tasks and child lists requested at once (one round trip per level), read in order.
    const [found, children] = await Promise.all([
      Promise.all(level.map((id) => reader.get("tasks", [id]))),
      Promise.all(level.map((id) => reader.range("children", id, 0, Number.MAX_SAFE_INTEGER))),
    ]);
    for (const row of found) if (row) tasks.push(row);
    const next: string[] = [];
    for (const rows of children) for (const child of rows) next.push(...childIdsOf(child.value));
    level = next;
  }
  return tasks;
}

/** From this many trees on, `readTrees` considers reading the task and child tables whole. */
const BULK_TREES = 256;

/** The trees of `roots`, walked in memory over the whole `tasks` table (a child names its parent and index). */
async function treesFromTables(reader: SessionRowReader, roots: readonly string[]): Promise<StoredRecord[]> {
  const byId = new Map<string, StoredRecord>();
  const childrenOf = new Map<string, { id: string; index: number }[]>();
  for (const row of await reader.all("tasks")) {
    const id = field(row.value, "id");
    if (id === undefined) continue;
    byId.set(id, row);
    const parent = field(row.value, "parentId");
    if (parent === undefined) continue;
    const index = (row.value as { childIndex?: unknown }).childIndex;
    const siblings = childrenOf.get(parent) ?? [];
    if (siblings.length === 0) childrenOf.set(parent, siblings);
    siblings.push({ id, index: typeof index === "number" ? index : 0 });
  }
  const tasks: StoredRecord[] = [];
  let level = [...roots];
  while (level.length > 0) {
    const next: string[] = [];
    for (const id of level) {
      const row = byId.get(id);
      if (row) tasks.push(row);
      const siblings = childrenOf.get(id) ?? [];
      next.push(...siblings.sort((x, y) => x.index - y.index).map((child) => child.id));
    }
    level = next;
  }
  return tasks;
}

/** A page of items below `before` (newest first): for paging through settled Submissions. */
export async function readItemPage(
  reader: SessionRowReader,
  before: number,
  limit: number,
): Promise<{ items: StoredItem[]; submissions: StoredRecord[] }> {
  const items = (await reader.latest("items", before, limit)).map(itemOfRow);
  const submissions: StoredRecord[] = [];
  for (const { value } of items) {
    const id = field(value, "submission");
    const row = id === undefined ? undefined : await reader.get("submissions", [id]);
    if (row) submissions.push(row);
  }
  return { items, submissions };
}

/** Whether an item's key `[version, id]` is below `cursor`. */
export function isBelow(item: StoredItem, cursor: ParkedCursor): boolean {
  return item.version < cursor.version || (item.version === cursor.version && item.id < cursor.id);
}

/** Up to `limit` parked waits keyed below `before` (the newest when undefined), newest first. */
export async function readParkedPage(
  reader: SessionRowReader,
  before: ParkedCursor | undefined,
  limit: number,
): Promise<StoredItem[]> {
  return (await reader.parkedBefore(before, limit)).map(itemOfRow);
}

/** The oldest finished items (for retention, DESIGN §9), and how many finished items are stored. */
export async function readSettledPage(
  reader: SessionRowReader,
  limit: number,
): Promise<{ items: StoredItem[]; count: number }> {
  const items = (await reader.earliest("settled", limit)).map(itemOfRow);
  return { items, count: await reader.count("settled") };
}

/** The Submission a requestId was accepted as, if any. */
export async function readRequest(
  reader: SessionRowReader,
  requestId: string,
): Promise<StoredRecord | undefined> {
  const index = await reader.get("requests", [requestId]);
  return typeof index?.value === "string" ? reader.get("submissions", [index.value]) : undefined;
}

/**
 * The index rows a session stored in format 1 needs to move to format 2: every Submission and root task
 * becomes an item (keyed below 1, in the order they were accepted or created, since format 1 recorded no
 * version for them), unfinished ones are live, each requestId is indexed, each child under its parent.
 */
export function migrationRows(
  tasks: readonly StoredRecord[],
  submissions: readonly StoredRecord[],
): RowWrite[] {
  const rows: RowWrite[] = [];
  const taskValues = tasks.map((row) => row.value as Record<string, unknown>).filter(isObject);
  const byParent = new Map<string, Record<string, unknown>[]>();
  for (const task of taskValues) {
    const parent = typeof task.parentId === "string" ? task.parentId : undefined;
    if (parent === undefined) continue;
    const list = byParent.get(parent) ?? [];
    list.push(task);
    byParent.set(parent, list);
  }
  for (const [parent, children] of byParent) {
    children.sort(byCreation);
    children.forEach((child, i) => {
      rows.push({ table: "children", key: [parent, i], value: child.id });
    });
  }
  const items: { at: number; id: string; item: { submission?: string; root?: string }; open: boolean }[] = [];
  const rootsOfSubmissions = new Set<string>();
  for (const row of submissions) {
    const s = row.value as Record<string, unknown>;
    if (!isObject(s) || typeof s.id !== "string") continue;
    const root = typeof s.taskId === "string" ? s.taskId : undefined;
    if (root) rootsOfSubmissions.add(root);
    if (typeof s.requestId === "string") rows.push({ table: "requests", key: [s.requestId], value: s.id });
    const open = s.status === "accepted" || s.status === "running";
    items.push({
      at: Number(s.acceptedAt) || 0,
      id: s.id,
      item: { submission: s.id, ...(root && { root }) },
      open,
    });
  }
  for (const task of taskValues) {
    if (task.parentId !== undefined || typeof task.id !== "string" || rootsOfSubmissions.has(task.id))
      continue;
    const status = (task.state as { status?: unknown } | undefined)?.status;
    const open = status !== "succeeded" && status !== "failed" && status !== "cancelled";
    items.push({ at: Number(task.createdAt) || 0, id: task.id, item: { root: task.id }, open });
  }
  items.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  items.forEach(({ id, item, open }, i) => {
    const version = i - items.length; // -n … -1: before every version a format-2 commit will use
    rows.push({ table: "items", key: [version, id], value: item });
    rows.push({ table: open ? "live" : "settled", key: [version, id], value: item });
  });
  return rows;
}

/**
 * The `settled` rows a format-2 session needs to move to format 3: one per item that is not live. Read
 * once, by the writer that upgrades it (its whole item index: the one cost that grows with history).
 */
export function settledRows(items: readonly StoredRecord[], live: readonly StoredRecord[]): RowWrite[] {
  const open = new Set(live.map((row) => row.key.slice("live/".length)));
  return items
    .filter((row) => !open.has(row.key.slice("items/".length)))
    .map((row) => {
      const { version, id } = itemOfRow(row);
      return { table: "settled" as const, key: [version, id], value: row.value };
    });
}

/** The rows that move a stored session to the current format (none when it is current). */
export async function upgradeRows(
  format: number | undefined,
  reader: Pick<SessionRowReader, "all">,
): Promise<RowWrite[] | undefined> {
  if (format === 1) return migrationRows(await reader.all("tasks"), await reader.all("submissions"));
  if (format === 2) return settledRows(await reader.all("items"), await reader.all("live"));
  return undefined;
}

/** {@link upgradeRows} for a store whose reads are synchronous (inside a synchronous transaction). */
export function upgradeRowsSync(
  format: number | undefined,
  reader: { all(table: Table): StoredRecord[] },
): RowWrite[] | undefined {
  if (format === 1) return migrationRows(reader.all("tasks"), reader.all("submissions"));
  if (format === 2) return settledRows(reader.all("items"), reader.all("live"));
  return undefined;
}

function byCreation(a: Record<string, unknown>, b: Record<string, unknown>): number {
  return Number(a.createdAt) - Number(b.createdAt) || (String(a.id) < String(b.id) ? -1 : 1);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function field(value: unknown, name: string): string | undefined {
  const v = isObject(value) ? value[name] : undefined;
  return typeof v === "string" ? v : undefined;
}
