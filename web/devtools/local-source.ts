/**
 * A local session: its IndexedDB database on this origin, opened read-only (no Web Lock is taken, so the
 * tab that leads keeps leading). It listens on the session's BroadcastChannel like a follower tab, and
 * re-reads the change log on every announcement (and every second, in case none comes).
 */

import {
  type CommitRecord,
  indexedDbStorage,
  type Json,
  openSession,
  type Registry,
  type Session,
} from "../../src/index.ts";
import { inboxDrop, inboxRowId } from "../../worker/inbox.ts";
import { type InboxMessage, InboxRelay } from "../../worker/inbox-relay.ts";
import { SessionWatch } from "../../worker/session-watch.ts";
import type { SessionSource } from "./session-source.ts";

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
  // The page's writes go through the session's durable inbox, as a follower tab's do, and are said done only
  // once the leading tab committed them: it may refuse one (a wait answered meanwhile by another tab, a
  // signal a wait took before its drop came), and a row merely queued is not a write.
  const inbox = new InboxRelay(sessionId, database, (message) => channel.postMessage(message));
  channel.addEventListener("message", (event: MessageEvent<InboxMessage>) => {
    if (event.data.type === "refused") inbox.refused(event.data);
  });
  const watch = new SessionWatch(
    {
      session,
      subscribe: (from, listener, onError) => session.subscribe(from, listener, onError ? { onError } : {}),
    },
    inbox,
  );
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
      const options = { requestId };
      if (await session.checkSignal(key, payload, options)) return; // a repeat: stored already
      const row = { signal: { key, payload: payload as Json, requestId } };
      await watch.signal(key, payload as Json, options, { row: inboxRowId(row), queued: inbox.queue(row) });
    },
    async dropEarlySignal(key) {
      const kept = session.earlySignals().find((signal) => signal.key === key);
      if (!kept) throw new Error(`no signal is kept for ${key} (a wait took it, or it was dropped)`);
      const row = inboxDrop(key, kept.version);
      const dropped = await watch.dropped(kept, { row: inboxRowId(row), queued: inbox.queue(row) });
      if (!dropped) throw new Error(`a wait took the signal kept for ${key} before the drop came`);
    },
    async close() {
      watch.close(new Error("the devtools detached before the leading tab took it (it stays queued for it)"));
      await inbox.close();
      channel.close();
      await session.close();
      await storage.close();
    },
  };
}
