/**
 * Which sessions an edge holds, for `GET /sessions` (the devtools' session list). Sessions live one per
 * Durable Object, so no object knows the others: the router notes each session it saw created — a first
 * accepted submission, a tab's first claim — in one more object of the same class, under a name no
 * session can have (`__directory__` fails `IdSchema`). Noting is best effort and idempotent, after the
 * request succeeded: a session the directory missed is still there, just not listed.
 */
import type { DurableObjectStorageLike } from "./do-sqlite-sql.ts";

/** The directory object's name in the sessions namespace (not a valid session id: no request reaches it as one). */
export const DIRECTORY_NAME = "__directory__";

/** Set by a session object on the answer to the call that created its session (the router strips it). */
export const CREATED_HEADER = "x-session-created";

/** What the directory object answers over RPC. */
export interface DirectoryStub {
  noteSession(sessionId: string, at: number): Promise<void>;
  listSessions(after: string | undefined, limit: number): Promise<DirectoryPage>;
}

/** A page of session ids in id order, and where the next page starts (null at the end). */
export interface DirectoryPage {
  readonly sessions: readonly { readonly id: string; readonly notedAt: number }[];
  readonly next: string | null;
}

/** The directory's rows in its object's SQLite database. */
export class SessionDirectory {
  private ready = false;
  constructor(private readonly storage: DurableObjectStorageLike) {}

  private table(): void {
    if (this.ready) return;
    this.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS da_directory (session TEXT PRIMARY KEY, noted_at INTEGER NOT NULL)",
    );
    this.ready = true;
  }

  note(sessionId: string, at: number): void {
    this.table();
    this.storage.sql.exec(
      "INSERT INTO da_directory (session, noted_at) VALUES (?, ?) ON CONFLICT (session) DO NOTHING",
      sessionId,
      at,
    );
  }

  list(after: string | undefined, limit: number): DirectoryPage {
    this.table();
    const rows = this.storage.sql
      .exec(
        "SELECT session, noted_at FROM da_directory WHERE session > ? ORDER BY session LIMIT ?",
        after ?? "",
        limit + 1,
      )
      .toArray();
    const page = rows
      .slice(0, limit)
      .map((row) => ({ id: String(row.session), notedAt: Number(row.noted_at) }));
    return { sessions: page, next: rows.length > limit ? (page.at(-1)?.id ?? null) : null };
  }
}
