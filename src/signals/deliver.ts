/**
 * `session.signal()`: outside input for a key, accepted exactly once (DESIGN §4). The payload is checked
 * against the key's definition before anything is committed; then one commit stores the signal and — when a
 * task awaits its key — puts the payload in that task's checkpoint and makes it runnable. A repeat with the
 * same payload gets the first outcome; a different payload for a key that already has a signal is refused.
 */
import { z } from "zod";
import {
  CorruptRecordError,
  DuplicateKeyError,
  InvalidArgumentError,
  SignalRefusedError,
} from "../errors.ts";
import {
  CHECKPOINT_VALUE_DEPTH,
  findNonJson,
  frozenCopy,
  isWellFormedText,
  jsonEqual,
  utf8Length,
} from "../records/json.ts";
import { SignalKey } from "../records/primitives.ts";
import type { Json, Signal, Task } from "../records/schemas.ts";
import { JsonSchema, TextSchema } from "../records/schemas.ts";
import { describeIssues, summarizeIssues } from "../records/validate.ts";
import type { Registry } from "../registry.ts";
import type { KernelCommit } from "../session/commit-pipeline.ts";
import type { StateReader } from "../session/state.ts";
import { hasReceived } from "../tasks/awaiting.ts";
import { dispatch } from "../tasks/machine.ts";
import { isInternalKey, taskOfKey, unnamableKey } from "./define-signal.ts";
import { dropExpired, isExpired } from "./keep-early.ts";

/** The largest payload one signal carries, in UTF-8 bytes of its JSON (it is stored in the task's checkpoint). */
export const MAX_SIGNAL_PAYLOAD_BYTES = 64 * 1024;

export interface SignalOptions {
  /** The caller's idempotency key, stored with the signal. */
  readonly requestId: string;
}

/** What `signal()` did: the signal as stored now, and whether this call was a repeat of an earlier one. */
export interface SignalReceipt {
  readonly signal: Signal;
  /** True when the key already had this same signal: nothing new was committed. */
  readonly duplicate: boolean;
  /** The task whose wait took it (now or earlier), if one has. */
  readonly takenBy?: string;
}

/** What delivering needs from its session. */
export interface SignalHost {
  readonly state: StateReader;
  readonly registry: Registry;
  commit<T>(build: KernelCommit<T>): Promise<{ value: T; version: number }>;
  /** The key's stored signal, kept or taken (taken ones leave memory: read from storage, validated). */
  readSignal(key: string): Promise<Signal | undefined>;
  /** A task by id, from memory or storage (does the task a kernel key names exist). */
  readTask(taskId: string): Promise<Task | undefined>;
  /** Reads back a wait on `key` parked in storage, if one is (called once the call is valid). */
  loadWait(key: string): Promise<void>;
  /** How many signals no wait has taken the session keeps (`maxEarlySignals`). */
  readonly maxEarlySignals: number;
  /** The session's clock: an early signal past its `keepEarlyMs` is no longer kept, dropped or not yet. */
  now(): number;
}

const SignalCallSchema = z.object({
  key: SignalKey,
  payload: JsonSchema,
  requestId: TextSchema.min(1).max(256),
});

/**
 * What `signal()` would answer without committing: the first outcome when this is a repeat, undefined when
 * it would be accepted now. Throws the refusal (bad payload, unknown key, conflict, not awaited).
 */
export async function precheckSignal(
  host: Omit<SignalHost, "commit">,
  key: string,
  payload: unknown,
  options: SignalOptions,
): Promise<SignalReceipt | undefined> {
  const { call, repeat, kept } = await checkSignal(host, key, payload, options);
  if (kept) return repeatOf(kept, call);
  // A new early signal past the bound is refused by its commit (which counts those queued before it).
  // One kept for this key past its time is replaced by this signal in the same commit: it does not count.
  const replaced = host.state.signal(call.key) ? 1 : 0;
  const others = host.state.earlySignals() - replaced;
  if (!repeat && !host.state.awaiter(call.key) && others >= host.maxEarlySignals)
    throw earlySignalsFull(call.key, host.maxEarlySignals);
  return repeat;
}

