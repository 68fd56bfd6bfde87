/** Typed documents: app-defined and kernel-defined structured state with a zod schema per `type`. */
import type { z } from "zod";
import { compiled, type Json } from "../records/schemas.ts";

/** A document type: its name, the schema of its value, and how often a full baseline is stored. */
export interface DocumentDefinition<T extends Json = Json> {
  readonly type: string;
  readonly schema: z.ZodType<T>;
  /** Store the full value every this many versions (deltas in between). Default 32. */
  readonly baselineEvery?: number;
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
export function defineDocument<T extends Json>(definition: DocumentDefinition<T>): DocumentDefinition<T> {
  // Every write of the document is validated: compiled here, where definitions are usually made (see `compiled`).
  return { ...definition, schema: compiled(definition.schema) };
}

export const DEFAULT_BASELINE_EVERY = 32;
