/**
 * A session's edge host as the leading tab's `ReplicaRemote`, over the edge HTTP API
 * (`…/replica/claim|push|release|changes`). Refusals come back as the kernel's typed errors (the edge says
 * who leads: `OwnedElsewhereError`; the copies diverged: `ReplicationDivergedError`; a bad request:
 * `InvalidArgumentError`; no permission: `RefusedWriteError`), so the link stops on them; a dropped
 * connection, a 429 or a 5xx is a plain `Error`, and the link retries it.
 *
 * @example
 * const linked = await linkSession({ id, storage, registry, remote: edgeReplica({ baseUrl, token, sessionId: id }) });
 */
import {
  EnvironmentError,
  InvalidArgumentError,
  OwnedElsewhereError,
  RecordTooLargeError,
  RefusedWriteError,
  ReplicationDivergedError,
  SessionNotFoundError,
} from "../errors.ts";
import type { ClaimRequest, Grant, PushAck, PushRequest, ReleaseRequest, ReplicaRemote } from "./protocol.ts";

export interface EdgeReplicaOptions {
  /** The API's base URL (the Worker's origin, or where it is mounted). */
  readonly baseUrl: string;
  /** A bearer token allowed to `replicate` this session (a string, or a function for a refreshed one). */
  readonly token: string | (() => string | Promise<string>);
  readonly sessionId: string;
  /** Default `globalThis.fetch`. */
  readonly fetch?: typeof fetch;
}

interface ProblemBody {
  code?: string;
  detail?: string;
  errors?: { path: string; message: string }[];
  /** A snapshot too large to move: its size (characters of rows), the bound, the session's version. */
  size?: number;
  limit?: number;
  version?: number;
}

export function edgeReplica(options: EdgeReplicaOptions): ReplicaRemote {
  const root = `${options.baseUrl.replace(/\/+$/, "")}/sessions/${encodeURIComponent(options.sessionId)}/replica`;
  const send = options.fetch ?? ((input, init) => fetch(input, init));
  const call = async <T>(path: string, body?: unknown): Promise<T> => {
    const token = typeof options.token === "string" ? options.token : await options.token();
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await send(`${root}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers,
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    if (response.status === 204) return undefined as T;
    if (response.ok) return (await response.json()) as T;
    throw await refusal(response, options.sessionId);
  };
  return {
    claim: (request: ClaimRequest) => call<Grant>("/claim", request),
    push: (request: PushRequest) => call<PushAck>("/push", request),
    release: (request: ReleaseRequest) => call<void>("/release", request),
    changes: (after, limit) => call(`/changes?after=${after}&limit=${limit}`),
    snapshot: () => call("/snapshot"),
  };
}

/** The typed error for a refused request; a plain Error (retried by the link) for a passing failure. */
async function refusal(response: Response, sessionId: string): Promise<Error> {
  const problem = (await response.json().catch(() => ({}))) as ProblemBody;
  const detail = problem.detail ?? `HTTP ${response.status}`;
  switch (problem.code) {
    case "owned-elsewhere":
    case "stale-owner":
      return new OwnedElsewhereError(detail, "", null);
    case "replication-diverged":
      return new ReplicationDivergedError(detail, 0);
    case "environment-mismatch":
      return new EnvironmentError(detail, []);
    case "invalid-argument":
      return new InvalidArgumentError(detail, problem.errors ?? []);
    // The edge never held the session (a follower must not wait for it forever).
    case "session-not-found":
      return new SessionNotFoundError(sessionId);
    case "snapshot-too-large": {
      const size = (n: number | undefined) => (typeof n === "number" && Number.isFinite(n) ? n : 0);
      const { limit, version } = problem;
      const record = `sessions/${sessionId}`;
      return new RecordTooLargeError(detail, record, size(problem.size), size(limit), size(version));
    }
  }
  if (response.status === 401 || response.status === 403 || response.status === 413)
    return new RefusedWriteError(`the edge refused the session's replication: ${detail}`, "replica");
  return new Error(`edge replica: ${detail}`);
}