type SignalCall = ReturnType<typeof checkCall>;

/**
 * The checked call (validated once), and the first outcome when it repeats a signal taken earlier; or the
 * early signal the session keeps for its key (answered as its repeat, or the conflict, once the caller knows
 * it is still kept).
 */
async function checkSignal(
  host: Omit<SignalHost, "commit">,
  key: string,
  payload: unknown,
  options: SignalOptions,
): Promise<{ call: SignalCall; repeat?: SignalReceipt; kept?: Signal }> {
  const call = checkCall(host.registry, key, payload, options?.requestId);
  // Only a valid call reads a parked wait back: a refused one leaves memory as it was.
  await host.loadWait(call.key);
  const kept = host.state.signal(call.key);
  // One past its `keepEarlyMs` whose drop is not committed yet: this call is a new signal (its commit drops it).
  if (kept && isExpired(host.registry, kept, host.now())) return { call };
  if (kept) return { call, kept };
  const awaiter = host.state.awaiter(call.key);
  if (!awaiter || hasReceived(awaiter, call.key)) {
    // A repeat of a signal that was taken long ago (it left memory) still gets its first outcome.
    const stored = await host.readSignal(call.key);
    if (stored) return { call, repeat: repeatOf(stored, call) };
    if (!awaiter && !isEarlyAllowed(host.registry, call.key)) throw await notAwaitedOrUnknown(host, call.key);
  }
  if (awaiter) checkForAwaiter(host.registry, awaiter, call.key, call.payload);
  return { call };
}

const isEarlyAllowed = (registry: Registry, key: string) => registry.signalFor(key)?.early !== false;

function notAwaited(key: string): SignalRefusedError {
  return new SignalRefusedError(
    "signal-not-awaited",
    key,
    `no task awaits "${key}", and it takes a signal only while one does`,
  );
}

/** The refusal of a key no task awaits: not found when it names a task that does not exist. */
async function notAwaitedOrUnknown(
  host: Omit<SignalHost, "commit">,
  key: string,
): Promise<SignalRefusedError> {
  const taskId = taskOfKey(key);
  if (taskId === undefined || (await host.readTask(taskId).catch(() => true))) return notAwaited(key);
  return new SignalRefusedError(
    "wait-not-found",
    key,
    `no wait on "${key}": this session has no task ${taskId} (never had, or retention removed it)`,
  );
}

function earlySignalsFull(key: string, max: number): SignalRefusedError {
  return new SignalRefusedError(
    "early-signals-full",
    key,
    `no task awaits "${key}", and the session already keeps ${max} signals no task has taken yet (its maxEarlySignals)`,
  );
}

/** How many times a delivery that raced another's commit for its key is tried (see `deliverSignal`). */
const RACE_ATTEMPTS = 3;

/**
 * Delivers one signal: validated, committed once, and taken by the wait on its key if there is one. A
 * delivery racing another for its key (two tabs, a retried webhook) is answered once the other's commit
 * landed — as its repeat, or the conflict — and is delivered again if the store refused the other's.
 */
export async function deliverSignal(
  host: SignalHost,
  key: string,
  payload: unknown,
  options: SignalOptions,
): Promise<SignalReceipt> {
  for (let races = 0; ; ) {
    const { call, repeat, kept } = await checkSignal(host, key, payload, options);
    if (repeat) return repeat;
    if (kept) {
      // A drop queued before this call may take the kept signal first: then this is a new delivery.
      if (await stillKept(host, kept)) return repeatOf(kept, call);
      continue;
    }
    try {
      return await commitSignal(host, call);
    } catch (error) {
      const raced = error instanceof SignalRefusedError && error.code === "signal-not-awaited";
      // Looked early because the wait that took this key's signal a moment ago let it leave memory: refused
      // by the bound on early signals, or by the store's key index. Either way the stored signal answers it.
      const full = error instanceof SignalRefusedError && error.code === "early-signals-full";
      const taken = full || error instanceof DuplicateKeyError;
      if ((!raced && !taken) || ++races === RACE_ATTEMPTS) throw error;
      // Commits nothing: resolves once the groups queued before it landed. The next check answers from the
      // signal they stored, or finds the wait open again.
      await host.commit(() => undefined);
      if (raced) continue;
      const stored = await host.readSignal(call.key);
      if (stored) return repeatOf(stored, call);
      if (full) throw error; // no signal for the key: truly one too many
    }
  }
}

