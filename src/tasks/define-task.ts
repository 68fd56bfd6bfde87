/**
 * Task definitions: a task kind is a set of named phases. A phase runs (it may do external work), then
 * returns one transition, committed atomically with everything it staged. Recovery re-enters the saved
 * phase from its start; it never jumps into the middle of one.
 */
import type { z } from "zod";
import type { Clock, Timers } from "../clock.ts";
import { DefinitionError } from "../errors.ts";
import type {
  Conversation,
  Entry,
  EntryContent,
  ErrorInfo,
  Json,
  PatchOperation,
  Task,
  TokenUsage,
} from "../records/schemas.ts";
import { compiled } from "../records/schemas.ts";
import type { EntryLinks, ProgressDraft } from "../session/draft-types.ts";
import type { DocumentState } from "../session/state.ts";
import type { Preview } from "./preview.ts";

/** What a phase ends with. Built with the context's `next`, `sleep`, `wait`, `complete` and `fail`. */
export type Transition =
  | { readonly type: "next"; readonly phase: string; readonly data: Json }
  | { readonly type: "sleep"; readonly until: number; readonly phase: string; readonly data: Json }
  | {
      readonly type: "wait";
      readonly children: readonly string[];
      readonly policy: JoinPolicy;
      /** The phase to continue in once the join is satisfied. */
      readonly thenPhase: string;
      readonly data: Json;
    }
  | {
      readonly type: "await";
      readonly keys: readonly string[];
      readonly mode: "any" | "all";
      readonly thenPhase: string;
      readonly deadline?: { readonly at: number; readonly phase: string };
      readonly about?: Json;
      readonly data: Json;
    }
  | { readonly type: "complete"; readonly result: Json }
  | { readonly type: "fail"; readonly error: ErrorInfo };

/**
 * What a phase continued after a wait on signals receives as its data: what the waiting phase passed, and
 * the payload of each key that arrived (for a deadline phase, those that arrived in time).
 */
export interface Received<D = Json> {
  readonly data: D;
  readonly signals: Readonly<Record<string, Json>>;
}

/** Options of a wait on signal keys (see `PhaseContext.waitFor`). */
export interface WaitForOptions<Q extends string> {
  /** The phase to continue in once the wait is met. */
  readonly next: Q;
  /** `any` (default): the first key that arrives; `all`: every key. */
  readonly mode?: "any" | "all";
  /** Continue in `deadline.next` at `deadline.at` if the wait is not met by then. */
  readonly deadline?: { readonly at: number; readonly next: Q };
  /** What the wait is for, shown to whoever answers it (pending views, devtools): JSON. */
  readonly about?: Json;
}

/** How a waiting parent joins its children. */
export type JoinPolicy = "allSettled" | "failFast";

/**
 * The checkpoint data each phase receives, by phase name. Without one, every phase gets plain JSON.
 *
 * @example
 * type Rounds = { prepare: null; request: Round | null; retry: Round };
 */
export type PhaseDataMap = Record<string, unknown>;

/** The default: any phase name; the data is JSON at run time (`unknown` here: cast or give a schema). */
export type AnyPhaseData = Record<string, unknown>;

/** A phase name of `Data`. */
export type PhaseName<Data extends PhaseDataMap> = keyof Data & string;

/** The data argument of a transition into a phase: optional where that phase accepts `null`. */
type DataArgument<T> = null extends T ? [data?: T] : [data: T];

/** Options for spawning a child task. */
export interface SpawnOptions {
  /** Id for the child; default a fresh one. Give one to make the spawn idempotent across re-entries. */
  readonly id?: string;
  /**
   * Start the child in this phase with this checkpoint data instead of its first phase — for a parent
   * that already did the child's first step (e.g. validated a tool call and fixed its intent).
   */
  readonly phase?: string;
  readonly data?: Json;
}

/** Everything a phase can read, stage and return. `P` is the phase running, `Data` every phase's data. */
export interface PhaseContext<
  Input = Json,
  Data extends PhaseDataMap = AnyPhaseData,
  P extends PhaseName<Data> = PhaseName<Data>,
