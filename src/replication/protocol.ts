/**
 * What the two hosts of one session say to each other (DESIGN §6): a browser tab that leads the session
 * claims it from the session's edge host, pushes its commits there in version order, renews its lease by
 * pushing, and hands the session back by releasing it. The shapes are validated with zod on the receiving
 * side, so the same schemas serve an in-process link and the edge's HTTP routes.
 */
import { z } from "zod";
import { utf8Length } from "../records/json.ts";
import type { CommitRecord } from "../records/schemas.ts";

/** The host name the edge itself holds a session under. */
export const EDGE_HOLDER = "edge";

/** At most this many commits in one push (a client splits longer backlogs). */
export const MAX_PUSH_COMMITS = 256;

/**
 * At most this many bytes of commits (as JSON) in one push, unless it is one commit: half the edge's default
 * bound on a push's body (4 MiB), which a single commit, at most one 2 MB row there, always fits.
 */
export const MAX_PUSH_BYTES = 2 * 1024 * 1024;

/** The commits one push carries, from the first: at most {@link MAX_PUSH_COMMITS} and {@link MAX_PUSH_BYTES}. */
export function pushBatch(commits: readonly CommitRecord[]): CommitRecord[] {
  let bytes = 0;
  let count = 0;
  for (const commit of commits.slice(0, MAX_PUSH_COMMITS)) {
    bytes += utf8Length(JSON.stringify(commit)) + 1;
    if (count > 0 && bytes > MAX_PUSH_BYTES) break;
    count++;
  }
  return commits.slice(0, count);
}

/**
 * At most this many bytes of commits (as JSON) in one page of a catch-up (`changes`), beyond its first two:
 * a host that reads 256 large commits at once holds them all in memory, several times over as it answers.
 * Two, so that a reader that asks from the commit it holds last (to check it) always gets one more.
 */
export const MAX_CHANGES_BYTES = 4 * 1024 * 1024;

/** How long a remote holder's claim stands without a push or renewal, unless the host sets another. */
export const DEFAULT_LEASE_MS = 15_000;

const Holder = z
  .string()
  .min(1)
  .max(160)
  .regex(/^[A-Za-z0-9_.:~-]+$/, "letters, digits and _ . : ~ - only")
  .refine((h) => h !== EDGE_HOLDER, `"${EDGE_HOLDER}" is the edge's own name`);
const Count = z.number().int().nonnegative();

/** Epochs stay far below 2^53, where `epoch + 1` would stop fencing anyone. */
const MAX_EPOCH = 2 ** 31;
const Epoch = z.number().int().positive().max(MAX_EPOCH);

/** A claim: who asks to lead, and the owner epoch of its own copy (0 when it has none). */
export const ClaimRequestSchema = z.object({
  holder: Holder,
  epoch: Count.max(MAX_EPOCH),
});
export type ClaimRequest = z.infer<typeof ClaimRequestSchema>;

/** One push: the holder's epoch and its next commits, oldest first (none: only renew the lease). */
export const PushRequestSchema = z.object({
  holder: Holder,
  epoch: Epoch,
  commits: z.array(z.unknown()).max(MAX_PUSH_COMMITS),
});
export type PushRequest = Omit<z.infer<typeof PushRequestSchema>, "commits"> & {
  readonly commits: readonly CommitRecord[];
};

/** A release: the holder stopped writing and every commit through `version` was pushed. */
export const ReleaseRequestSchema = z.object({
  holder: Holder,
  epoch: Epoch,
  version: Count,
});
export type ReleaseRequest = z.infer<typeof ReleaseRequestSchema>;

/** What a claim grants: the epoch to write with, and the head of the other host's copy. */
export interface Grant {
  readonly epoch: number;
  /** The version the granting host holds. */
  readonly version: number;
  /** The epoch of the commit at `version` there (null at version 0, or when no longer in its change log). */
  readonly headEpoch: number | null;
  /**
   * When that commit was made (its `at`; absent from hosts before it was sent): two copies created apart
   * under one id have commits of the same version and epoch, not of the same time.
   */
  readonly headAt?: number | null;
  /** When the lease runs out unless a push renews it (the granting host's clock). */
  readonly leaseUntil: number;
  /** How long each renewal extends the lease. */
  readonly leaseMs: number;
}

/** A push's answer: the version the receiving host now holds (push again after it) and the lease. */
export interface PushAck {
  readonly version: number;
  readonly leaseUntil: number;
}

/** Who writes a session now, as its edge host records it. */
export interface Ownership {
  /** {@link EDGE_HOLDER} or a remote holder's name. */
  readonly holder: string;
  /** The epoch the holder writes with. */
  readonly epoch: number;
  /** A remote holder's lease end; null for the edge itself. */
  readonly leaseUntil: number | null;
  /** The version this host holds. */
  readonly version: number;
}

/** The other host of a linked session, as the leading side uses it (in process, or over HTTP). */
export interface ReplicaRemote {
  claim(request: ClaimRequest): Promise<Grant>;
  push(request: PushRequest): Promise<PushAck>;
  release(request: ReleaseRequest): Promise<void>;
  /**
   * Commits after `afterVersion` from the other host's change log, oldest first (a catch-up). `more`: the
   * page was cut short by its size ({@link MAX_CHANGES_BYTES}), and later commits follow: ask again.
   */
  changes(
    afterVersion: number,
    limit: number,
  ): Promise<{ changes: unknown[]; oldestRetained: number; more?: boolean }>;
  /**
   * The session whole at the other host's version (`exportSession`), for a copy its change log can no
   * longer bring up to date (behind its pruning). Optional: without it such a copy stops.
   */
  snapshot?(): Promise<unknown>;
}
