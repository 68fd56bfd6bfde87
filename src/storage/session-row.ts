/**
 * The session row's life in every store: made when a session is created, given the next owner epoch when
 * a writer opens it (fencing off the earlier ones), and checked against a commit's guard inside the
 * commit's transaction.
 */
import { randomIds } from "../clock.ts";
import { SessionNotFoundError, StaleOwnerError } from "../errors.ts";
import type { SessionMeta } from "../records/schemas.ts";
import { STORAGE_FORMAT } from "../records/schemas.ts";
import { checkFormat } from "./format.ts";
import { rawNumber } from "./rows.ts";
import type { CommitGuard } from "./storage.ts";

/** A new session row. */
function newSessionMeta(sessionId: string, at: number, epoch: number): SessionMeta {
  // Random, not from the session's injected id source: two creations must differ even where a test numbers
  // its ids from the same start, and nothing depends on its value but that.
  const incarnation = randomIds.next("s");
  return {
    id: sessionId,
    format: STORAGE_FORMAT,
    version: 0,
    epoch,
    createdAt: at,
    updatedAt: at,
    incarnation,
  };
}

/**
 * Which creation of a session a stored session row is of (`SessionMeta.incarnation`, made with the row;
 * absent in rows made before it): a session deleted and created again under its id is another one, and a
 * store handle never takes what it cached of the first for the second (`TailCache`).
 */
export function incarnationOf(meta: unknown): string | undefined {
  const value =
    typeof meta === "object" && meta !== null ? (meta as { incarnation?: unknown }).incarnation : undefined;
  return typeof value === "string" ? value : undefined;
}

/**
 * The session row a writer stores when it opens a session: a new session's first row, or the stored one
 * with the next owner epoch (fencing off every earlier writer) — or with `granted`, an epoch another host of
 * the session handed out, refused when the stored one is already at or past it. A row without a usable epoch
 * is refused.
 */
export function nextWriterMeta(stored: unknown, sessionId: string, at: number, granted?: number): unknown {
  if (stored === undefined) return newSessionMeta(sessionId, at, granted ?? 1);
  checkFormat(stored, sessionId);
  const epoch = rawNumber(stored, "epoch");
  if (epoch === undefined) throw new SessionNotFoundError(sessionId);
  if (granted === undefined) return { ...(stored as object), epoch: epoch + 1 };
  if (epoch >= granted) {
    const version = rawNumber(stored, "version") ?? -1;
    throw new StaleOwnerError(
      `session ${sessionId}: epoch ${granted} was already superseded by epoch ${epoch}; nothing was written`,
      { expectedEpoch: granted, storedEpoch: epoch, expectedVersion: version, storedVersion: version },
    );
  }
  return { ...(stored as object), epoch: granted };
}

/** A format-1 session row once its index rows are written: format 2. */
export function upgradedMeta(stored: unknown): unknown {
  return { ...(stored as object), format: STORAGE_FORMAT };
}

/**
 * Checks a commit batch's guard against the stored session row. Called inside the store's transaction,
 * so the check and the write are one atomic step.
 */
export function checkGuard(storedMeta: unknown, guard: CommitGuard): SessionMeta {
  const storedEpoch = rawNumber(storedMeta, "epoch") ?? -1;
  const storedVersion = rawNumber(storedMeta, "version") ?? -1;
  const epochOk = guard.replica
    ? storedEpoch >= 0 && storedEpoch <= guard.epoch
    : storedEpoch === guard.epoch;
  const same = guard.incarnation === undefined || incarnationOf(storedMeta) === guard.incarnation;
  if (!same || !epochOk || storedVersion !== guard.expectedVersion) {
    const why = !same
      ? "the session it opened was deleted (this one was created again under its id)"
      : !epochOk
        ? `owner epoch ${guard.epoch} was superseded by epoch ${storedEpoch}`
        : `version moved from ${guard.expectedVersion} to ${storedVersion}`;
    throw new StaleOwnerError(`session ${guard.sessionId}: stale writer, ${why}; nothing was written`, {
      expectedEpoch: guard.epoch,
      storedEpoch,
      expectedVersion: guard.expectedVersion,
      storedVersion,
    });
  }
  // A replica's row takes the epoch of the owner whose commits it now holds.
  return guard.replica ? { ...(storedMeta as SessionMeta), epoch: guard.epoch } : (storedMeta as SessionMeta);
}
