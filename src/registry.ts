/**
 * The Registry: the code side of a session. Stored records name a document `type` or a task `kind` and
 * version; the Registry resolves them to definitions, and tells how to migrate an older stored task.
 */
import type { DocumentDefinition } from "./documents/define-document.ts";
import { KERNEL_DOCUMENT_TYPES } from "./documents/define-document.ts";
import { DefinitionError } from "./errors.ts";
import type { Json, Submission } from "./records/schemas.ts";
import { findSignal, KERNEL_SIGNALS, type SignalDefinition, unnamableKey } from "./signals/define-signal.ts";
import type { TaskDefinition, TaskSnapshot } from "./tasks/define-task.ts";
import type { FollowUp } from "./tasks/task-events.ts";

// Definitions are stored type-erased: their phases are only ever called with inputs their own schema parsed.
// biome-ignore lint/suspicious/noExplicitAny: see above
type AnyTaskDefinition = TaskDefinition<any, any>;

/** The task a new Submission starts, if the app wants one. */
/**
 * The root task a Submission starts, if any, and what it does when an earlier Submission of its
 * conversation is unfinished (`followUp`, default `queue`: see `tasks/follow-up.ts`).
 */
export type SubmissionTask = (
  submission: Submission,
) => { kind: string; input: Json; followUp?: FollowUp } | undefined;

export interface RegistryInput {
  // biome-ignore lint/suspicious/noExplicitAny: definitions of any value type; each validates its own values
  readonly documents?: readonly DocumentDefinition<any>[];
  readonly tasks?: readonly AnyTaskDefinition[];
  /** Starts a root task for every accepted Submission, in the same commit that accepts it. */
  readonly submissionTask?: SubmissionTask;
  /** The signal keys the session accepts outside input for (besides the kernel's `approval:*`). */
  // biome-ignore lint/suspicious/noExplicitAny: definitions of any payload type; each validates its own
  readonly signals?: readonly SignalDefinition<any>[];
}

/** How a stored task resolves against the registered definitions. */
export type TaskResolution =
  | {
      readonly ok: true;
      readonly definition: AnyTaskDefinition;
      readonly migrate?: (stored: TaskSnapshot) => TaskSnapshot;
    }
  | { readonly ok: false; readonly reason: string };

/** Resolved definitions, looked up by name. Task kinds may be registered later (blocked tasks then run). */
export class Registry {
  readonly documents: ReadonlyMap<string, DocumentDefinition<unknown>>;
  readonly submissionTask: SubmissionTask | undefined;
  private readonly signals: readonly SignalDefinition<unknown>[];
  private readonly tasks = new Map<string, Map<number, AnyTaskDefinition>>();
  private readonly listeners = new Set<() => void>();

  constructor(input: RegistryInput = {}) {
    const documents = new Map<string, DocumentDefinition<unknown>>();
    for (const definition of input.documents ?? []) {
      if (documents.has(definition.type))
        throw new DefinitionError(`document type "${definition.type}" is registered twice`);
      if (KERNEL_DOCUMENT_TYPES.has(definition.type))
        throw new DefinitionError(`document type "${definition.type}" is the kernel's own`);
      documents.set(definition.type, definition);
    }
    this.documents = documents;
    this.submissionTask = input.submissionTask;
    for (const definition of input.signals ?? []) {
      if (definition.key.startsWith("approval:") || definition.key.startsWith("turn:"))
        throw new DefinitionError(`signal key "${definition.key}" is the kernel's own (approvals, turns)`);
      const unnamable = unnamableKey(definition.key);
      if (unnamable) throw new DefinitionError(unnamable);
    }
    this.signals = [...KERNEL_SIGNALS, ...(input.signals ?? [])];
    for (const definition of input.tasks ?? []) this.addTask(definition);
  }

  /** The definition of the signals of `key`, if the session accepts any. */
  signalFor(key: string): SignalDefinition<unknown> | undefined {
    return findSignal(this.signals, key);
  }

  /** Whether documents of `type` are loss-tolerant progress, which a deferred commit may write. */
  isProgressDocument(type: string): boolean {
    return KERNEL_DOCUMENT_TYPES.get(type)?.progress ?? this.documents.get(type)?.progress === true;
  }

  /** Whether documents of `type` are written only by the kernel (tool runs, usage, streams). */
  isKernelDocument(type: string): boolean {
    return KERNEL_DOCUMENT_TYPES.has(type);
  }

  /** The definition of exactly this kind and version. */
  task(kind: string, version: number): AnyTaskDefinition | undefined {
    return this.tasks.get(kind)?.get(version);
  }

  /** The newest registered version of a kind. */
  latestTask(kind: string): AnyTaskDefinition | undefined {
    const versions = this.tasks.get(kind);
    if (!versions) return undefined;
    return versions.get(Math.max(...versions.keys()));
  }

  /** Registers a task kind (or a new version of one) and tells listeners, so blocked tasks can run. */
  registerTask(definition: AnyTaskDefinition): void {
    this.addTask(definition);
    for (const listener of this.listeners) listener();
  }

  /** Called after every `registerTask`. Returns an unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Resolves a stored task: its own version if registered, else the newest version reachable through a
   * chain of migrations, else a stated reason why it cannot run.
   */
  resolveTask(kind: string, version: number): TaskResolution {
    const exact = this.task(kind, version);
    if (exact) return { ok: true, definition: exact };
    const latest = this.latestTask(kind);
    if (!latest) return { ok: false, reason: `no task kind "${kind}" is registered` };
    if (latest.version < version) {
      return {
        ok: false,
        reason: `stored version ${version} of "${kind}" is newer than the registered version ${latest.version}`,
      };
    }
    const steps: ((stored: TaskSnapshot) => TaskSnapshot)[] = [];
    for (let v = version; v < latest.version; v++) {
      const step = this.findMigration(kind, v);
      if (!step) {
        return { ok: false, reason: `no migration of "${kind}" from version ${v} to ${v + 1} is registered` };
      }
      steps.push(step);
    }
    return {
      ok: true,
      definition: latest,
      migrate: (stored) => steps.reduce((snapshot, step) => step(snapshot), stored),
    };
  }

  private findMigration(kind: string, from: number) {
    for (const definition of this.tasks.get(kind)?.values() ?? []) {
      const step = definition.migrations?.[from];
      if (step) return step;
    }
    return undefined;
  }

  private addTask(definition: AnyTaskDefinition): void {
    let versions = this.tasks.get(definition.kind);
    if (!versions) {
      versions = new Map();
      this.tasks.set(definition.kind, versions);
    }
    if (versions.has(definition.version)) {
      throw new DefinitionError(
        `task kind "${definition.kind}" version ${definition.version} is registered twice`,
      );
    }
    versions.set(definition.version, definition);
  }
}

/**
 * Builds a Registry. Duplicate names are a programming error and throw at once.
 *
 * @example
 * const registry = createRegistry({ documents: [emailPlan], tasks: [sendBatch] });
 */
export function createRegistry(input: RegistryInput = {}): Registry {
  return new Registry(input);
}
