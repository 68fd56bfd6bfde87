/**
 * JSON values as records hold them: plain, finite, acyclic, with well-formed Unicode strings, so every
 * store keeps them exactly as they are and reads them back identical.
 */
import { z } from "zod";

/** A JSON value: what stored records may hold, so every store can keep them as they are. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const nativeWellFormed = (String.prototype as { isWellFormed?: () => boolean }).isWellFormed;

/**
 * Whether `text` is well-formed Unicode (no lone surrogate). Stores write UTF-8 or UTF-16 that must read
 * back as it was; a lone surrogate reads back as U+FFFD from SQLite, so a key holding one is never found.
 */
export function isWellFormedText(text: string): boolean {
  return nativeWellFormed ? nativeWellFormed.call(text) : !LONE_SURROGATE.test(text);
}

/** `text` with each lone surrogate replaced by U+FFFD (as a UTF-8 decoder reads it): `text` itself when well-formed. */
export function wellFormedText(text: string): string {
  if (isWellFormedText(text)) return text;
  return text.replace(new RegExp(LONE_SURROGATE.source, "g"), "\ufffd");
}

/**
 * What is wrong with `id` as a session's id, or undefined: a non-empty, well-formed string of at most 256
 * characters (the session row stores it; one its schema refuses would be written, then read back as corrupt).
 */
export function sessionIdProblem(id: unknown): string | undefined {
  if (typeof id !== "string" || id.length === 0 || id.length > 256)
    return "session id must be a non-empty string of at most 256 characters";
  return isWellFormedText(id) ? undefined : `session id is ${MALFORMED_TEXT}: it must be well-formed`;
}

/** Explains a string that is not well-formed. */
export const MALFORMED_TEXT = "not well-formed Unicode (it holds a lone surrogate)";

/** How deep JSON values in records may nest (a record's own fields count from their field's level). */
export const MAX_JSON_DEPTH = 256;

/**
 * How much deeper than its own root a value sits where a task's checkpoint keeps it (`data.args` of a tool
 * call's intent, `data.signals[key]` of a wait that took a signal): JSON a record allows at its root, yet
 * refused there. Checked when the value arrives (a model's arguments, a signal), not by the commit.
 */
export const CHECKPOINT_VALUE_DEPTH = 2;

/** Whether `value` is JSON all the way down (plain objects and arrays, finite numbers, no cycles). */
function isJson(value: unknown, depth: number): boolean {
  if (typeof value === "string") return isWellFormedText(value);
  if (value === null || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value !== "object" || depth > MAX_JSON_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!isJson(value[i], depth + 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const key in value) {
    if (!isWellFormedText(key) || !isJson((value as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/**
 * Where and why `value` stops being JSON (`a.b[2]: not a JSON value`, `a.c: not well-formed Unicode …`), or
 * undefined when all of it is JSON.
 */
export function findNonJson(value: unknown, startDepth = 0): string | undefined {
  // The fast check runs on every commit; paths are only built for the error message.
  if (isJson(value, startDepth)) return undefined;
  const walk = (v: unknown, path: string, depth: number): string | undefined => {
    if (isJson(v, depth)) return undefined;
    if (typeof v === "object" && v !== null && depth > MAX_JSON_DEPTH)
      return `${path || "(root)"}: nested deeper than ${MAX_JSON_DEPTH} levels`;
    if (typeof v === "object" && v !== null) {
      const proto = Object.getPrototypeOf(v);
      if (Array.isArray(v) || proto === Object.prototype || proto === null) {
        for (const [key, inner] of Object.entries(v)) {
          if (!isWellFormedText(key)) return `${path || "(root)"}: a key is ${MALFORMED_TEXT}`;
          const bad = walk(
            inner,
            Array.isArray(v) ? `${path}[${key}]` : path ? `${path}.${key}` : key,
            depth + 1,
          );
          if (bad !== undefined) return bad;
        }
      }
    }
    const where = path || "(root)";
    return typeof v === "string" ? `${where}: ${MALFORMED_TEXT}` : `${where}: not a JSON value`;
  };
  return walk(value, "", startDepth);
}

/** The UTF-8 length of a string (what a store writes, or sends), counted without encoding it. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) bytes += 1;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      bytes += 2; // a surrogate pair: 4 bytes for its 2 units
      i++;
    } else bytes += 2;
  }
  return bytes;
}

/**
 * `text` cut to at most `most` UTF-16 units and marked with "…", never inside a surrogate pair: a cut text
 * that is stored, or sent to a model, must still be well-formed. Text that fits is returned as it is.
 */
export function clip(text: string, most = 500): string {
  if (text.length <= most) return text;
  const high = text.charCodeAt(most - 1);
  return `${text.slice(0, high >= 0xd800 && high <= 0xdbff ? most - 1 : most)}…`;
}

/**
 * Any JSON value. A hand-written check rather than `z.json()`: that recursive union re-parses every nested
 * value through each branch, and JSON fields are validated on every commit. Valid values are copied (and
 * frozen), so a record never aliases an object its caller may still change.
 */
export const JsonSchema: z.ZodType<Json> = nestedJsonSchema(0);

/**
 * JSON that a record will hold `depth` levels below one of its JSON fields (an input's `data`, kept inside
 * the Submission's `input`): validated against the depth it will have there, so what passes here is never
 * refused later, after other writes.
 */
export function nestedJsonSchema(depth: number): z.ZodType<Json> {
  return z
    .unknown()
    .superRefine((value, ctx) => {
      if (wasChecked(value, depth)) return;
      const bad = findNonJson(value, depth);
      if (bad !== undefined) ctx.addIssue({ code: "custom", message: bad });
    })
    .transform((value) => (wasChecked(value, depth) ? (value as Json) : checkedCopy(value as Json, depth)));
}

/**
 * The copies {@link checkedCopy} made, each with the depth it was checked at. They are frozen, so what
 * passed stays valid: a value a record holds again (a task's input and checkpoint at each of its writes) is
 * not walked and copied again, as deep as it was checked or less deep.
 */
const checkedAt = new WeakMap<object, number>();

const wasChecked = (value: unknown, depth: number): boolean =>
  typeof value === "object" && value !== null && (checkedAt.get(value) ?? -1) >= depth;

/** {@link frozenCopy} of a value found to be JSON `depth` levels down, remembered as checked. */
export function checkedCopy(value: Json, depth = 0): Json {
  const copy = frozenCopy(value);
  if (typeof copy === "object" && copy !== null) checkedAt.set(copy, depth);
  return copy;
}

/**
 * A deep copy of a JSON value, frozen as it is built: records never alias their caller's objects, and
 * freezing the record afterwards skips these already-frozen subtrees.
 */
export function frozenCopy(value: Json): Json {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return Object.freeze(value.map(frozenCopy)) as Json[];
  const copy: { [key: string]: Json } = {};
  for (const key in value) {
    const inner = frozenCopy(value[key] as Json);
    // An own "__proto__" key (JSON.parse makes one) stays a key: assigning it would set the copy's prototype.
    if (key === "__proto__")
      Object.defineProperty(copy, key, {
        value: inner,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else copy[key] = inner;
  }
  return Object.freeze(copy);
}

/** Any string a record holds: well-formed Unicode, so every store reads back exactly what was written. */
export const TextSchema = z.string().refine(isWellFormedText, { message: MALFORMED_TEXT });

/** Whether two JSON values are equal (object keys in any order). */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => jsonEqual(item, b[i] as Json));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key] as Json, b[key] as Json));
}
