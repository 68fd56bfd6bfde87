/**
 * JSON Patch (RFC 6902) through `fast-json-patch`: linear-time diffs (`compare`) and in-place application,
 * which is what a commit pipeline that stores document deltas needs on its hot path. Kept on purpose,
 * although its last release is from 2022: the maintained, typed alternative (`rfc6902`, 5.4.0) computes a
 * minimal edit script for arrays, quadratic in their length — diffing a 2,000-item array with one item
 * appended (a stream record's chunks, a plan's steps) ran out of a 4 GB heap after 70 s here, where
 * `compare` takes well under a millisecond (`npm run bench -- documents/` measures both in one run).
 * Patches are plain RFC 6902 either way: stored ones stay valid
 * whatever library applies them later.
 */
// Default import on purpose: the package ships CJS to Node and ESM to bundlers, and only the default
// export has the same shape in both.
import jsonPatch, { type Operation } from "fast-json-patch";
import type { Json, PatchOperation } from "../records/schemas.ts";

/** The operations that turn `before` into `after`. */
export function diffJson(before: Json, after: Json): PatchOperation[] {
  if (isContainer(before) && isContainer(after) && Array.isArray(before) === Array.isArray(after)) {
    return jsonPatch.compare(before as object, after as object) as PatchOperation[];
  }
  return Object.is(before, after) ? [] : [{ op: "replace", path: "", value: after }];
}

/** Applies `patch` to a copy of `value` and returns the result; throws a descriptive error if it does not apply. */
export function applyJsonPatch(value: Json, patch: readonly PatchOperation[]): Json {
  if (patch.length === 0) return value;
  const copy = structuredClone(value);
  return jsonPatch.applyPatch(copy, patch as Operation[], true, true).newDocument as Json;
}

/** Applies `patch` to `value` in place (the caller owns `value`) and returns the result. */
export function applyJsonPatchInPlace(value: Json, patch: readonly PatchOperation[]): Json {
  if (patch.length === 0) return value;
  return jsonPatch.applyPatch(value, patch as Operation[], false, true).newDocument as Json;
}

function isContainer(value: Json): boolean {
  return typeof value === "object" && value !== null;
}
