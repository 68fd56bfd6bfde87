/**
 * Where a tool may run (issue 21): `anywhere` (default), `browser` (it needs the page, the user's
 * credentials or local files) or `edge`. A session opened with a `host` kind runs a call of a tool that
 * declares another kind as a durable wait instead — its intent committed, visible in `view().pending` —
 * until a host of the right kind leads the session and takes it (`takePlacedCalls`), then runs it there
 * under its stored operation id, with the recovery rules of a call cut off if it had already started — or
 * until an executor of the right kind takes it without leading (`executePlacedCalls`, `executor.ts`).
 */
import type { Json } from "../records/schemas.ts";
import type { Session } from "../session/session.ts";

/** The kinds of host a session can run on. */
export type HostKind = "browser" | "edge";

/** The signal key a call waiting for a host of another kind waits on (one per wait). */
export const runOnKey = (toolTaskId: string, attempt: number) => `run-on:${toolTaskId}:${attempt}`;

/** The signal key a call an executor accepted waits on for its report (one per acceptance). */
export const doneKey = (toolTaskId: string, attempt: number) => `done:${toolTaskId}:${attempt}`;

/** Whether a key is an executor's report key (see {@link doneKey}). */
export const isDoneKey = (key: string) => key.startsWith("done:");

/** How long an executor holds a call it accepted unless it asks for another lease (`leaseMs`). */
export const DEFAULT_LEASE_MS = 60_000;

/** Whether a tool that may run `where` runs on this host (a host of no declared kind runs every tool). */
export function runsHere(where: "anywhere" | HostKind | undefined, host: HostKind | undefined): boolean {
  return where === undefined || where === "anywhere" || host === undefined || where === host;
}

/**
 * Takes every call waiting for a host of this session's kind: commits the signal each one waits on, so
 * the call runs here. Hosts call it after `resume()` (the browser host and the edge's object do).
 * Returns how many calls were taken.
 */
export async function takePlacedCalls(session: Session, host: HostKind): Promise<number> {
  let taken = 0;
  for (const wait of session.pending()) {
    if (!wait.key.startsWith("run-on:")) continue;
    if ((wait.about as { runsOn?: Json } | undefined)?.runsOn !== host) continue;
    await session.signal(wait.key, { host }, { requestId: wait.key });
    taken++;
  }
  return taken;
}
