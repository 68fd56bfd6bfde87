/**
 * A Storage that forwards every call to a store running elsewhere (inside workerd), rebuilding typed
 * errors on the way back, so the contract suite can run unchanged against the Durable Object store.
 */
import {
  type CommitGuard,
  type CommitRecord,
  CorruptRecordError,
  DuplicateKeyError,
  DuplicateRequestError,
  KernelError,
  type KeyPart,
  RecordTooLargeError,
  SessionNotFoundError,
  StaleOwnerError,
  type Storage,
  StorageError,
  type Table,
  type WriteHook,
} from "../../src/index.ts";
import type { RowWrite } from "../../src/storage/rows.ts";
import type { StoredRecord } from "../../src/storage/storage.ts";

export type Post = (
  body: unknown,
) => Promise<{ ok: boolean; result?: unknown; error?: WireError; written?: RowWrite[] }>;
interface WireError {
  name: string;
  code: string;
  message: string;
  details?: unknown;
}

const classes: Record<string, { prototype: object }> = {
  StaleOwnerError,
  StorageError,
  SessionNotFoundError,
};

function rebuild(wire: WireError): KernelError {
  if (wire.name === "CorruptRecordError") {
    const d = wire.details as { record: string; reason: string };
    return new CorruptRecordError(d.record, d.reason);
  }
  if (wire.name === "RecordTooLargeError") {
    const d = wire.details as { record: string; bytes: number; limit: number; version: number };
    return new RecordTooLargeError(wire.message, d.record, d.bytes, d.limit, d.version);
  }
  if (wire.name === "DuplicateKeyError") {
    const d = wire.details as { record: string; version: number };
    return new DuplicateKeyError(d.record, d.version);
  }
  if (wire.name === "DuplicateRequestError") {
    const d = wire.details as { record: string; version: number };
    return new DuplicateRequestError(d.record.slice("requests/".length), d.version);
  }
  const error = new KernelError(wire.code as KernelError["code"], wire.message);
  const cls = classes[wire.name];
  if (cls) Object.setPrototypeOf(error, cls.prototype);
  Object.defineProperty(error, "name", { value: wire.name });
  if (wire.details !== undefined) Object.defineProperty(error, "details", { value: wire.details });
  return error;
}

export class RemoteStorage implements Storage {
  constructor(
    private readonly post: Post,
    private readonly options: {
      retainChanges?: number;
      retainChangeBytes?: number;
      tailCommits?: number;
      maxExportChars?: number;
      onWrite?: WriteHook;
    } = {},
  ) {}

  /**
   * Calls the store in workerd. Rows it wrote past the first `told` (the ones the write hook was already
   * shown here, to find where to inject a fault) are shown to the hook once the call returns.
   */
  private async call(
    method: string,
    args: unknown[],
    failAtRow?: number,
    told = 0,
    dryRun = false,
  ): Promise<unknown> {
    const reply = await this.post({
      ...(dryRun && { dryRun }),
      method,
      args,
      ...(this.options.retainChanges !== undefined && { retainChanges: this.options.retainChanges }),
      ...(this.options.retainChangeBytes !== undefined && {
        retainChangeBytes: this.options.retainChangeBytes,
      }),
      ...(this.options.tailCommits !== undefined && { tailCommits: this.options.tailCommits }),
      ...(this.options.maxExportChars !== undefined && { maxExportChars: this.options.maxExportChars }),
      ...(failAtRow !== undefined && { failAtRow }),
    });
    if (!reply.ok && reply.error) throw rebuild(reply.error);
    if (dryRun) return reply.written ?? [];
    const hook = this.options.onWrite;
    if (hook) for (const [i, row] of (reply.written ?? []).slice(told).entries()) hook(row, told + i);
    return reply.result === null ? undefined : reply.result;
  }

  readEntries: Storage["readEntries"] = (...args) =>
    this.call("readEntries", args) as ReturnType<Storage["readEntries"]>;
  readChanges: Storage["readChanges"] = (...args) =>
    this.call("readChanges", args) as ReturnType<Storage["readChanges"]>;
  readDocumentRows: Storage["readDocumentRows"] = (...args) =>
    this.call("readDocumentRows", args) as ReturnType<Storage["readDocumentRows"]>;
  readSubmission: Storage["readSubmission"] = (...args) =>
    this.call("readSubmission", args) as ReturnType<Storage["readSubmission"]>;
  readRequest: Storage["readRequest"] = (...args) =>
    this.call("readRequest", args) as ReturnType<Storage["readRequest"]>;
  readTask: Storage["readTask"] = (...args) => this.call("readTask", args) as ReturnType<Storage["readTask"]>;
  // JSON carries a missing row as null: read back as undefined, as the contract says.
  readSignals: Storage["readSignals"] = async (...args) =>
    ((await this.call("readSignals", args)) as (StoredRecord | null)[]).map((row) => row ?? undefined);
  readTaskTree: Storage["readTaskTree"] = (...args) =>
    this.call("readTaskTree", args) as ReturnType<Storage["readTaskTree"]>;
  readItems: Storage["readItems"] = (...args) =>
    this.call("readItems", args) as ReturnType<Storage["readItems"]>;
  readWaiting: Storage["readWaiting"] = (...args) =>
    this.call("readWaiting", args) as ReturnType<Storage["readWaiting"]>;
  readParked: Storage["readParked"] = (...args) =>
    this.call("readParked", args) as ReturnType<Storage["readParked"]>;
  readDeadlines: Storage["readDeadlines"] = (...args) =>
    this.call("readDeadlines", args) as ReturnType<Storage["readDeadlines"]>;
  readSettled: Storage["readSettled"] = (...args) =>
    this.call("readSettled", args) as ReturnType<Storage["readSettled"]>;
  checkpoint = async (guard: CommitGuard): Promise<void> => void (await this.call("checkpoint", [guard]));
  open: Storage["open"] = (...args) =>
    this.call("open", args, undefined, Number.POSITIVE_INFINITY) as ReturnType<Storage["open"]>;
  close: Storage["close"] = async () => undefined;
  exportRaw: NonNullable<Storage["exportRaw"]> = (...args) =>
    this.call("exportRaw", args) as ReturnType<NonNullable<Storage["exportRaw"]>>;
  importRaw = async (...args: Parameters<NonNullable<Storage["importRaw"]>>): Promise<void> =>
    void (await this.call("importRaw", args));
  deleteSession = async (sessionId: string): Promise<void> =>
    void (await this.call("deleteSession", [sessionId]));

  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    const hook = this.options.onWrite;
    if (!hook) {
      await this.call("commit", [guard, commits]);
      return;
    }
    // The write hook cannot cross into workerd: the store first runs the transaction and rolls it back,
    // answering with the rows it would write; the hook sees them here, and where it throws, the real
    // transaction is made to fail at that row.
    const rows = (await this.call("commit", [guard, commits], undefined, 0, true)) as RowWrite[];
    let failAtRow: number | undefined;
    for (const [i, row] of rows.entries()) {
      try {
        hook(row, i);
      } catch {
        failAtRow = i;
        break;
      }
    }
    await this.call("commit", [guard, commits], failAtRow, Number.POSITIVE_INFINITY);
  }

  unsafeWriteRaw(sessionId: string, table: Table | "sessions", key: readonly KeyPart[], value: unknown) {
    return this.call("unsafeWriteRaw", [sessionId, table, key, value]);
  }
}
