/**
 * The commit pipeline of DESIGN §3: one turn at a time per session; each request builds a draft on top of
 * the state (and of the drafts before it in the same group), the drafts are validated, storage saves the
 * group in one transaction, and only then is the state adopted and published.
 */
import type { Clock, TimerHandle, Timers } from "../clock.ts";
import { afterThisTick } from "../clock.ts";
import {
  DuplicateKeyError,
  ensureError,
  InvalidArgumentError,
  KernelError,
  RecordTooLargeError,
  SessionStoppedError,
  StorageError,
} from "../errors.ts";
import type { Task } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import type { CommitGuard, Storage } from "../storage/storage.ts";
import { taskExists } from "../tasks/refusals.ts";
import { buildChecked } from "./chosen-ids.ts";
import type { SealedCommit } from "./draft.ts";
import { freezeSealed, KernelDraft } from "./draft.ts";
import { GroupOverlay } from "./group-overlay.ts";
import type { ParkingReader, SessionState, StateReader } from "./state.ts";

/** What a commit call resolves to. */
export interface CommitResult<T> {
  /** Whatever the build function returned. */
  readonly value: T;
  /** The session version at which the change is visible (unchanged when the draft was empty). */
  readonly version: number;
}

/**
 * Builds a commit's changes on the kernel's draft. Runs inside the commit turn, so it must be synchronous
 * and do no I/O. Code outside the kernel gets a narrower draft (see `role-drafts.ts`).
 */
export type KernelCommit<T> = (draft: KernelDraft) => T;

export interface KernelCommitOptions {
  /**
   * Loss-tolerant progress (streamed text, live tool output): may be delayed and batched with other
   * deferred changes into one commit. Any critical commit flushes pending deferred ones first. Such a
   * commit may only change progress documents (the draft refuses anything else when it is sealed).
   */
  readonly deferred?: boolean;
}

/** A request whose draft made it into the group, and what it resolves to once storage confirms. */
interface Settled {
  readonly request: PendingRequest;
  readonly value: unknown;
  readonly version: number;
  /** The commit its changes went into (undefined: its draft changed nothing). */
  readonly sealed: SealedCommit | undefined;
  readonly deferred: boolean;
}

/** One group of drafts, sealed and waiting for storage. */
interface PreparedGroup {
  readonly sealed: SealedCommit[];
  readonly settled: Settled[];
}

interface PendingRequest {
  readonly build: KernelCommit<unknown>;
  readonly resolve: (result: CommitResult<unknown>) => void;
  readonly reject: (error: Error) => void;
  /** How many times its chosen task ids were looked up in storage (see `chosen-ids.ts`). */
  lookups?: number;
}

/** How many lookups of chosen task ids one request gets: a build that chooses other ids each run is refused. */
const MAX_LOOKUPS = 4;

/** What the pipeline needs from its session. */
export interface PipelineHost {
  readonly sessionId: string;
  readonly state: SessionState;
  readonly storage: Storage;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly deferredFlushMs: number;
  /** Past this many live waits of trees without a Submission, new ones are parked (see `parking.ts`). */
  readonly liveWaits: number;
  /** A task by id, from memory or storage (is a chosen task id taken: `chosen-ids.ts`). */
  readTask(taskId: string): Promise<Task | undefined>;
  /** The change log must keep every commit after this version (see `OpenSessionOptions.changeLogFloor`). */
  changeLogFloor?(): number | undefined;
  /** Adopts a confirmed commit into memory and publishes it. */
  adopt(sealed: SealedCommit): void;
  /** Storage failed while saving: the session must stop. */
  stop(error: KernelError): void;
}

export class CommitPipeline {
  private readonly queue: PendingRequest[] = [];
  private readonly deferred: PendingRequest[] = [];
  private deferredTimer: TimerHandle | undefined;
  private flushDeferred = false;
  private scheduled = false;
  private running = false;
  private failure: Error | undefined;
  /** The chosen task ids of the request being built, and those looked up for it (`chosen-ids.ts`). */
  private readonly chosen = { absent: new Set<string>(), unverified: [] as string[] };
  /** A request, first in the queue, whose chosen ids are looked up before it is built again. */
  private lookup: { readonly request: PendingRequest; readonly ids: readonly string[] } | undefined;

  constructor(private readonly host: PipelineHost) {}

