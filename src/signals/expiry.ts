/**
 * Early signals leave: a signal no wait has taken is dropped when its definition's `keepEarlyMs` runs out
 * (the scheduler wakes for it, an alarm at the edge), or when the app drops it (`session.dropEarlySignal`).
 * A dropped signal's row is deleted with its commit, so its key takes a new signal again.
 */
import { InvalidArgumentError } from "../errors.ts";
import { SignalKey } from "../records/primitives.ts";
import type { Signal } from "../records/schemas.ts";
import type { SignalHost } from "./deliver.ts";

/**
 * Drops the early signal kept for `key` (only the one accepted at `version`, when given), in one commit, and
 * returns it; undefined (nothing committed) when none is. Checked again in the commit: a signal accepted or
 * taken by a commit queued before it is seen.
 */
export async function dropEarlySignal(
  host: Pick<SignalHost, "state" | "commit">,
  key: unknown,
  version?: number,
): Promise<Signal | undefined> {
  const parsed = SignalKey.safeParse(key);
  if (!parsed.success)
    throw new InvalidArgumentError("a signal key is a well-formed string of 1 to 256 characters", [
      { path: "key", message: "must be a well-formed string of 1 to 256 characters" },
    ]);
  const kept = (signal: Signal | undefined) =>
    signal && (version === undefined || signal.version === version);
  if (!kept(host.state.signal(parsed.data))) return undefined;
  const { value } = await host.commit((draft) =>
    kept(draft.signal(parsed.data)) ? draft.signalWrites.drop(parsed.data, draft.version) : undefined,
  );
  return value;
}