> {
  /** The task record as committed before this phase started. */
  readonly task: Task;
  /** The task's input, parsed with the definition's schema. */
  readonly input: Input;
  /** The checkpoint data the previous phase saved for this one. */
  readonly data: Data[P];
  /** The running phase's name. */
  readonly phase: string;
  /** 1 for the first entry of this task's first phase, +1 for every phase entry, including re-entries. */
  readonly attempt: number;
  /** How many times this phase was re-entered after an interruption. */
  readonly restarts: number;
  /** Aborted when the task is cancelled or the host closes. */
  readonly signal: AbortSignal;
  /** Whether the phase was asked to stop (as `signal.aborted`), read without making its AbortController. */
  readonly aborted: boolean;
  readonly clock: Clock;
  /**
   * The session's timers (injected like its clock), for waits inside this run of the phase — a flush, a
   * poll interval. Never for durable waits: those are `sleep` and `waitFor`, which survive the process.
   */
  readonly timers: Timers;
  /** The kind of host running the session (`openSession({ host })`), if it declared one. */
  readonly hostKind: "browser" | "edge" | undefined;
  /** A conversation's record (its `entryCount` is the position of the next entry). */
  conversation(id: string): Conversation | undefined;
  /** A committed document, as of when the phase started. */
  document(id: string): DocumentState | undefined;
  /** Records of this task's owned children, as committed (results and errors of finished ones). */
  children(): Task[];
  /** The record of one owned child, as committed; undefined for any other id. */
  child(id: string): Task | undefined;
  /** Ids of every task under this one: its children, their children, and so on. */
  descendants(): Set<string>;
  /** Whether a task is under this one (at any depth), found by walking up from it: no set of them all. */
  isBelow(taskId: string): boolean;
  /** Committed entries of a conversation from `fromSeq` (default 0) to its end. */
  conversationEntries(conversationId: string, fromSeq?: number): Promise<Entry[]>;
  /**
   * Commits loss-tolerant progress (streamed text, live tool output) as a deferred commit, outside this
   * phase's transition: batched, possibly lost in a crash, never needed for correctness. Only progress
   * documents can be written there.
   */
  progress(build: (draft: ProgressDraft) => void): void;
  /** Sends what the phase produces before it is committed to the session's live listeners (never stored). */
  preview(preview: Preview): void;
  /**
   * Resolves when an outside effect may start: everything committed so far is held by every host that could
   * take the session over (a linked browser session: once its edge has acknowledged it). Call it before an
   * effect that must not happen twice; alone, a session resolves at once. Rejects if this writer was fenced.
   */
  beforeEffect(): Promise<void>;

  /** Stages an entry, committed with the transition. It names this task unless `links` name another. */
  appendEntry(conversationId: string, content: EntryContent, links?: EntryLinks): void;
  /**
   * Stages a `summary` entry covering a conversation's entries up to `coversThroughSeq`, moving its context
   * start past them (compaction: later rounds send the summary and what follows it). `usage`: the tokens of
   * the model call that wrote it, if one did.
   */
  appendSummary(conversationId: string, text: string, coversThroughSeq: number, usage?: TokenUsage): void;
  /** Stages a document value, committed with the transition. */
  setDocument(id: string, type: string, value: Json): void;
  /** Stages JSON Patch operations on a document, committed with the transition. */
  patchDocument(id: string, patch: readonly PatchOperation[]): void;
  /** Stages the deletion of a document (a per-run document whose run ends), committed with the transition. */
  deleteDocument(id: string): void;
  /** Stages a child task, created (and started) with the transition. Returns its id. */
  spawn(kind: string, input: Json, options?: SpawnOptions): string;

  /** Continues in `phase` with `data` as its checkpoint. */
  next<Q extends PhaseName<Data>>(phase: Q, ...data: DataArgument<Data[Q]>): Transition;
  sleep<Q extends PhaseName<Data>>(until: number, phase: Q, ...data: DataArgument<Data[Q]>): Transition;
  /**
   * Waits for `children` (every unfinished owned child must be listed), then continues in `options.next`.
   * (DESIGN §4 calls the option `then`; it is `next` here so the options object is never mistaken for a
   * promise-like "thenable".)
   */
  wait<Q extends PhaseName<Data>>(
    children: readonly string[],
    options: { policy: JoinPolicy; next: Q },
    ...data: DataArgument<Data[Q]>
  ): Transition;
  /**
   * Waits on the outside world: one or more signal keys (registered with `defineSignal`), answered by
   * `session.signal(key, payload)` — durably, across reloads and evictions. A signal that came before the
   * wait is taken at once. The next phase gets {@link Received} data.
   */
  waitFor<Q extends PhaseName<Data>>(
    keys: string | readonly string[],
    options: WaitForOptions<Q>,
    data?: Json,
  ): Transition;
  complete(result?: Json): Transition;
  fail(error: string | Error | ErrorInfo): Transition;
}

/** A phase: runs outside any commit, returns the transition to commit. */
export type Phase<
  Input = Json,
  Data extends PhaseDataMap = AnyPhaseData,
  P extends PhaseName<Data> = PhaseName<Data>,
