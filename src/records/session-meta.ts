/** The session row's record: the commit counter, the owner's fencing token and the storage format. */
import { z } from "zod";
import { compiled } from "./compiled.ts";
import { Id, Time, Version } from "./primitives.ts";

/** Format version of the stored layout; bumped when records change incompatibly. */
export const STORAGE_FORMAT = 5;

/**
 * Formats this kernel reads: 1 had no index rows (a read-only open reads it whole), 2 had no `settled`
 * index (a read-only open steps over unfinished items to find the latest finished ones), 3 wrote every
 * record's row with its commit and one change-log row per commit, 4 a row per entry. A writer's open adds
 * what it lacks and moves it to 5: one change-log row per transaction, records' rows written later from the
 * log's tail (`materialized` says how far), a group's entries of a conversation in one row (`entry-runs.ts`).
 */
export const READABLE_FORMATS = [1, 2, 3, 4, 5] as const;

/** The session row: the commit counter and the current owner's fencing token. */
export const SessionMetaSchema = compiled(
  z.object({
    id: Id,
    format: z.union([z.literal(1), z.literal(2), z.literal(3), z.literal(4), z.literal(5)]),
    version: Version,
    epoch: Version,
    createdAt: Time,
    updatedAt: Time,
    /** Characters of JSON the change log has taken so far (see `loggedChange`); absent before any. */
    logEnd: Version.optional(),
    /**
     * Every commit up to this version has its records in their own rows; the later ones are in the change
     * log only, until a writer materializes them (format 4). Absent: all of them.
     */
    materialized: Version.optional(),
    /** The first version of the change log that readers are served (older ones may still be stored). */
    logFloor: Version.optional(),
    /** Made with the row: a session deleted and created again is another one (see `incarnationOf`). */
    incarnation: z.string().max(64).optional(),
  }),
);
export type SessionMeta = z.infer<typeof SessionMetaSchema>;
