/**
 * Tool-call ids as a turn commits them. An id pairs a call with its result in every later context, so it
 * must be unique in its conversation; some providers send calls without one (an OpenAI-compatible server may
 * omit it), and those get an id made from the turn, round and position — deterministic, and unique because
 * task ids are.
 */
import type { ToolCall } from "../records/schemas.ts";

/** OpenAI refuses tool-call ids longer than this. */
const MAX_ID_LENGTH = 40;

/**
 * The response's calls, each with an id: a call without one (empty), or with one an earlier call of the same
 * response has, gets {@link fallbackCallId}.
 */
export function withCallIds(calls: readonly ToolCall[], turn: string, round: number): ToolCall[] {
  const seen = new Set<string>();
  return calls.map((call, index) => {
    const id = !call.id || seen.has(call.id) ? fallbackCallId(turn, round, index) : call.id;
    seen.add(id);
    return id === call.id ? call : { ...call, id };
  });
}

/**
 * The id of call `index` of round `round` of generation task `turn` when the provider gave it none: only
 * characters every provider accepts in an id, at most 40 of them (a long task id is hashed).
 * @example fallbackCallId("task_7c10c6e6", 2, 0) // "call_task_7c10c6e6_r2_0"
 */
function fallbackCallId(turn: string, round: number, index: number): string {
  const plain = `call_${turn.replace(/[^A-Za-z0-9_-]/g, "_")}_r${round}_${index}`;
  return plain.length <= MAX_ID_LENGTH ? plain : `call_${hash(turn)}_r${round}_${index}`;
}

/** FNV-1a, 32 bits, as 8 hex digits: a short stable digest (not a secret). */
function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}