> = (context: PhaseContext<Input, Data, P>) => Transition | Promise<Transition>;

/** What `onCancelled` (or `onFailed`) may stage in the commit that ends a task cancelled (or failed). */
export interface CancelStage {
  /** Stages an entry naming the cancelled task. */
  appendEntry(conversationId: string, content: EntryContent): void;
  /** One of the cancelled task's children, as it stands in this commit; undefined for any other id. */
  child(id: string): Task | undefined;
  /** The entries this commit appended before the task ended (the phase that returned after the cancel may have). */
  readonly appended: readonly Entry[];
  /**
   * Whether the phase it was cancelled in may have begun: not when the task was created in this commit,
   * nor when it waited for its exclusive key since the phase was entered (never cut off there).
   */
  readonly phaseStarted: boolean;
  /** What the phase that returned after the cancel returned (its transition's type), when it ended the task. */
  readonly returned?: Transition["type"];
  /** The version of the commit that ends it (a child created in it never ran: it ended in the same commit). */
  readonly version: number;
}

/** The checkpoint data of an `onRestartLimit` phase: the phase that kept being cut off. */
export interface GiveUpData {
  readonly phase: string;
  readonly data: Json;
  readonly restarts: number;
}

/** A stored task of an older version, as a migration sees and returns it. */
export interface TaskSnapshot {
  readonly input: Json;
  readonly checkpoint: { readonly phase: string; readonly data: Json };
}

export interface TaskDefinition<Input = Json, Data extends PhaseDataMap = AnyPhaseData> {
  readonly kind: string;
  /** Bump when input or checkpoint shapes change; give `migrations` from the older versions. */
  readonly version: number;
  readonly input: z.ZodType<Input>;
  readonly phases: { readonly [P in PhaseName<Data>]: Phase<Input, Data, P> };
  /**
   * A zod schema per phase for the checkpoint data it is entered with (optional, per phase): a transition
   * whose data does not match fails the task with `invalid-checkpoint` instead of storing it, and the
   * phase's `ctx.data` is typed from it.
   */
  readonly data?: { readonly [P in keyof Data]?: z.ZodType<Data[P]> };
  /** The first phase; default the first key of `phases`. */
  readonly start?: PhaseName<Data>;
  /** `migrations[v]` turns a stored task of version v into version v + 1. */
  readonly migrations?: Readonly<Record<number, (stored: TaskSnapshot) => TaskSnapshot>>;
  /**
   * How many interrupted re-entries of one phase are allowed before the task gives up (default: the
   * session's `maxRestarts`, else 3). A function decides per task (the tool task asks each call's tool).
   */
  readonly maxRestarts?: number | ((task: Task) => number | undefined);
  /**
   * The phase to run once, instead of failing, when a phase is cut off more often than `maxRestarts`: it
   * gets {@link GiveUpData} about the phase that was cut off and should only settle the outcome (ask whether
   * the work happened), never repeat it. If it is cut off past the limit as well, the task fails.
   */
  readonly onRestartLimit?: PhaseName<Data>;
  /**
   * What re-entering this task's current phase after a crash will do, in words (recovery previews and
   * devtools show it): e.g. "confirm by operation id op-7" for a tool call whose outcome is unknown.
   */
  readonly describeRecovery?: (task: Task, situation: "restart" | "restart-limit") => string | undefined;
  /**
   * Checks a signal for a key this task awaits beyond its payload schema (the tool task checks an
   * approval's edited arguments against the tool's schema). Issues refuse the signal: nothing is stored.
   */
  readonly checkSignal?: (
    task: Task,
    key: string,
    payload: Json,
  ) => readonly { readonly path: string; readonly message: string }[] | undefined;
  /**
   * What a task of this kind leaves behind when it ends `cancelled`, staged in the commit that ends it (the
   * tool task answers its call: never run, or run with an outcome nobody knows). It runs inside that commit:
   * it must not throw, and may only stage entries — a cancel never fails because of it.
   */
  readonly onCancelled?: (task: Task, stage: CancelStage) => void;
  /** {@link onCancelled} for a task that ends `failed` (the generation task answers the calls it never started). */
  readonly onFailed?: (task: Task, stage: CancelStage) => void;
  /**
   * Why this host could not continue a stored, unfinished task of this kind (the tool task: a tool this
   * registry no longer has, or one whose replay policy changed since the call's intent was saved), or
   * undefined. `checkEnvironment` and hand-offs between hosts ask it before taking a session over.
   */
  readonly cannotContinue?: (task: Task) => string | undefined;
  /**
   * Phases of tasks with the same key never run at the same time in a session: one waits, ready, until
   * the other's phase has ended (the tool task: an exclusive tool's calls, across turns and conversations).
   */
  readonly exclusiveKey?: (task: Task) => string | undefined;
}