  /** Queues a commit. Requests queued in the same tick share one storage transaction. */
  commit<T>(build: KernelCommit<T>, options: KernelCommitOptions = {}): Promise<CommitResult<T>> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<CommitResult<T>>((resolve, reject) => {
      const request: PendingRequest = {
        build,
        resolve: resolve as (result: CommitResult<unknown>) => void,
        reject,
      };
      if (options.deferred) {
        this.deferred.push(request);
        this.deferredTimer ??= this.host.timers.setTimeout(() => {
          this.deferredTimer = undefined;
          this.flushDeferred = true;
          this.schedule();
        }, this.host.deferredFlushMs);
      } else {
        this.queue.push(request);
        this.schedule();
      }
    });
  }

  /** Commits pending deferred changes now. */
  async flush(): Promise<void> {
    if (this.deferred.length === 0 && !this.running && this.queue.length === 0) return;
    await this.commit(() => undefined);
  }

  /** Rejects everything still queued; later calls fail with `error`. */
  fail(error: Error): void {
    this.failure ??= error;
    if (this.deferredTimer !== undefined) this.host.timers.clearTimeout(this.deferredTimer);
    this.deferredTimer = undefined;
    for (const request of [...this.deferred.splice(0), ...this.queue.splice(0)]) request.reject(this.failure);
  }

  private schedule(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    // A microtask, not a timer: requests made in the same synchronous run (phases that finished in the
    // same tick) join one group commit without adding latency.
    afterThisTick(() => {
      this.scheduled = false;
      void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (!this.failure && (this.queue.length > 0 || (this.flushDeferred && this.deferred.length > 0))) {
        if (this.lookup) await this.lookUp(this.lookup);
        await this.runGroup();
      }
    } finally {
      this.running = false;
      this.flushDeferred = false;
    }
  }

  private async runGroup(): Promise<void> {
    const group = this.prepareGroup();
    if (group.sealed.length > 0) {
      const { state } = this.host;
      try {
        const floor = this.host.changeLogFloor?.();
        const saving = this.host.storage.commit(
          {
            ...writerGuard(this.host.sessionId, state),
            ...(floor !== undefined && { keepChangesAfter: floor }),
          },
          group.sealed.map((s) => s.commit),
        );
        // Frozen once the store has run up to its first await (the DO store serializes everything there),
        // before any other code can run.
        for (const commit of group.sealed) freezeSealed(commit);
        await saving;
      } catch (cause) {
        if (isRefusal(cause) && this.refuse(group, cause)) return;
        const error = asStorageFailure(cause);
        for (const { request } of group.settled) request.reject(error);
        this.fail(new SessionStoppedError(this.host.sessionId, { cause: error }));
        this.host.stop(error);
        return;
      }
      for (const commit of group.sealed) this.host.adopt(commit);
    }
    for (const { request, value, version } of group.settled) request.resolve({ value, version });
  }

  /**
   * Looks the chosen task ids of the request first in the queue up in storage (the groups before it have
   * landed, and none runs meanwhile): one that exists refuses the request, as memory's would; otherwise it is
   * built again with them known absent. A failed read fails the request; nothing was written.
   */
  private async lookUp(lookup: { request: PendingRequest; ids: readonly string[] }): Promise<void> {
    this.lookup = undefined;
    let refusal: Error | undefined;
    try {
      for (const id of lookup.ids) {
        if (await this.host.readTask(id)) {
          refusal = taskExists(id);
          break;
        }
        this.chosen.absent.add(id);
      }
    } catch (error) {
      refusal = ensureError(error);
    }
    if (!refusal) return;
    const at = this.queue.indexOf(lookup.request);
    if (at >= 0) this.queue.splice(at, 1);
    lookup.request.reject(refusal);
  }

  /**
   * The store refused one commit of the group as too large, before writing anything. The requests whose
   * changes made that commit fail with the error; every other request of the group is queued again, in its
   * order, and rebuilt on the next turn (builds are plain functions of their draft). The session goes on.
   * False when the error names no commit of the group: then it is treated as a storage failure.
   */
  private refuse(group: PreparedGroup, error: RecordTooLargeError | DuplicateKeyError): boolean {
    const refused = group.sealed.find((sealed) => sealed.commit.version === error.version);
    if (!refused) return false;
    const critical: PendingRequest[] = [];
    const deferred: PendingRequest[] = [];
    for (const settled of group.settled) {
      if (settled.sealed === refused) settled.request.reject(error);
      else (settled.deferred ? deferred : critical).push(settled.request);
    }
    this.queue.unshift(...critical);
    if (deferred.length > 0) {
      this.deferred.unshift(...deferred);
      this.flushDeferred = true;
    }
    return true;
  }

  /**
   * Builds and seals the drafts of one group, synchronously. Requests whose build or validation failed are
   * rejected here; the others are settled once storage confirms the group.
   */
  private prepareGroup(): PreparedGroup {
    const { state } = this.host;
    const critical = this.queue.splice(0);
    const deferred = this.deferred.splice(0);
    if (deferred.length > 0 && this.deferredTimer !== undefined) {
      this.host.timers.clearTimeout(this.deferredTimer);
      this.deferredTimer = undefined;
    }
    this.flushDeferred = false;

    const sealed: SealedCommit[] = [];
    const settled: Settled[] = [];
    let version = state.version;
    if (deferred.length > 0) {
      const group = this.buildDeferredGroup(state, version + 1, deferred);
      if (group.sealed) {
        sealed.push(group.sealed);
        version++;
      }
      for (const [request, value] of group.values)
        settled.push({ request, value, version, sealed: group.sealed, deferred: true });
    }
    // Drafts after the first read through one overlay of everything sealed so far in this group. It is
    // built only when a later draft needs it: most groups hold a single commit. What a later draft can
    // read is frozen first, so build functions never see a mutable record.
    let overlay: GroupOverlay | undefined;
    let absorbed = 0;
    for (let index = 0; index < critical.length; index++) {
      const request = critical[index] as PendingRequest;
      let base: StateReader & ParkingReader = state;
      if (sealed.length > 0) {
        overlay ??= new GroupOverlay(state);
        for (; absorbed < sealed.length; absorbed++) {
          const commit = sealed[absorbed] as SealedCommit;
          freezeSealed(commit);
          overlay.absorb(commit);
        }
        base = overlay;
      }
      const draft = new KernelDraft(base, this.host.registry, version + 1, this.host.clock.now());
      this.chosen.unverified.length = 0;
      try {
        const value = buildChecked(draft, this.chosen, request.build);
        if (this.chosen.unverified.length > 0) {
          // Task ids it chose that only storage may hold: this group ends before it, and it is built again
          // once they are looked up, still ahead of every request made after it.
          const lookups = (request.lookups ?? 0) + 1;
          if (lookups > MAX_LOOKUPS) throw changingIds();
          request.lookups = lookups;
          this.queue.unshift(...critical.slice(index));
          this.lookup = { request, ids: [...this.chosen.unverified] };
          break;
        }
        let commit: SealedCommit | undefined;
        if (!draft.isEmpty) {
          commit = draft.seal(state.epoch, false, this.host.liveWaits);
          sealed.push(commit);
          version++;
        }
        settled.push({ request, value, version, sealed: commit, deferred: false });
      } catch (error) {
        // A failure while preparing discards only this draft; the group goes on without it.
        request.reject(ensureError(error));
      }
    }
    // Ids looked up serve the request they were looked up for, built just now: memory answers from here on.
    if (!this.lookup) this.chosen.absent.clear();
    return { sealed, settled };
  }

  /**
   * Coalesces deferred requests into one draft. Builds are plain functions of the draft, so when one throws
   * the draft is rebuilt without it rather than committing half of its changes.
   */
  private buildDeferredGroup(base: StateReader & ParkingReader, version: number, requests: PendingRequest[]) {
    let pending = requests;
    for (;;) {
      const draft = new KernelDraft(base, this.host.registry, version, this.host.clock.now());
      const values: [PendingRequest, unknown][] = [];
      let failed: PendingRequest | undefined;
      for (const request of pending) {
        try {
          values.push([request, request.build(draft)]);
        } catch (error) {
          request.reject(ensureError(error));
          failed = request;
          break;
        }
      }
      if (failed) {
        pending = pending.filter((r) => r !== failed);
        continue;
      }
      try {
        const sealed = draft.isEmpty ? undefined : draft.seal(this.host.state.epoch, true);
        return { draft, sealed, values };
      } catch (error) {
        // The combined change does not validate: fail these deferred requests, never the critical ones.
        for (const request of pending) request.reject(ensureError(error));
        return { draft, sealed: undefined, values: [] };
      }
    }
  }
}

function changingIds(): InvalidArgumentError {
  return new InvalidArgumentError(
    "the commit chose other task ids each time it was built; a build must be a plain function of its draft",
    [{ path: "id", message: "task ids must not change between builds of one commit" }],
  );
}

/** A store's refusal of one commit of a group, before writing anything: the rest of the group goes on. */
function isRefusal(cause: unknown): cause is RecordTooLargeError | DuplicateKeyError {
  return cause instanceof RecordTooLargeError || cause instanceof DuplicateKeyError;
}

function asStorageFailure(cause: unknown): KernelError {
  if (cause instanceof KernelError) return cause;
  return new StorageError("storage-failed", `storage failed to commit: ${ensureError(cause).message}`, {
    cause,
  });
}

/** What the store must find for a writer's next commit: the state's epoch, version and incarnation. */
export function writerGuard(sessionId: string, state: SessionState): CommitGuard {
  const { epoch, version: expectedVersion, incarnation } = state;
  return { sessionId, epoch, expectedVersion, ...(incarnation !== undefined && { incarnation }) };
}
