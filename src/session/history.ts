/** Reads of what a session holds in storage beyond memory: older entries and the change log. */
import type { CommitRecord, Entry } from "../records/schemas.ts";
import { CommitRecordSchema, EntrySchema } from "../records/schemas.ts";
import { validateRecord } from "../records/validate.ts";
import type { Storage } from "../storage/storage.ts";
import type { SessionState } from "./state.ts";

/** How many change-log records one read returns by default. */
export const CHANGE_PAGE = 500;

export class SessionHistory {
  constructor(
    private readonly state: SessionState,
    private readonly storage: Storage,
  ) {}

  /** Entries `fromSeq` ≤ seq < `toSeq` of a conversation, read from storage and validated. */
  async readEntries(conversationId: string, fromSeq: number, toSeq?: number): Promise<Entry[]> {
    const end = toSeq ?? this.state.conversation(conversationId)?.entryCount ?? 0;
    const rows = await this.storage.readEntries(this.state.id, conversationId, fromSeq, end);
    return rows.map((row) => validateRecord(EntrySchema, row.value, row.key));
  }

  /** Entries from `fromSeq` to the end of a conversation: from memory when it holds them, else from storage. */
  async readEntriesFrom(conversationId: string, fromSeq: number): Promise<Entry[]> {
    const held = this.state.conversations.get(conversationId);
    if (!held) return [];
    const first = held.entries[0]?.seq ?? held.record.entryCount;
    if (fromSeq >= first) return held.entries.filter((e) => e.seq >= fromSeq);
    const older = await this.readEntries(conversationId, fromSeq, first);
    return [...older, ...held.entries];
  }

  /** Committed changes after `afterVersion` from the change log, validated, oldest first. */
  async readChanges(
    afterVersion: number,
    limit = CHANGE_PAGE,
  ): Promise<{ changes: CommitRecord[]; oldestRetained: number }> {
    const { changes, oldestRetained } = await this.storage.readChanges(this.state.id, afterVersion, limit);
    return {
      changes: changes.map((row) => validateRecord(CommitRecordSchema, row.value, row.key)),
      oldestRetained,
    };
  }
}
