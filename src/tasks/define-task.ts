/**
 * Task definitions: a task kind is a set of named phases. A phase runs (it may do external work), then
 * returns one transition, committed atomically with everything it staged. Recovery re-enters the saved
 * phase from its start; it never jumps into the middle of one.
 */
import type { z } from "zod";
import type { Clock } from "../clock.ts";
import type {
  Conversation,
  Entry,
  EntryContent,
  ErrorInfo,
  Json,
  PatchOperation,
  Task,
} from "../records/schemas.ts";
import { compiled } from "../records/schemas.ts";
import type { Draft, EntryLinks } from "../session/draft.ts";
import type { DocumentState } from "../session/state.ts";

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
  | { readonly type: "complete"; readonly result: Json }
  | { readonly type: "fail"; readonly error: ErrorInfo };

/** How a waiting parent joins its children. */
export type JoinPolicy = "allSettled" | "failFast";

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

/** Everything a phase can read, stage and return. */
export interface PhaseContext<Input = Json, Data = Json> {
  /** The task record as committed before this phase started. */
  readonly task: Task;
  /** The task's input, parsed with the definition's schema. */
  readonly input: Input;
  /** The checkpoint data the previous phase saved. */
  readonly data: Data;
  readonly phase: string;
  /** 1 for the first entry of this task's first phase, +1 for every phase entry, including re-entries. */
  readonly attempt: number;
  /** How many times this phase was re-entered after an interruption. */
  readonly restarts: number;
  /** Aborted when the task is cancelled or the host closes. */
  readonly signal: AbortSignal;
  readonly clock: Clock;
  /** A conversation's record (its `entryCount` is the position of the next entry). */
  conversation(id: string): Conversation | undefined;
  /** A committed document, as of when the phase started. */
  document(id: string): DocumentState | undefined;
  /** Records of this task's owned children, as committed (results and errors of finished ones). */
  children(): Task[];
  /** Committed entries of a conversation from `fromSeq` (default 0) to its end. */
  conversationEntries(conversationId: string, fromSeq?: number): Promise<Entry[]>;
  /**
   * Commits loss-tolerant progress (streamed text, live tool output) as a deferred commit, outside this
   * phase's transition: batched, possibly lost in a crash, never needed for correctness.
   */
  progress(build: (draft: Draft) => void): void;

  /** Stages an entry, committed with the transition. */
  appendEntry(conversationId: string, content: EntryContent, links?: EntryLinks): void;
  /** Stages a document value, committed with the transition. */
  setDocument(id: string, type: string, value: Json): void;
  /** Stages JSON Patch operations on a document, committed with the transition. */
  patchDocument(id: string, patch: readonly PatchOperation[]): void;
  /** Stages a child task, created (and started) with the transition. Returns its id. */
  spawn(kind: string, input: Json, options?: SpawnOptions): string;

  /** Continues in `phase` with `data` as its checkpoint. */
  next(phase: string, data?: Json): Transition;
  sleep(until: number, phase: string, data?: Json): Transition;
  /**
   * Waits for `children` (every unfinished owned child must be listed), then continues in `options.next`.
   * (DESIGN §4 calls the option `then`; it is `next` here so the options object is never mistaken for a
   * promise-like "thenable".)
   */
  wait(children: readonly string[], options: { policy: JoinPolicy; next: string }, data?: Json): Transition;
  complete(result?: Json): Transition;
  fail(error: string | Error | ErrorInfo): Transition;
}

/** A phase: runs outside any commit, returns the transition to commit. */
export type Phase<Input, Data> = (context: PhaseContext<Input, Data>) => Transition | Promise<Transition>;

/** A stored task of an older version, as a migration sees and returns it. */
export interface TaskSnapshot {
  readonly input: Json;
  readonly checkpoint: { readonly phase: string; readonly data: Json };
}

export interface TaskDefinition<Input = Json, Data = Json> {
  readonly kind: string;
  /** Bump when input or checkpoint shapes change; give `migrations` from the older versions. */
  readonly version: number;
  readonly input: z.ZodType<Input>;
  readonly phases: Readonly<Record<string, Phase<Input, Data>>>;
  /** The first phase; default the first key of `phases`. */
  readonly start?: string;
  /** `migrations[v]` turns a stored task of version v into version v + 1. */
  readonly migrations?: Readonly<Record<number, (stored: TaskSnapshot) => TaskSnapshot>>;
  /** How many interrupted re-entries of one phase are allowed before the task fails. Default 3. */
  readonly maxRestarts?: number;
  /**
   * What re-entering this task's current phase after a crash will do, in words (recovery previews and
   * devtools show it): e.g. "confirm by operation id op-7" for a tool call whose outcome is unknown.
   */
  readonly describeRecovery?: (task: Task) => string | undefined;
}

/**
 * Declares a task kind.
 *
 * @example
 * const report = defineTask({
 *   kind: "report",
 *   version: 1,
 *   input: z.object({ url: z.string().url() }),
 *   phases: {
 *     fetch: async (ctx) => ctx.next("summarise", { body: await (await fetch(ctx.input.url, { signal: ctx.signal })).text() }),
 *     summarise: (ctx) => ctx.complete({ length: String(ctx.data).length }),
 *   },
 * });
 */
export function defineTask<Input, Data = Json>(
  definition: TaskDefinition<Input, Data>,
): TaskDefinition<Input, Data> {
  const phases = Object.keys(definition.phases);
  if (phases.length === 0) throw new Error(`task kind "${definition.kind}" has no phases`);
  if (definition.start !== undefined && !phases.includes(definition.start)) {
    throw new Error(`task kind "${definition.kind}" starts at unknown phase "${definition.start}"`);
  }
  if (!Number.isInteger(definition.version) || definition.version < 1) {
    throw new Error(`task kind "${definition.kind}" needs a positive integer version`);
  }
  // Inputs are validated when a task is created and when it runs: compiled here (see `compiled`).
  return { ...definition, input: compiled(definition.input) };
}

/** The phase a new task of this kind starts in. */
export function startPhase(definition: TaskDefinition<unknown, unknown>): string {
  return definition.start ?? (Object.keys(definition.phases)[0] as string);
}

export const DEFAULT_MAX_RESTARTS = 3;
