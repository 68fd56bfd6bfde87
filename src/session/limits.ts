/** What a session keeps in memory by default (DESIGN §9): the rest stays in storage, read on demand. */

/** Finished Submissions (and task trees started without one) kept besides every unfinished one. */
export const DEFAULT_SETTLED = 20;

/** Waits of trees without a Submission kept live; later ones are parked (stored apart, loaded when needed). */
export const DEFAULT_LIVE_WAITS = 100;

/** Signals no wait has taken yet (early ones, loaded on open) a session keeps; later ones are refused. */
export const DEFAULT_EARLY_SIGNALS = 1_000;

/** Latest entries of each conversation kept (and loaded on open). */
export const DEFAULT_ENTRY_TAIL = 200;