/**
 * Whether an early signal the session keeps is still kept once the commits queued before this call are
 * built: a drop of it queued first makes this call a new delivery, not a repeat of (or a conflict with) a
 * dropped signal.
 */
async function stillKept(host: SignalHost, signal: Signal): Promise<boolean> {
  const { value } = await host.commit((draft) => {
    const kept = draft.signal(signal.key);
    return kept !== undefined && !isExpired(draft.registry, kept, draft.at) ? kept : undefined;
  });
  return value?.version === signal.version;
}

/** The commit of one checked signal: stored, and taken by the wait on its key if there is one. */
async function commitSignal(host: SignalHost, call: SignalCall): Promise<SignalReceipt> {
  const early = isEarlyAllowed(host.registry, call.key);
  const { value } = await host.commit((draft) => {
    // Another delivery for this key, queued just before this one, holds it now: answered from it.
    dropExpired(draft, [call.key], draft.at); // kept past its time: this signal replaces it
    const held = draft.signal(call.key);
    if (held) return { held };
    // The wait may have ended since (deadline, cancel): checked again where it counts, in the commit.
    const awaiter = draft.awaiter(call.key);
    if (!early && !awaiter) throw notAwaited(call.key);
    // An `all` wait that took this key's signal in a commit queued before this one: answered from it.
    if (awaiter && hasReceived(awaiter, call.key)) return { taken: true as const };
    const signal: Signal = {
      key: call.key,
      requestId: call.requestId,
      payload: call.payload,
      receivedAt: draft.at,
      version: draft.version,
    };
    dispatch(draft, { type: "signal-received", signal });
    const stored = draft.signalWrites.written.get(call.key) ?? signal;
    // Early signals are loaded on open: bounded, counted with those of the commits queued before this one.
    if (stored.consumedBy === undefined && draft.earlySignals() > host.maxEarlySignals)
      throw earlySignalsFull(call.key, host.maxEarlySignals);
    return { stored };
  });
  if ("taken" in value) {
    const stored = await host.readSignal(call.key);
    if (!stored)
      throw new CorruptRecordError(`signals/${call.key}`, "a wait took this signal, and it is not stored");
    return repeatOf(stored, call);
  }
  return "held" in value ? repeatOf(value.held, call) : receipt(value.stored, false);
}

/**
 * How `signal(key, payload, options)` is answered once `stored` is its key's signal — seen in a change by
 * a tab that handed the call to another to commit: the receipt (a duplicate unless `stored` is this
 * call's own), or the conflict. The payload is compared as the key's definition reads it, as it was stored.
 */
export function receiptFor(
  registry: Registry,
  stored: Signal,
  payload: unknown,
  options: SignalOptions,
): SignalReceipt {
  const call = checkCall(registry, stored.key, payload, options.requestId);
  // This call's own signal, as the leader stored it: its requestId, and its payload as this version reads
  // both (the leader's version may add a default or drop a field). Another call with the same requestId
  // and another decision is not this one (the leader refuses this call then).
  if (stored.requestId === options.requestId && readsAs(registry, stored, call))
    return receipt(stored, false);
  return repeatOf(stored, call);
}

