/** A store that forwards every call to another: the base of store wrappers (spies, crash injectors). */
import type { CommitRecord } from "../records/schemas.ts";
import type { CommitGuard, RawSession, SessionImport, Storage } from "../storage/storage.ts";

/**
 * Forwards every call to another store. Wrappers (spies, crash injectors, killable process handles) extend
 * it and override `target()` (to refuse calls) or `commit()` (to interpose).
 */
export class ForwardingStorage implements Storage {
  constructor(readonly inner: Storage) {
    // What the store cannot do, neither can its wrapper: callers test for these before they rely on them.
    if (!inner.exportRaw) delete this.exportRaw;
    if (!inner.importRaw) delete this.importRaw;
  }
  /** The store calls go to; throw here to make every call fail. */
  protected target(): Storage {
    return this.inner;
  }
  open: Storage["open"] = async (...args) => this.target().open(...args);
  readEntries: Storage["readEntries"] = async (...args) => this.target().readEntries(...args);
  readChanges: Storage["readChanges"] = async (...args) => this.target().readChanges(...args);
  readDocumentRows: Storage["readDocumentRows"] = async (...args) => this.target().readDocumentRows(...args);
  readSubmission: Storage["readSubmission"] = async (...args) => this.target().readSubmission(...args);
  readRequest: Storage["readRequest"] = async (...args) => this.target().readRequest(...args);
  readTask: Storage["readTask"] = async (...args) => this.target().readTask(...args);
  readSignals: Storage["readSignals"] = async (...args) => this.target().readSignals(...args);
  readTaskTree: Storage["readTaskTree"] = async (...args) => this.target().readTaskTree(...args);
  readWaiting: Storage["readWaiting"] = async (...args) => this.target().readWaiting(...args);
  readParked: Storage["readParked"] = async (...args) => this.target().readParked(...args);
  readDeadlines: Storage["readDeadlines"] = async (...args) => this.target().readDeadlines(...args);
  readItems: Storage["readItems"] = async (...args) => this.target().readItems(...args);
  readSettled: Storage["readSettled"] = async (...args) => this.target().readSettled(...args);
  close: Storage["close"] = async () => undefined;
  async deleteSession(sessionId: string): Promise<void> {
    const target = this.target();
    if (!target.deleteSession) throw new Error("this store cannot delete a session");
    await target.deleteSession(sessionId);
  }
  exportRaw?: (sessionId: string) => Promise<RawSession | undefined> = async (sessionId) => {
    const target = this.target();
    if (!target.exportRaw) throw new Error("this store cannot export a session");
    return target.exportRaw(sessionId);
  };
  importRaw?: (sessionId: string, session: SessionImport) => Promise<void> = async (sessionId, session) => {
    const target = this.target();
    if (!target.importRaw) throw new Error("this store cannot import a session");
    await target.importRaw(sessionId, session);
  };
  async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    await this.target().commit(guard, commits);
  }
  async checkpoint(guard: CommitGuard): Promise<void> {
    await this.target().checkpoint?.(guard);
  }
}
