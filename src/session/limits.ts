/** What a session keeps in memory by default (DESIGN §9): the rest stays in storage, read on demand. */

/** Finished Submissions (and task trees started without one) kept besides every unfinished one. */
export const DEFAULT_SETTLED = 20;

/** Latest entries of each conversation kept (and loaded on open). */
export const DEFAULT_ENTRY_TAIL = 200;
