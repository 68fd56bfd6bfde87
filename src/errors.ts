/** One error hierarchy: each error has a stable `code`, an explicit `name` and an optional `cause`. */

/** Stable error codes. Adding one is a minor change; renaming one is breaking. */
export const KERNEL_ERROR_CODES = [
  "stale-owner",
  "storage-failed",
  "quota-exceeded",
  "storage-closed",
  "invalid-record",
  "record-too-large",
  "duplicate-request",
  "duplicate-key",
  "corrupt-record",
  "blocked-record",
  "session-stopped",
  "session-closed",
  "session-not-found",
  "read-only",
  "history-truncated",
  "invalid-argument",
  "invalid-definition",
  "invalid-task-event",
  "refused-write",
  "unknown-signal",
  "signal-conflict",
  "signal-not-awaited",
  "wait-not-found",
  "early-signals-full",
  "owned-elsewhere",
  "replication-diverged",
  "environment-mismatch",
  "internal",
] as const;
export type KernelErrorCode = (typeof KERNEL_ERROR_CODES)[number];
const KNOWN_CODES: ReadonlySet<string> = new Set(KERNEL_ERROR_CODES);

/** Base class of every error the kernel throws on purpose. */
export class KernelError extends Error {
  override readonly name: string = "KernelError";
  /** Whether retrying the same call later may succeed without any other change. */
  readonly retryable: boolean = false;
  constructor(
    readonly code: KernelErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Another writer took ownership of the session (a newer epoch), or the version moved under us. */
export class StaleOwnerError extends KernelError {
  override readonly name = "StaleOwnerError";
  constructor(
    message: string,
    readonly details: {
      expectedEpoch: number;
      storedEpoch: number;
      expectedVersion: number;
      storedVersion: number;
    },
  ) {
    super("stale-owner", message);
  }
}

/** The store could not save or read: quota, an aborted transaction, a closed connection. */
export class StorageError extends KernelError {
  override readonly name = "StorageError";
  constructor(
    code: "storage-failed" | "quota-exceeded" | "storage-closed",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/**
 * A commit holds a record larger than the store can keep in one row (a Durable Object SQLite row holds
 * about 2 MB). The store refused the commit before writing anything: only the work that made that commit
 * fails, the session goes on.
 */
export class RecordTooLargeError extends KernelError {
  override readonly name = "RecordTooLargeError";
  constructor(
    message: string,
    /** The row that does not fit (`entries/main/7`, `changes/12`, …). */
    readonly record: string,
    /** Its size in UTF-8 bytes, as the store would write it. */
    readonly bytes: number,
    /** The most the store holds in one row. */
    readonly limit: number,
    /** The version of the refused commit. */
    readonly version: number,
  ) {
    super("record-too-large", message);
  }
}

/**
 * A commit would create a record whose key is taken in storage (a requestId that already has a Submission,
 * a signal key that already has a signal), which memory no longer knew. The store refused that commit before
 * writing anything; the caller answers with the stored record instead.
 */
export class DuplicateKeyError extends KernelError {
  override readonly name: string = "DuplicateKeyError";
  constructor(
    /** The row whose key is taken, e.g. `requests/r1` or `signals/approval:task_3`. */
    readonly record: string,
    /** The version of the refused commit. */
    readonly version: number,
    code: "duplicate-key" | "duplicate-request" = "duplicate-key",
  ) {
    super(code, `${record} already exists; nothing was written`);
  }
}

/** A second Submission for a requestId that already has one (see {@link DuplicateKeyError}). */
export class DuplicateRequestError extends DuplicateKeyError {
  override readonly name = "DuplicateRequestError";
  constructor(
    readonly requestId: string,
    version: number,
  ) {
    super(`requests/${requestId}`, version, "duplicate-request");
  }
}

/** A record the kernel was about to write does not match its schema. Nothing was written. */
export class ValidationError extends KernelError {
  override readonly name = "ValidationError";
  constructor(
    message: string,
    readonly record: string,
    readonly issues: readonly { path: string; message: string }[],
    options?: { cause?: unknown },
  ) {
    super("invalid-record", message, options);
  }
}

/** A stored record failed to load. Names the record; the record itself is left untouched in storage. */
export class CorruptRecordError extends KernelError {
  override readonly name = "CorruptRecordError";
  constructor(
    readonly record: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super("corrupt-record", `stored record ${record} failed to load: ${reason}`, options);
  }
}

/** A write touched a record that is blocked (it failed to load); writing it would overwrite evidence. */
export class BlockedRecordError extends KernelError {
  override readonly name = "BlockedRecordError";
  constructor(
    readonly record: string,
    readonly reason: string,
  ) {
    super("blocked-record", `record ${record} is blocked (${reason}); it cannot be changed until it loads`);
  }
}

/** The session stopped after a storage failure; reopen it to see what was really saved. */
export class SessionStoppedError extends KernelError {
  override readonly name = "SessionStoppedError";
  constructor(sessionId: string, options?: { cause?: unknown }) {
    super("session-stopped", `session ${sessionId} stopped after a storage failure; reopen it`, options);
  }
}

/** The session was closed by its host. */
export class SessionClosedError extends KernelError {
  override readonly name = "SessionClosedError";
  constructor(sessionId: string) {
    super("session-closed", `session ${sessionId} is closed`);
  }
}

/** A read-only open of a session that does not exist. */
export class SessionNotFoundError extends KernelError {
  override readonly name = "SessionNotFoundError";
  constructor(readonly sessionId: string) {
    super("session-not-found", `session ${sessionId} does not exist`);
  }
}

/** A write was attempted through a read-only session. */
export class ReadOnlyError extends KernelError {
  override readonly name = "ReadOnlyError";
  constructor(sessionId: string, what: string) {
    super("read-only", `session ${sessionId} is open read-only; cannot ${what}`);
  }
}

/** The change log no longer holds the versions asked for (or, `replaced`, the session was rebuilt since). */
export class HistoryTruncatedError extends KernelError {
  override readonly name = "HistoryTruncatedError";
  constructor(
    readonly requestedAfter: number,
    readonly oldestRetained: number,
    /** The store holds another creation of the session since (a copy rebuilt from its other host). */
    readonly replaced = false,
  ) {
    const why = replaced
      ? `the session was replaced since version ${requestedAfter} (a copy rebuilt from its other host)`
      : `changes after version ${requestedAfter} are no longer retained (oldest kept: ${oldestRetained})`;
    super("history-truncated", `${why}; load a fresh view`);
  }
}

/**
 * A signal was refused (nothing stored): no definition covers its key (`unknown-signal`), its key already
 * has a different signal (`signal-conflict`), or its key takes signals only while a task awaits it and none
 * does (`signal-not-awaited`: a tool approval for a call that is not waiting for one), or its key names a
 * task the session does not have (`wait-not-found`: a call it never had, or one retention removed), or no task
 * awaits it and the session already holds as many signals no wait has taken as it keeps
 * (`early-signals-full`).
 */
export class SignalRefusedError extends KernelError {
  override readonly name = "SignalRefusedError";
  constructor(
    code:
      | "unknown-signal"
      | "signal-conflict"
      | "signal-not-awaited"
      | "wait-not-found"
      | "early-signals-full",
    /** The signal's key. */
    readonly key: string,
    message: string,
  ) {
    super(code, message);
  }
}

/**
 * Whether a signal was refused because its wait was already answered or has ended — by anyone, through
 * any backend (`signal-conflict` / `signal-not-awaited` in process, 409 over HTTP): the caller lost a race,
 * it did nothing wrong.
 */
export function isSettledElsewhere(error: unknown): boolean {
  const { code, status } = (error ?? {}) as { code?: unknown; status?: unknown };
  // By its code when it has one: a 409 `owned-elsewhere` (another host writes the session) settled nothing;
  // a wait gone with its task (removed by retention, or never there) has nothing left to settle.
  if (typeof code === "string")
    return code === "signal-conflict" || code === "signal-not-awaited" || code === "wait-not-found";
  return status === 409;
}

/** A caller passed an argument the kernel cannot accept (a malformed submission, a version from the future). */
export class InvalidArgumentError extends KernelError {
  override readonly name = "InvalidArgumentError";
  constructor(
    message: string,
    readonly issues: readonly { path: string; message: string }[] = [],
  ) {
    super("invalid-argument", message);
  }
}

/** A task kind, tool, document type or registry was defined wrongly (a programming error, thrown at once). */
export class DefinitionError extends KernelError {
  override readonly name = "DefinitionError";
  constructor(message: string) {
    super("invalid-definition", message);
  }
}

/**
 * The task machine refused an event: it does not apply to the task's or Submission's current state (a
 * sleeping task cannot end a phase, a succeeded one cannot wake). Nothing was changed.
 */
export class InvalidTaskEventError extends KernelError {
  override readonly name = "InvalidTaskEventError";
  constructor(
    message: string,
    /** The refused event's type, e.g. `woke`. */
    readonly event: string,
    /** The task or Submission it was for. */
    readonly target: string,
  ) {
    super("invalid-task-event", message);
  }
}

/**
 * A draft was asked to write what its role may not: an app's draft writing a kernel-owned document, or a
 * deferred (loss-tolerant) commit carrying anything but progress documents. Nothing was written.
 */
export class RefusedWriteError extends KernelError {
  override readonly name = "RefusedWriteError";
  constructor(
    message: string,
    /** What was refused, e.g. `entries/main/4` or `documents/plan`. */
    readonly record: string,
  ) {
    super("refused-write", message);
  }
}

/**
 * The session is written by another host of it (a browser tab holding the lease, or the edge): this host
 * may read it but not write, claim it or push to it now. `holder` is who writes; `until`, when a remote
 * holder's lease runs out unless renewed.
 */
export class OwnedElsewhereError extends KernelError {
  override readonly name = "OwnedElsewhereError";
  constructor(
    message: string,
    readonly holder: string,
    readonly until: number | null,
  ) {
    super("owned-elsewhere", message);
  }
}

/**
 * A linked session's two hosts hold different histories after `version`: this side wrote commits the other
 * never received, and the other has since moved on under a newer owner. Nothing was changed on either
 * side; the local copy can be discarded and opened again from the other host.
 */
export class ReplicationDivergedError extends KernelError {
  override readonly name = "ReplicationDivergedError";
  constructor(
    message: string,
    readonly version: number,
  ) {
    super("replication-diverged", message);
  }
}

/**
 * This host's registry cannot continue the session's unfinished work (a task kind or version it lacks, a
 * tool it no longer has, or one whose replay policy changed): it does not take the session over, which
 * stays with the host that can. `problems` names each task and why.
 */
export class EnvironmentError extends KernelError {
  override readonly name = "EnvironmentError";
  constructor(
    message: string,
    readonly problems: readonly { readonly taskId?: string; readonly reason: string }[],
  ) {
    super("environment-mismatch", message);
  }
}

/** Turns anything thrown into an `Error`, keeping the original as `cause` when it was not one. */
export function ensureError(value: unknown): Error {
  if (value instanceof Error) return value;
  if (typeof value === "object" && value !== null && "message" in value) {
    const err = new Error(String((value as { message: unknown }).message), { cause: value });
    if ("name" in value && typeof value.name === "string") err.name = value.name;
    return err;
  }
  // `undefined` (or a function, a symbol) has no JSON: its name, not an empty message.
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return new Error(text, { cause: value });
}

/** The wire form of an error crossing a worker boundary or HTTP. */
export interface SerializedError {
  name: string;
  code: string;
  message: string;
}

/** Serializes any error to `{ name, code, message }`. */
export function serializeError(value: unknown): SerializedError {
  const err = ensureError(value);
  const code = err instanceof KernelError ? err.code : "internal";
  return { name: err.name, code, message: err.message };
}

/** Rebuilds a serialized error as a `KernelError` carrying the original name and code. */
export function deserializeError(wire: SerializedError): KernelError {
  const code = (KNOWN_CODES.has(wire.code) ? wire.code : "internal") as KernelErrorCode;
  const err = new KernelError(code, wire.message);
  Object.defineProperty(err, "name", { value: wire.name });
  return err;
}

const SESSION_FAILURES: ReadonlySet<string> = new Set([
  "session-stopped",
  "session-closed",
  "stale-owner",
  "storage-failed",
  "quota-exceeded",
  "storage-closed",
]);

/** Whether an error means the session itself can go no further (stopped, fenced, storage gone). */
export function isSessionFailure(error: unknown): boolean {
  return error instanceof KernelError && SESSION_FAILURES.has(error.code);
}
