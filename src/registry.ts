/**
 * The Registry: the code side of a session. Stored records name a `type` or `kind`; the Registry resolves
 * them to definitions. Later layers add task kinds and tools here.
 */
import type { DocumentDefinition } from "./documents/define-document.ts";
import type { Json } from "./records/schemas.ts";

export interface RegistryInput {
  readonly documents?: readonly DocumentDefinition<Json>[];
}

/** Resolved definitions, looked up by name. */
export interface Registry {
  readonly documents: ReadonlyMap<string, DocumentDefinition<Json>>;
}

/**
 * Builds a Registry. Duplicate names are a programming error and throw at once.
 *
 * @example
 * const registry = createRegistry({ documents: [emailPlan] });
 */
export function createRegistry(input: RegistryInput = {}): Registry {
  const documents = new Map<string, DocumentDefinition<Json>>();
  for (const definition of input.documents ?? []) {
    if (documents.has(definition.type))
      throw new Error(`document type "${definition.type}" is registered twice`);
    documents.set(definition.type, definition);
  }
  return { documents };
}
