/**
 * Signal definitions: which keys a session accepts outside input for, and the schema of each payload. A
 * definition covers one key or every key with a prefix (`payment:*`); the longest match wins. The kernel
 * defines `approval:*` itself (tool approvals).
 */
import { z } from "zod";
import { DefinitionError } from "../errors.ts";
import { compiled, type Json, JsonSchema, TextSchema } from "../records/schemas.ts";

export interface SignalDefinition<T = Json> {
  /** The key it covers, or a prefix ending in `*` for every key that starts with it. */
  readonly key: string;
  /** The payload's schema: a signal that does not match is refused, naming the field; nothing is stored. */
  readonly schema: z.ZodType<T>;
  /**
   * Whether a signal may come before any task awaits its key (it is kept, and taken when a wait for the key
   * begins). Default true; false refuses it with `signal-not-awaited` instead.
   */
  readonly early?: boolean;
  /**
   * How long (ms) an early signal of these keys is kept for a wait to take it: past that it is dropped (its
   * key takes a new signal again). Default: kept until taken (or dropped with `session.dropEarlySignal`).
   */
  readonly keepEarlyMs?: number;
}

/**
 * Declares the signals a session accepts for some keys.
 *
 * @example
 * const paid = defineSignal({ key: "payment:*", schema: z.object({ amount: z.number(), ref: z.string() }) });
 * const registry = createRegistry({ ...agent, signals: [paid] });
 */
export function defineSignal<T>(definition: SignalDefinition<T>): SignalDefinition<T> {
  const key = definition.key;
  if (typeof key !== "string" || key.length === 0 || key === "*" || key.indexOf("*") !== key.lastIndexOf("*"))
    throw new DefinitionError(`signal key "${key}" must be a key, or a prefix ending in *`);
  if (key.includes("*") && !key.endsWith("*"))
    throw new DefinitionError(`signal key "${key}": * may only end a prefix`);
  const unnamable = unnamableKey(key);
  if (unnamable) throw new DefinitionError(unnamable);
  const keep = definition.keepEarlyMs;
  if (keep !== undefined && !(Number.isSafeInteger(keep) && keep > 0))
    throw new DefinitionError(`signal key "${key}": keepEarlyMs must be a positive whole number of ms`);
  return { ...definition, schema: compiled(definition.schema) };
}

/** A person's decision on a tool call that asks for approval (key `approval:<tool task id>`). */
export const ApprovalSchema = compiled(
  z.object({
    approved: z.boolean(),
    /** Why: shown to the model when the call is rejected. */
    reason: TextSchema.max(2_000).optional(),
    /** Arguments to run the tool with instead of the model's (validated against the tool's schema). */
    arguments: z.record(z.string(), JsonSchema).optional(),
  }),
);
export type ApprovalDecision = z.infer<typeof ApprovalSchema>;

const ExecutorName = TextSchema.min(1).max(128);

/**
 * A host of the kind a tool call waits for takes it (key `run-on:<tool task>:<attempt>`): as the session's
 * owner (`takePlacedCalls`, no `executor`), or as an executor that runs it elsewhere and reports back
 * (`executePlacedCalls`), holding it for `leaseMs`.
 */
export const RunOnSchema = compiled(
  z.object({
    host: z.enum(["browser", "edge"]),
    executor: ExecutorName.optional(),
    leaseMs: z.number().int().min(1_000).max(3_600_000).optional(),
  }),
);

/** An executor's report of a call it took (key `done:<tool task>:<attempt>`): what running it gave. */
export const CallReportSchema = compiled(
  z.object({
    executor: ExecutorName,
    outcome: z.enum(["ok", "error", "interrupted", "not-run", "unknown"]),
    output: JsonSchema,
    via: z.enum(["run", "replay", "confirm", "run-after-confirm", "unknown"]),
  }),
);

/** Signals the kernel defines: tool approvals, and the ends of turns (follow-up queueing). */
export const KERNEL_SIGNALS: readonly SignalDefinition<unknown>[] = [
  { key: "approval:*", schema: ApprovalSchema, early: false },
  // The end of a Submission, for the turn queued behind it (follow-ups): the kernel's own, never outside input.
  { key: "turn:*", schema: JsonSchema, early: false },
  // A host of the kind a tool call waits for took it: its owner, or an executor (accepted).
  { key: "run-on:*", schema: RunOnSchema, early: false },
  // The executor's report of a call it took (completed); the owner then applies it to the context.
  { key: "done:*", schema: CallReportSchema, early: false },
];

/**
 * The task a kernel key names — `approval:<tool task>`, `run-on:<tool task>:<attempt>`,
 * `done:<tool task>:<attempt>` — or undefined for any other key.
 */
export function taskOfKey(key: string): string | undefined {
  if (key.startsWith("approval:")) return key.slice("approval:".length) || undefined;
  const prefix = key.startsWith("run-on:") ? "run-on:" : key.startsWith("done:") ? "done:" : undefined;
  const attempt = key.lastIndexOf(":");
  return prefix && attempt > prefix.length ? key.slice(prefix.length, attempt) : undefined;
}

/** Whether every key starting with `prefix` is a kernel key (of a wait under a Submission: never parked). */
export function isKernelPrefix(prefix: string): boolean {
  return ["approval:", "run-on:", "done:", "turn:"].some((kernel) => prefix.startsWith(kernel));
}

/** Keys only the kernel signals (a queued turn's wait): refused from outside, not listed as pending. */
export function isInternalKey(key: string): boolean {
  return key.startsWith("turn:");
}

/**
 * Why `key` can never be a signal key, or undefined: "." and ".." are dot segments, which a URL's path drops
 * (written `%2E` too), so neither `…/signals/:key` nor the key's callback URL could name it.
 */
export function unnamableKey(key: string): string | undefined {
  if (key !== "." && key !== "..") return undefined;
  return `"${key}" cannot be a signal key: a URL cannot name it (its path drops "." and ".." segments)`;
}

/** The definition covering `key`: an exact one, else the longest prefix (none for an unnamable key). */
export function findSignal(
  definitions: readonly SignalDefinition<unknown>[],
  key: string,
): SignalDefinition<unknown> | undefined {
  if (unnamableKey(key)) return undefined;
  let found: SignalDefinition<unknown> | undefined;
  for (const definition of definitions) {
    if (definition.key === key) return definition;
    if (!definition.key.endsWith("*") || !key.startsWith(definition.key.slice(0, -1))) continue;
    if (!found || definition.key.length > found.key.length) found = definition;
  }
  return found;
}
