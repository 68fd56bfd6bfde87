/** Typed documents: app-defined and kernel-defined structured state with a zod schema per `type`. */
import type { z } from "zod";
import { DefinitionError } from "../errors.ts";
import { compiled, type Json } from "../records/schemas.ts";

/**
 * A document type: its name, the schema of its value, and how often a full baseline is stored. The value
 * must be JSON when stored (checked on every write, whatever the schema's own type says).
 */
export interface DocumentDefinition<T = Json> {
  readonly type: string;
  readonly schema: z.ZodType<T>;
  /** Store the full value every this many versions (deltas in between). Default 32. */
  readonly baselineEvery?: number;
  /**
   * Loss-tolerant progress (live output, a streamed draft): only documents of such types may be written by
   * a deferred commit, which is batched and may be lost in a crash. Default false.
   */
  readonly progress?: boolean;
}

/**
 * Declares a document type.
 *
 * @example
 * const emailPlan = defineDocument({
 *   type: "email-plan",
 *   schema: z.object({ recipients: z.array(z.string().email()), approved: z.boolean() }),
 * });
 */
export function defineDocument<T>(definition: DocumentDefinition<T>): DocumentDefinition<T> {
  if (typeof definition.type !== "string" || definition.type.length === 0)
    throw new DefinitionError("a document type needs a non-empty name");
  if (KERNEL_DOCUMENT_TYPES.has(definition.type))
    throw new DefinitionError(`document type "${definition.type}" is the kernel's own; choose another name`);
  // Every write of the document is validated: compiled here, where definitions are usually made (see `compiled`).
  return { ...definition, schema: compiled(definition.schema) };
}

export const DEFAULT_BASELINE_EVERY = 32;

/**
 * Document types the kernel writes for its own runs, and whether each is progress. Apps read them (views,
 * devtools) but cannot write them, and cannot define types of these names.
 */
export const KERNEL_DOCUMENT_TYPES: ReadonlyMap<string, { readonly progress: boolean }> = new Map([
  ["model-stream", { progress: true }],
  ["tool-progress", { progress: true }],
]);
