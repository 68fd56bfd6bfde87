/** Opening a session: read it from its store (taking ownership in write mode) and rebuild its state. */
import { systemClock } from "../clock.ts";
import { InvalidArgumentError, SessionNotFoundError } from "../errors.ts";
import { sessionIdProblem } from "../records/json.ts";
import { createRegistry } from "../registry.ts";
import { DEFAULT_ENTRY_TAIL, DEFAULT_SETTLED } from "./limits.ts";
import { loadSessionState } from "./load.ts";
import type { OpenSessionOptions } from "./options.ts";
import { checkRetention } from "./retention.ts";
import { Session } from "./session.ts";

/**
 * Opens a session.
 *
 * @example
 * const session = await openSession({ id: "support-42", storage: memoryStorage() });
 * const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "Hello" });
 */
export async function openSession(options: OpenSessionOptions): Promise<Session> {
  const idProblem = sessionIdProblem(options.id);
  if (idProblem !== undefined)
    throw new InvalidArgumentError(idProblem, [{ path: "id", message: idProblem }]);
  checkRetention(options);
  const mode = options.mode ?? "write";
  const clock = options.clock ?? systemClock;
  const entryTail = options.entryTail ?? DEFAULT_ENTRY_TAIL;
  const registry = options.registry ?? createRegistry();
  // Memory holds no more finished work than a retention policy keeps in storage (unless told otherwise).
  const settled =
    options.retainSettled ?? Math.min(DEFAULT_SETTLED, options.retention?.keepSettled ?? Infinity);
  const request = { mode, at: clock.now(), entryTail, settled };
  const stored = await options.storage.open(
    options.id,
    options.epoch === undefined ? request : { ...request, epoch: options.epoch },
  );
  if (!stored) throw new SessionNotFoundError(options.id);
  const state = loadSessionState(stored, registry, entryTail, settled);
  return new Session(state, mode, options.storage, registry, options);
}
