/**
 * Where the devtools read a session from, always read-only:
 * - local: the session's IndexedDB database on this origin, opened read-only (no Web Lock is taken, so the
 *   tab that leads keeps leading). It listens on the session's BroadcastChannel like a follower tab, and
 *   re-reads the change log on every announcement (and every second, in case none comes).
 * - edge: the HTTP API of a Durable Object session (base URL + token): the view, then the change log and
 *   live commits as Server-Sent Events read with fetch (EventSource cannot send the token), reconnecting
 *   with `Last-Event-ID` after the server ends a stream.
 */

import {
  type CommitRecord,
  CommitRecordSchema,
  type Entry,
  followEdgeChanges,
  indexedDbStorage,
  type Json,
  openSession,
  type PendingWait,
  type RecoveryPlan,
  type Registry,
  type Session,
  type SessionView,
  type Signal,
  type Submission,
  serverEvents,
  type Task,
} from "../../src/index.ts";
import { DurableInbox, type InboxRow, inboxDrop } from "../../worker/inbox.ts";

/** A session the devtools follow, read-only. */
export interface SessionSource {
  readonly label: string;
  /** The history base (empty session, or the view at attach time when older changes were pruned). */
  readonly base: SessionView;
  /**
   * When `base` is the view at attach time but the change log reaches back to version 1: reads those
   * earlier changes (1 … base.version), so the page shows the latest version at once and can scrub back
   * once they are in.
   */
  earlier?(): Promise<CommitRecord[]>;
  /** Delivers retained changes after the base, then live ones, in order. Returns a stop function. */
  follow(
    onChanges: (changes: CommitRecord[]) => void,
    onError: (error: Error) => void,
    onStatus?: (status: "live" | "reconnecting") => void,
    /**
     * The stored session was replaced (a linked session's copy rebuilt from the edge): what the page holds
     * is history no longer stored, and it must attach again.
     */
    onReplaced?: () => void,
  ): () => void;
  /**
   * What resume() would do to each unfinished task now. Local sessions need the app's registry for it;
   * edge sessions answer from their Durable Object (read-only when it is not running).
   */
  previewRecovery?(): Promise<RecoveryPlan>;
  /** A write the devtools offer, only on request: cancelling a submission (edge only). */
  cancelSubmission?(submissionId: string): Promise<Submission>;
  /**
   * The other: answering a wait (a signal), on request. Edge: `POST …/signals/:key`. Local: through the
   * session's durable inbox, which the leading tab drains (the devtools never write the session itself).
   */
  answerWait?(key: string, payload: unknown, requestId: string): Promise<void>;
  /**
   * Submissions beyond the view's working set, newest first, from storage (local sessions): a page of
   * them accepted before version `before`, and the `before` of the next page (null at the end).
   */
  readSubmissions?(
    before: number | undefined,
    limit: number,
  ): Promise<{ submissions: readonly Submission[]; next: number | null }>;
  /**
   * Who drives the session now. Local sessions ask the Web Locks API whether a tab holds the session's
   * leader lock (the devtools never take it); an edge session asks its ownership record (`GET …/replica`):
   * its Durable Object, or a linked tab while that tab's lease lasts. Absent where it cannot be known.
   */
  writer?(): Promise<WriterState>;
  /**
   * Parked waits left in storage, which the view's pending list does not hold (a session with many waits,
   * DESIGN §9): how many there are now, and a page of them, newest first, with the `before` of the next.
   */
  readParkedWaits?(
    before: string | undefined,
    limit: number,
  ): Promise<{ parked: number; waits: readonly PendingWait[]; next: string | null }>;
  /**
   * The signals the session keeps now that no wait has taken yet (they came before their wait), oldest
   * first, as the session holds them at its latest version: the first `limit` of them, and how many in all.
   */
  readEarlySignals?(limit: number): Promise<{ signals: readonly Signal[]; count: number }>;
  /**
   * Drops one of them, on request. Edge: `DELETE …/signals/:key`. Local: through the session's durable inbox,
   * which the leading tab drains (it drops the signal only if it is still the one listed).
   */
  dropEarlySignal?(key: string): Promise<void>;
  /** A task tree as storage holds it now (for a Submission beyond the working set). */
  readTaskTree?(rootId: string): Promise<Task[]>;
  /**
   * A conversation's entries before `before` (a seq), from storage, up to `limit` of them, and the `before`
   * of the next page (null at the conversation's start): entries older than the view's tail.
   */
  readEntries?(
    conversationId: string,
    before: number,
    limit: number,
  ): Promise<{ entries: readonly Entry[]; next: number | null }>;
  close(): Promise<void>;
}

