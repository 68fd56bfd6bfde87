/**
 * An edge session: the HTTP API of a Durable Object session (base URL + token): the view, then the change
 * log and live commits as Server-Sent Events read with fetch (EventSource cannot send the token),
 * reconnecting with `Last-Event-ID` after the server ends a stream.
 */

import {
  type CommitRecord,
  followEdgeChanges,
  type PendingWait,
  type RecoveryPlan,
  type SessionView,
  type Signal,
  type Submission,
  serverEvents,
} from "../../src/index.ts";
import type { SessionSource } from "./session-source.ts";

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
