/**
 * A session object's side of a linked session (DESIGN §6): while a browser tab leads the session, this
 * object keeps a replica of it (the tab's pushed commits, in its SQLite store), answers reads from that
 * replica, refuses writes naming who leads, and takes the session over — new epoch, resume — when the tab
 * releases it or its lease runs out (the object's alarm is kept at the lease's end).
 */
import type { z } from "zod";
import {
  assertCanContinue,
  ClaimRequestSchema,
  type CommitRecord,
  describeIssues,
  EDGE_HOLDER,
  InvalidArgumentError,
  type Ownership,
  type OwnershipStore,
  openSession,
  ownedElsewhere,
  PushRequestSchema,
  RecordTooLargeError,
  type Registry,
  ReleaseRequestSchema,
  ReplicaHost,
  type Session,
  type Storage,
  systemClock,
} from "../src/index.ts";
import type { DurableObjectStorageLike } from "./do-sqlite-sql.ts";
import { problemResponse } from "./problem.ts";
import type { InternalRoute } from "./protocol.ts";

/** Ownership records in the object's SQLite database, next to the session's own tables. */
export function sqliteOwnership(storage: DurableObjectStorageLike): OwnershipStore {
  // Reads never create the table: a read of a session that was never linked must store nothing. Only this
  // object writes its database, so whether the table exists is looked up once, then known.
  let exists: boolean | undefined;
  const hasTable = () => {
    exists ??=
      storage.sql
        .exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'replica_ownership'")
        .toArray().length > 0;
    return exists;
  };
  return {
    get: async (sessionId) => {
      if (!hasTable()) return undefined;
      const row = storage.sql
        .exec(
          "SELECT holder, epoch, lease_until, version FROM replica_ownership WHERE session_id = ?",
          sessionId,
        )
        .toArray()[0];
      if (!row) return undefined;
      return {
        holder: String(row.holder),
        epoch: Number(row.epoch),
        leaseUntil: row.lease_until === null ? null : Number(row.lease_until),
        version: Number(row.version),
      } satisfies Ownership;
    },
    put: async (sessionId, o) => {
      if (!hasTable()) {
        storage.sql.exec(
          "CREATE TABLE IF NOT EXISTS replica_ownership (session_id TEXT PRIMARY KEY, holder TEXT NOT NULL, epoch INTEGER NOT NULL, lease_until INTEGER, version INTEGER NOT NULL)",
        );
        exists = true;
      }
      storage.sql.exec(
        "INSERT OR REPLACE INTO replica_ownership (session_id, holder, epoch, lease_until, version) VALUES (?, ?, ?, ?, ?)",
        sessionId,
        o.holder,
        o.epoch,
        o.leaseUntil,
        o.version,
      );
    },
  };
}

export type ReplicaRoute = Extract<InternalRoute, { op: `replica${string}` }>;

export interface SessionReplicaOptions {
  readonly storage: Storage;
  readonly ownership: OwnershipStore;
  readonly registry: () => Registry;
  readonly leaseMs?: number;
  /** Stops the object's own writer (a tab is claiming the session). */
  stopWriter(sessionId: string): Promise<void>;
  /** Opens the object's own writer and resumes the session (it was handed over, or the lease ran out). */
  startWriter(sessionId: string): Promise<void>;
  /** Points the object's alarm at `at` (a remote holder's lease end). */
  setAlarm(at: number): void;
}

/** A session object's replica side: ownership, the replica routes, and reads while a tab leads. */
export class SessionReplica {
  readonly host: ReplicaHost;
  private follower: Promise<Session> | undefined;

  constructor(private readonly options: SessionReplicaOptions) {
    this.host = new ReplicaHost({
      storage: options.storage,
      ownership: options.ownership,
      clock: systemClock,
      ...(options.leaseMs !== undefined && { leaseMs: options.leaseMs }),
      stopWriter: options.stopWriter,
      canContinue: (sessionId) => assertCanContinue(options.storage, sessionId, options.registry()),
      startWriter: async (sessionId) => {
        await this.dropFollower();
        await options.startWriter(sessionId);
      },
    });
  }