function checkCall(registry: Registry, key: unknown, payload: unknown, requestId: unknown) {
  const call =
    isCallText(key) && isCallText(requestId) && findNonJson(payload, CHECKPOINT_VALUE_DEPTH) === undefined
      ? { key, payload: frozenCopy(payload as Json), requestId }
      : parseCall(key, payload, requestId);
  const definition = registry.signalFor(call.key);
  if (!definition || isInternalKey(call.key)) {
    const why = unnamableKey(call.key) ?? `no signal is defined for key "${call.key}"`;
    throw new SignalRefusedError("unknown-signal", call.key, why);
  }
  const bytes = utf8Length(JSON.stringify(call.payload));
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new InvalidArgumentError(`signal payload is ${bytes} bytes; at most ${MAX_SIGNAL_PAYLOAD_BYTES}`, [
      { path: "payload", message: `at most ${MAX_SIGNAL_PAYLOAD_BYTES} bytes` },
    ]);
  }
  const checked = definition.schema.safeParse(call.payload);
  if (!checked.success) {
    const issues = describeIssues(checked.error).map((issue) => ({
      path: issue.path === "(root)" ? "payload" : `payload.${issue.path}`,
      message: issue.message,
    }));
    throw new InvalidArgumentError(
      `invalid payload for "${call.key}": ${summarizeIssues(checked.error)}`,
      issues,
    );
  }
  return { ...call, payload: checked.data as Json, sent: call.payload };
}

/** A key or requestId as `SignalCallSchema` takes it (checked by hand first: a signal's hot path). */
const isCallText = (value: unknown): value is string =>
  typeof value === "string" && value.length >= 1 && value.length <= 256 && isWellFormedText(value);

/** The call as `SignalCallSchema` reads it, or its refusal naming each bad field. */
function parseCall(key: unknown, payload: unknown, requestId: unknown) {
  const parsed = SignalCallSchema.safeParse({ key, payload, requestId });
  // JSON as a signal's record holds it, yet nested too deep for the wait that takes it.
  const deep = parsed.success ? findNonJson(payload, CHECKPOINT_VALUE_DEPTH) : undefined;
  if (deep !== undefined)
    throw new InvalidArgumentError(`invalid signal: payload: ${deep}`, [{ path: "payload", message: deep }]);
  if (parsed.success) return parsed.data;
  throw new InvalidArgumentError(
    `invalid signal: ${summarizeIssues(parsed.error)}`,
    describeIssues(parsed.error),
  );
}

/** The awaiting task's own check of the signal (an approval's edited arguments), as payload field issues. */
function checkForAwaiter(registry: Registry, awaiter: Task, key: string, payload: Json): void {
  const resolution = registry.resolveTask(awaiter.kind, awaiter.kindVersion);
  const issues = resolution.ok ? resolution.definition.checkSignal?.(awaiter, key, payload) : undefined;
  if (!issues || issues.length === 0) return;
  throw new InvalidArgumentError(
    `invalid signal for "${key}": ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`,
    issues.map((i) => ({ path: `payload.${i.path}`, message: i.message })),
  );
}

/**
 * Whether `stored` holds the call's payload: as this app version reads it, or as it was sent (the leader
 * that stored it may run another version, whose schema reads it differently).
 */
const holds = (stored: Signal, call: SignalCall) =>
  jsonEqual(stored.payload, call.payload) || jsonEqual(stored.payload, call.sent);

/** A key that already has a signal: the same payload is a repeat (first outcome), another one a conflict. */

/** Whether `stored` holds the call's payload, or reads, by this version's schema, as the call's does. */
function readsAs(registry: Registry, stored: Signal, call: SignalCall): boolean {
  if (holds(stored, call)) return true;
  const read = registry.signalFor(stored.key)?.schema.safeParse(stored.payload);
  return read?.success === true && jsonEqual(read.data as Json, call.payload);
}

function repeatOf(stored: Signal, call: SignalCall): SignalReceipt {
  if (holds(stored, call)) return receipt(stored, true);
  throw new SignalRefusedError(
    "signal-conflict",
    stored.key,
    // Not the stored signal's requestId: it is another caller's (a callback URL's sender must not learn it).
    `"${stored.key}" already received a different signal; a key takes one signal`,
  );
}

function receipt(signal: Signal, duplicate: boolean): SignalReceipt {
  return { signal, duplicate, ...(signal.consumedBy !== undefined && { takenBy: signal.consumedBy }) };
}
