/**
 * Entries are stored in runs (format 5): the consecutive entries of one conversation that one commit group
 * appends — a model's answer and its tool calls, a round's tool results — share one row, keyed by the first
 * one's seq. Each row a transaction writes is one more request in IndexedDB and one more row billed in a
 * Durable Object; a run keeps a round's entries to one of each. A row of one entry is the entry itself, as
 * formats up to 4 wrote every entry; a run of several is their array. Reads hand out each entry as its own
 * record (`entries/<conversation>/<seq>`), whichever way it was stored.
 */
import { utf8Length } from "../records/json.ts";
import type { CommitRecord, Entry } from "../records/schemas.ts";
import type { RowWrite } from "./rows.ts";
import { recordName } from "./rows.ts";
import type { StoredRecord } from "./storage.ts";

/** The most entries one row holds. */
export const RUN_ENTRIES = 16;

/**
 * A create-only row of a commit group (a requestId's index, a new signal, a run of entries) and the version
 * of its commit (of a run's first entry). `json`: the row's JSON when it was measured making it.
 */
export interface CreateRow {
  readonly row: RowWrite;
  readonly version: number;
  readonly json?: string;
}

/**
 * The create-only entry rows of a commit group: one per run of consecutive seqs of one conversation, at
 * most {@link RUN_ENTRIES} entries and — when the store bounds its rows (`maxRowBytes`) — at most that many
 * bytes of JSON, so only an entry too large on its own makes a row over the bound (and the store refuses
 * that one, naming it). Measured rows carry their JSON, which the store writes or checks without making it
 * again.
 */
export function entryRunRows(commits: readonly CommitRecord[], maxRowBytes?: number): CreateRow[] {
  const rows: CreateRow[] = [];
  let run: Entry[] = [];
  let texts: string[] = [];
  let version = 0;
  let bytes = 0;
  const end = () => {
    const first = run[0];
    if (!first) return;
    const value = run.length === 1 ? first : run;
    const row: RowWrite = { table: "entries", key: [first.conversationId, first.seq], value, op: "create" };
    // An array's JSON is its elements' joined by commas in brackets: the texts measured are the row's.
    const json = maxRowBytes === undefined ? undefined : run.length === 1 ? texts[0] : `[${texts.join(",")}]`;
    rows.push({ row, version, ...(json !== undefined && { json }) });
    run = [];
    texts = [];
    bytes = 0;
  };
  for (const commit of commits) {
    for (const entry of commit.entries) {
      const text = maxRowBytes === undefined ? "" : JSON.stringify(entry);
      const size = maxRowBytes === undefined ? 0 : utf8Length(text) + 1;
      const last = run.at(-1);
      const continues =
        last !== undefined &&
        last.conversationId === entry.conversationId &&
        last.seq + 1 === entry.seq &&
        run.length < RUN_ENTRIES &&
        (maxRowBytes === undefined || bytes + size + 1 <= maxRowBytes);
      if (!continues) {
        end();
        version = commit.version;
      }
      run.push(entry);
      texts.push(text);
      bytes += size;
    }
  }
  end();
  return rows;
}

/**
 * Each entry with `from` ≤ seq ≤ `to` out of a conversation's stored rows — the last one keyed at or below
 * `from` (a run that may reach it), then those keyed after it up to `to` — in order, as its own record. A
 * run's entries take the seqs after its key's, in order; a value that is neither an entry nor a run is
 * handed out as it is, for the loader to report.
 */
export function entriesOfRows(
  rows: readonly StoredRecord[],
  conversation: string,
  from: number,
  to: number,
): StoredRecord[] {
  const out: StoredRecord[] = [];
  for (const row of rows) {
    const first = Number(row.key.slice(row.key.lastIndexOf("/") + 1));
    const run = Array.isArray(row.value) ? row.value : [row.value];
    for (let i = 0; i < run.length; i++) {
      const seq = first + i;
      if (seq < from || seq > to) continue;
      out.push(
        i === 0 && run.length === 1
          ? row
          : { key: recordName("entries", [conversation, seq]), value: run[i] },
      );
    }
  }
  return out;
}