  /** The ownership record if a tab leads the session now (its lease may have run out: see `writable`). */
  ledElsewhere(sessionId: string): Promise<Ownership | undefined> {
    return this.host.ledElsewhere(sessionId);
  }

  /**
   * Throws `OwnedElsewhereError` if a tab leads the session: this object may not write it. A tab whose
   * lease ran out is taken over first (its alarm may not have fired yet).
   */
  async assertWritable(sessionId: string): Promise<void> {
    const led = await this.host.ledElsewhere(sessionId);
    if (led && !(await this.host.expire(sessionId))) throw ownedElsewhere(sessionId, led);
  }

  /** A read-only session over the replica, brought up to what was pushed (reads while a tab leads). */
  async reader(sessionId: string): Promise<Session> {
    this.follower ??= openSession({
      id: sessionId,
      storage: this.options.storage,
      registry: this.options.registry(),
      mode: "read",
    });
    const reader = await this.follower;
    await reader.refresh();
    return reader;
  }

  /**
   * The alarm fired while a tab may lead: takes the session over if its lease ran out, else points the
   * alarm at the renewed lease end. True when the object should drive the session itself.
   */
  async onAlarm(sessionId: string): Promise<boolean> {
    if (!(await this.host.ledElsewhere(sessionId))) return true;
    if (await this.host.expire(sessionId)) return true;
    const current = await this.host.ownership(sessionId);
    if (current?.leaseUntil == null) return false;
    // Renewed: watch the new end. Ran out, but this object cannot continue the session: look again a lease
    // later (its code may be deployed by then) rather than at once, over and over.
    const now = systemClock.now(); // the clock the replica host keeps its leases by
    this.options.setAlarm(current.leaseUntil > now ? current.leaseUntil : now + this.host.leaseMs);
    return false;
  }

  /** Answers one replica route. */
  async handle(route: ReplicaRoute, body: unknown): Promise<Response> {
    const { sessionId } = route;
    switch (route.op) {
      case "replica": {
        // Who writes, not who they are: a holder's name (its principal's digest) stays on this side.
        const current = await this.host.ownership(sessionId);
        const ownership = current && {
          holder: current.holder === EDGE_HOLDER ? EDGE_HOLDER : "tab",
          epoch: current.epoch,
          leaseUntil: current.leaseUntil,
          version: current.version,
        };
        return Response.json({ ownership: ownership ?? null });
      }
      case "replica-claim": {
        const claim = parseBody(ClaimRequestSchema, body, "claim");
        const grant = await this.host.claim(sessionId, claim);
        this.options.setAlarm(grant.leaseUntil);
        return Response.json(grant);
      }
      case "replica-push": {
        const push = parseBody(PushRequestSchema, body, "push");
        const ack = await this.host.push(sessionId, { ...push, commits: push.commits as CommitRecord[] });
        if (this.follower) await (await this.follower).refresh(); // streams following the replica see it
        return Response.json(ack);
      }
      case "replica-release": {
        await this.host.release(sessionId, parseBody(ReleaseRequestSchema, body, "release"));
        return new Response(null, { status: 204 });
      }
      case "replica-changes":
        return Response.json(await this.host.changes(sessionId, route.after, route.limit));
      case "replica-snapshot": {
        try {
          return Response.json(await this.host.snapshot(sessionId));
        } catch (error) {
          // Its own size is all this says of the session: the caller may read it whole anyway.
          if (!(error instanceof RecordTooLargeError)) throw error;
          const fields = { size: error.bytes, limit: error.limit, version: error.version };
          return problemResponse(413, "snapshot-too-large", error.message, undefined, {}, fields);
        }
      }
    }
  }

  private async dropFollower(): Promise<void> {
    const follower = this.follower;
    this.follower = undefined;
    await (await follower?.catch(() => undefined))?.close();
  }
}

function parseBody<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new InvalidArgumentError(`invalid ${what}`, describeIssues(result.error));
}