/**
 * Declares a task kind. Phase data is typed per phase by a `data` schema map, or by the second type
 * parameter; without either, every phase gets JSON.
 *
 * @example
 * const report = defineTask({
 *   kind: "report",
 *   version: 1,
 *   input: z.object({ url: z.string().url() }),
 *   data: { fetch: z.null(), summarise: z.object({ body: z.string() }) },
 *   phases: {
 *     fetch: async (ctx) => ctx.next("summarise", { body: await (await fetch(ctx.input.url, { signal: ctx.signal })).text() }),
 *     summarise: (ctx) => ctx.complete({ length: ctx.data.body.length }),
 *   },
 * });
 */
export function defineTask<Input, Data extends PhaseDataMap = AnyPhaseData>(
  definition: TaskDefinition<Input, Data>,
): TaskDefinition<Input, Data> {
  const phases = Object.keys(definition.phases);
  const name = `task kind "${definition.kind}"`;
  if (typeof definition.kind !== "string" || definition.kind.length === 0)
    throw new DefinitionError("a task kind needs a non-empty name");
  if (phases.length === 0) throw new DefinitionError(`${name} has no phases`);
  if (definition.start !== undefined && !Object.hasOwn(definition.phases, definition.start))
    throw new DefinitionError(`${name} starts at unknown phase "${definition.start}"`);
  if (definition.onRestartLimit !== undefined && !Object.hasOwn(definition.phases, definition.onRestartLimit))
    throw new DefinitionError(`${name} gives up in unknown phase "${definition.onRestartLimit}"`);
  if (!Number.isInteger(definition.version) || definition.version < 1)
    throw new DefinitionError(`${name} needs a positive integer version`);
  for (const phase of phases) {
    if (typeof (definition.phases as Record<string, unknown>)[phase] !== "function")
      throw new DefinitionError(`${name}: phase "${phase}" is not a function`);
  }
  const data: Record<string, z.ZodType> = {};
  for (const [phase, schema] of Object.entries(definition.data ?? {})) {
    if (!Object.hasOwn(definition.phases, phase))
      throw new DefinitionError(`${name} has a data schema for unknown phase "${phase}"`);
    if (schema) data[phase] = compiled(schema as z.ZodType);
  }
  // Inputs are validated when a task is created and when it runs: compiled here (see `compiled`).
  const { data: _given, ...rest } = definition;
  const compiledData = data as NonNullable<TaskDefinition<Input, Data>["data"]>;
  return { ...rest, input: compiled(definition.input), ...(definition.data && { data: compiledData }) };
}

// biome-ignore lint/suspicious/noExplicitAny: any definition, whatever its input and phase data types
type SomeTaskDefinition = TaskDefinition<any, any>;

/** The phase a new task of this kind starts in. */
export function startPhase(definition: SomeTaskDefinition): string {
  return definition.start ?? (Object.keys(definition.phases)[0] as string);
}

/** Whether `phase` is one of the kind's own phases (never an inherited key such as `toString`). */
export function hasPhase(definition: SomeTaskDefinition, phase: string): boolean {
  return Object.hasOwn(definition.phases, phase);
}

/** Why `data` may not be stored as the checkpoint of `phase`, or undefined when it may. */
export function checkpointProblem(
  definition: SomeTaskDefinition,
  phase: string,
  data: Json,
): string | undefined {
  const schemas = definition.data as Record<string, z.ZodType | undefined> | undefined;
  const schema = schemas && Object.hasOwn(schemas, phase) ? schemas[phase] : undefined;
  if (!schema) return undefined;
  const parsed = schema.safeParse(data);
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0];
  return `checkpoint data for phase "${phase}" of "${definition.kind}" is invalid at ${issue?.path.join(".") || "(root)"}: ${issue?.message}`;
}

export const DEFAULT_MAX_RESTARTS = 3;

/** The restart limit of `task`: its kind's (per task if the kind decides so), else `fallback`, else 3. */
export function restartLimitOf(definition: SomeTaskDefinition, task: Task, fallback?: number): number {
  const own =
    typeof definition.maxRestarts === "function" ? definition.maxRestarts(task) : definition.maxRestarts;
  return own ?? fallback ?? DEFAULT_MAX_RESTARTS;
}