/** Who drives a session's open work (see `SessionSource.writer`). */
export type WriterState =
  /** Local: a tab holds the session's leader lock. */
  | { readonly state: "leading" }
  /** Local: no tab does; open work waits until one opens the session. */
  | { readonly state: "none" }
  /** Edge: the Durable Object writes (its alarm wakes open work with no request). */
  | { readonly state: "edge" }
  /** Edge: a linked browser tab leads while its lease lasts. */
  | { readonly state: "tab"; readonly leaseUntil: number }
  /** Edge: the linked tab's lease ran out; the Durable Object takes over on its alarm. */
  | { readonly state: "lapsed"; readonly leaseUntil: number };

/**
 * The sessions an edge lists for this token (`GET /sessions`, paged through), or undefined when the edge
 * does not list sessions (404).
 */
export async function edgeSessions(baseUrl: string, token: string): Promise<string[] | undefined> {
  const root = baseUrl.replace(/\/+$/, "");
  const ids: string[] = [];
  for (let after: string | null = ""; after !== null && ids.length < 5_000; ) {
    const query = after === "" ? "" : `?after=${encodeURIComponent(after)}`;
    const response = await fetch(`${root}/sessions${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    if (response.status === 404) return undefined;
    if (!response.ok) throw new Error(`${response.status}: ${await problemDetail(response)}`);
    const page = (await response.json()) as { sessions: { id: string }[]; next: string | null };
    ids.push(...page.sessions.map((s) => s.id));
    after = page.next;
  }
  return ids;
}

/** Names of this origin's IndexedDB databases, or undefined where the browser cannot list them. */
export async function localDatabases(): Promise<string[] | undefined> {
  if (typeof indexedDB.databases !== "function") return undefined;
  return (await indexedDB.databases()).flatMap((d) => (d.name ? [d.name] : []));
}

/**
 * Every session this origin holds: each database's `sessions` keys, read in a read-only transaction of
 * the database as it is (opened without a version: no upgrade, nothing created).
 */
export async function localSessions(): Promise<{ database: string; session: string }[]> {
  const found: { database: string; session: string }[] = [];
  for (const database of (await localDatabases()) ?? []) {
    const db = await new Promise<IDBDatabase | undefined>((resolve) => {
      const request = indexedDB.open(database);
      // Deleted since it was listed: opening would create it; abort that instead.
      request.onupgradeneeded = () => request.transaction?.abort();
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => resolve(undefined);
      request.onblocked = () => resolve(undefined);
    });
    if (!db) continue;
    try {
      if (!db.objectStoreNames.contains("sessions")) continue;
      const keys = await new Promise<IDBValidKey[]>((resolve, reject) => {
        const request = db.transaction("sessions", "readonly").objectStore("sessions").getAllKeys();
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
      for (const key of keys) if (typeof key === "string") found.push({ database, session: key });
    } finally {
      db.close();
    }
  }
  return found;
}

/** Opens a local session read-only. `registry` is the app's (recovery preview); without it tasks show as blocked. */
export async function localSource(
  database: string,
  sessionId: string,
  registry?: Registry,
): Promise<SessionSource> {
  // Opening a database by a name that does not exist would create it: attaching never writes, so check.
  const known = await localDatabases();
  if (known && !known.includes(database))
    throw new Error(
      `No IndexedDB database "${database}" on this origin${known.length ? ` (there are: ${known.join(", ")})` : " (there is none)"}; nothing was created.`,
    );
  const storage = indexedDbStorage(database);
  const session: Session = await openSession({
    id: sessionId,
    storage,
    mode: "read",
    ...(registry && { registry }),
  });
  const first = await session.readChanges(0, 1);
  // The latest view first (what the page shows at once); the history before it is read in the background.
  const base = session.view();
  const channel = new BroadcastChannel(`durable-agent:${database}:${sessionId}`);
  /** Leaves an input in the session's durable inbox and tells the tabs: the leading one takes it. */
  const leave = async (row: InboxRow) => {
    const inbox = new DurableInbox(`${database}:inbox`);
    try {
      await inbox.put(sessionId, row);
    } finally {
      await inbox.close();
    }
    channel.postMessage({ type: "inbox" });
  };
  return {
    label: `local ${database} / ${sessionId}`,
    base,
    ...(first.oldestRetained <= 1 && {
      async earlier() {
        const changes: CommitRecord[] = [];
        for (let after = 0; after < base.version; ) {
          const page = await session.readChanges(after, 2_000);
          // Pruned meanwhile, or nothing more: the page keeps what it has (it starts from the base).
          if (page.oldestRetained > after + 1)
            throw new Error(`the history before v${base.version} was pruned meanwhile`);
          const next = page.changes.filter((c) => c.version <= base.version);
          if (next.length === 0) break;
          changes.push(...next);
          after = next.at(-1)?.version ?? base.version;
        }
        return changes;
      },
    }),
    readSubmissions: (before, limit) =>
      session.readSubmissions({ ...(before !== undefined && { before }), limit }),
    readTaskTree: (rootId) => session.readTaskTree(rootId),
    async readParkedWaits(before, limit) {
      const page = await session.readParkedWaits({ ...(before !== undefined && { before }), limit });
      return { parked: session.parkedInStorage, waits: page.waits, next: page.next ?? null };
    },
    async readEarlySignals(limit) {
      const kept = session.earlySignals();
      return { signals: kept.slice(0, limit), count: kept.length };
    },
    async readEntries(conversationId, before, limit) {
      const from = Math.max(0, before - limit);
      return {
        entries: await session.readEntries(conversationId, from, before),
        next: from > 0 ? from : null,
      };
    },
    async writer() {
      const held = (await navigator.locks.query()).held ?? [];
      const leads = held.some((lock) => lock.name === `durable-agent:${database}:${sessionId}`);
      return { state: leads ? "leading" : "none" };
    },
    follow(onChanges, onError, _onStatus, onReplaced) {
      // The session's own subscription replays the change log after the base, then delivers every change
      // refresh() adopts: no gap, no repeat, and the session is current when a change is delivered.
      const stop = session.subscribe(base.version, (change) => onChanges([change]), { onError });
      let refreshing = false;
      let again = false;
      const refresh = () => {
        if (refreshing) {
          again = true;
          return;
        }
        refreshing = true;
        session
          .refresh()
          .catch((error: unknown) => onError(error as Error))
          .finally(() => {
            refreshing = false;
            if (again) {
              again = false;
              refresh();
            }
          });
      };
      channel.onmessage = (event: MessageEvent<{ type: string }>) => {
        // Answer a new leader like a follower would, so it keeps announcing its commits.
        if (event.data.type === "leader") channel.postMessage({ type: "follower" });
        // A rebuilt copy: refreshing would stack its history on the discarded one. The page attaches again.
        if (event.data.type === "replaced" && onReplaced) return onReplaced();
        refresh();
      };
      channel.postMessage({ type: "follower" });
      const poll = setInterval(refresh, 1000);
      refresh();
      return () => {
        stop();
        clearInterval(poll);
        channel.onmessage = null;
      };
    },
    ...(registry && { previewRecovery: async () => session.previewRecovery() }),
    async answerWait(key, payload, requestId) {
      // Checked as the leader will (bad payload, unknown key, conflict), then left in the inbox for it.
      await session.checkSignal(key, payload, { requestId });
      await leave({ signal: { key, payload: payload as Json, requestId } });
    },
    async dropEarlySignal(key) {
      const kept = session.earlySignals().find((signal) => signal.key === key);
      if (kept) await leave(inboxDrop(key, kept.version));
    },
    async close() {
      channel.close();
      await session.close();
      await storage.close();
    },
  };
}

/** Attaches to an edge session over its HTTP API. */
export async function edgeSource(baseUrl: string, token: string, sessionId: string): Promise<SessionSource> {
  const root = `${baseUrl.replace(/\/+$/, "")}/sessions/${encodeURIComponent(sessionId)}`;
  const headers = { authorization: `Bearer ${token}` };
  const response = await fetch(`${root}/view`, { headers });
  if (!response.ok) throw new Error(`${response.status}: ${await problemDetail(response)}`);
  // The latest view first (first paint does not fold the whole log); the history before it, when the change
  // log still reaches version 1, is read in the background (`earlier`).
  const base = (await response.json()) as SessionView;
  const whole = await reachesVersionOne(root, headers);
  const following = new Set<() => void>();
  const read = async <T>(path: string): Promise<T> => {
    const answer = await fetch(`${root}${path}`, { headers });
    if (!answer.ok) throw new Error(`${path}: ${answer.status} ${await problemDetail(answer)}`);
    return (await answer.json()) as T;
  };
  return {
    label: `edge ${baseUrl} / ${sessionId}`,
    base,
    ...(whole && base.version > 0 && { earlier: () => changesThrough(root, headers, base.version) }),
    readSubmissions: (before, limit) =>
      read(`/submissions?limit=${limit}${before === undefined ? "" : `&before=${before}`}`),
    readTaskTree: (rootId) => read(`/tree?root=${encodeURIComponent(rootId)}`),
    async readParkedWaits(before, limit) {
      // The edge's pages list the waits in its memory too (newest first, merged with the parked ones): those
      // are the view's own pending list, which the panel shows once.
      const page = await read<{
        pending: PendingWait[];
        parked: number;
        fromStorage: number;
        next: string | null;
      }>(`/pending?limit=${limit}${before === undefined ? "" : `&before=${encodeURIComponent(before)}`}`);
      return { parked: page.parked, waits: page.pending, next: page.next };
    },
    readEntries: (conversationId, before, limit) =>
      read(`/conversations/${encodeURIComponent(conversationId)}/entries?before=${before}&limit=${limit}`),
    async readEarlySignals(limit) {
      const page = await read<{ earlySignals: Signal[]; count: number }>(`/early-signals?limit=${limit}`);
      return { signals: page.earlySignals, count: page.count };
    },
    async dropEarlySignal(key) {
      const answer = await fetch(`${root}/signals/${encodeURIComponent(key)}`, { method: "DELETE", headers });
      if (!answer.ok) throw new Error(`drop ${key}: ${answer.status} ${await problemDetail(answer)}`);
    },
    async writer() {
      const { ownership } = await read<{ ownership: { holder: string; leaseUntil: number } | null }>(
        "/replica",
      );
      if (ownership?.holder !== "tab") return { state: "edge" };
      const { leaseUntil } = ownership;
      return { state: leaseUntil > Date.now() ? "tab" : "lapsed", leaseUntil };
    },
    follow(onChanges, onError, onStatus) {
      // Reconnects from the last change seen, shows "reconnecting" while it backs off (a stale page never
      // looks live), and stops on a refusal or a session error.
      const stop = followEdgeChanges({
        url: `${root}/events`,
        headers,
        after: base.version,
        onChange: (change) => onChanges([change]),
        onError,
        ...(onStatus && { onStatus }),
      });
      following.add(stop);
      return () => {
        stop();
        following.delete(stop);
      };
    },
    async previewRecovery() {
      const answer = await fetch(`${root}/recovery`, { headers });
      if (!answer.ok) throw new Error(`recovery: ${answer.status} ${await problemDetail(answer)}`);
      return (await answer.json()) as RecoveryPlan;
    },
    async answerWait(key, payload, requestId) {
      const answer = await fetch(`${root}/signals/${encodeURIComponent(key)}`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ requestId, payload }),
      });
      if (!answer.ok) throw new Error(`signal: ${answer.status} ${await problemDetail(answer)}`);
    },
    async cancelSubmission(submissionId) {
      const answer = await fetch(`${root}/submissions/${encodeURIComponent(submissionId)}/cancel`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ reason: "cancelled from devtools" }),
      });
      if (!answer.ok) throw new Error(`cancel: ${answer.status} ${await problemDetail(answer)}`);
      return (await answer.json()) as Submission;
    },
    async close() {
      for (const stop of following) stop();
    },
  };
}

/**
 * Commits 1 … `through` from the session's event stream, read from the start; a stream the server ends
 * first (its time limit) is resumed from the last commit read.
 */
async function changesThrough(
  root: string,
  headers: Record<string, string>,
  through: number,
): Promise<CommitRecord[]> {
  const changes: CommitRecord[] = [];
  while (changes.length < through) {
    const before = changes.length;
    const reading = new AbortController();
    try {
      const stream = await fetch(`${root}/events?since=${changes.length}`, {
        headers,
        signal: reading.signal,
      });
      if (!stream.ok || !stream.body)
        throw new Error(`events: ${stream.status} ${await problemDetail(stream)}`);
      for await (const event of serverEvents(stream.body)) {
        if (event.event === "error") throw new Error(`events: ${event.data}`);
        if (event.event !== "commit") continue;
        const change = JSON.parse(event.data) as CommitRecord;
        if (change.version !== changes.length + 1)
          throw new Error(`the history before v${through} was pruned meanwhile`);
        changes.push(change);
        if (change.version >= through) break;
      }
    } finally {
      reading.abort();
    }
    if (changes.length === before)
      throw new Error(`the event stream ended at v${before}, before v${through}`);
  }
  return changes;
}

/** Whether the session's change log still holds version 1 (then history can start from nothing). */
async function reachesVersionOne(root: string, headers: Record<string, string>): Promise<boolean> {
  const probe = new AbortController();
  const stream = await fetch(`${root}/events?since=0`, { headers, signal: probe.signal });
  if (!stream.ok || !stream.body) return false;
  try {
    for await (const event of serverEvents(stream.body)) return event.event === "commit" && event.id === "1";
    return false;
  } finally {
    probe.abort();
  }
}

async function problemDetail(response: Response): Promise<string> {
  const text = await response.text();
  try {
    return (JSON.parse(text) as { detail?: string }).detail ?? text;
  } catch {
    return text;
  }
}

/** A session's history as the devtools save it: the base view and every change after it, as JSON. */
export interface ExportedHistory {
  readonly format: "durable-agent-history";
  readonly formatVersion: 1;
  /** Where it was read from (`local db / session`, `edge url / session`). */
  readonly label: string;
  readonly exportedAt: number;
  readonly base: SessionView;
  readonly changes: readonly CommitRecord[];
}

/** What the devtools write to a file for `label`'s history. */
export function exportHistory(
  label: string,
  base: SessionView,
  changes: readonly CommitRecord[],
  exportedAt: number,
): ExportedHistory {
  return { format: "durable-agent-history", formatVersion: 1, label, exportedAt, base, changes };
}

/**
 * Reads an exported history back, refusing — with what is wrong and where — anything that is not one: not
 * JSON, another format, a change that is not a valid commit record, or changes that do not follow the base
 * one by one.
 */
export function parseExportedHistory(text: string): ExportedHistory {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new Error(`not a durable-agent history: the file is not JSON (${(error as Error).message})`);
  }
  const file = data as Partial<ExportedHistory> | null;
  if (file?.format !== "durable-agent-history" || file.formatVersion !== 1)
    throw new Error(
      'not a durable-agent history: "format" must be "durable-agent-history", "formatVersion" 1',
    );
  const base = file.base as SessionView | undefined;
  const lists = ["conversations", "documents", "tasks", "submissions", "pending", "blocked"] as const;
  if (
    typeof base?.id !== "string" ||
    !Number.isSafeInteger(base.version) ||
    typeof base.limits !== "object" ||
    lists.some((list) => !Array.isArray(base[list])) ||
    !Array.isArray(file.changes)
  )
    throw new Error(
      `not a durable-agent history: it needs a base view (id, version, limits, ${lists.join(", ")}) and a list of changes`,
    );
  const changes: CommitRecord[] = [];
  for (const [i, raw] of file.changes.entries()) {
    const parsed = CommitRecordSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(
        `change #${i} is not a commit record: ${issue?.path.join(".") || "(root)"}: ${issue?.message}`,
      );
    }
    // The page folds them on from the base: each must follow the one before (as applyChangeToView demands).
    const expected = base.version + i + 1;
    if (parsed.data.version !== expected)
      throw new Error(`change #${i}: version ${parsed.data.version} does not follow version ${expected - 1}`);
    changes.push(parsed.data);
  }
  return { ...(file as ExportedHistory), base, changes };
}

/** An exported history, opened from a file: everything it holds at once, nothing live. */
export function fileSource(name: string, history: ExportedHistory): SessionSource {
  return {
    label: `file ${name} (${history.label}, exported ${new Date(history.exportedAt).toISOString()})`,
    base: history.base,
    follow(onChanges) {
      onChanges([...history.changes]);
      return () => undefined;
    },
    async close() {},
  };
}
