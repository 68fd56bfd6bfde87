/**
 * Errors between a session worker and its page, and between tabs: the kernel's wire format (`name`, `code`,
 * `message`) plus the error's own fields (a refused signal's `key`, an argument's `issues`, a record's name
 * and size …), rebuilt on the other side as the class that was thrown — `instanceof SignalRefusedError`
 * holds on the page, and `error.key` is there. A reader that knows only the kernel's format ignores `fields`.
 */

import { ModelError } from "../src/agent/model.ts";
import {
  BlockedRecordError,
  CorruptRecordError,
  DefinitionError,
  DuplicateKeyError,
  DuplicateRequestError,
  deserializeError,
  EnvironmentError,
  HistoryTruncatedError,
  InvalidArgumentError,
  InvalidTaskEventError,
  KernelError,
  OwnedElsewhereError,
  ReadOnlyError,
  RecordTooLargeError,
  RefusedWriteError,
  ReplicationDivergedError,
  type SerializedError,
  SessionClosedError,
  SessionNotFoundError,
  SessionStoppedError,
  SignalRefusedError,
  StaleOwnerError,
  StorageError,
  serializeError,
  ValidationError,
} from "../src/errors.ts";

/** An error on the wire: the kernel's format and, beside it, the thrown error's own fields. */
export interface WireError extends SerializedError {
  /** The error's own data fields (`key`, `issues`, `record`, …), as JSON. */
  readonly fields?: Record<string, unknown>;
}

/** Every class of the kernel's hierarchy, by its `name` (the keys are written out: they survive minifying). */
const CLASSES: Readonly<Record<string, { prototype: KernelError }>> = {
  BlockedRecordError,
  CorruptRecordError,
  DefinitionError,
  DuplicateKeyError,
  DuplicateRequestError,
  EnvironmentError,
  HistoryTruncatedError,
  InvalidArgumentError,
  InvalidTaskEventError,
  ModelError,
  OwnedElsewhereError,
  ReadOnlyError,
  RecordTooLargeError,
  RefusedWriteError,
  ReplicationDivergedError,
  SessionClosedError,
  SessionNotFoundError,
  SessionStoppedError,
  SignalRefusedError,
  StaleOwnerError,
  StorageError,
  ValidationError,
};

/** Fields a sender of an older version does not send, as the class's constructor defaults them. */
const DEFAULTS: Readonly<Record<string, Record<string, unknown>>> = { InvalidArgumentError: { issues: [] } };

/** Carried by the wire format itself, or not data (a cause, a stack may not survive a structured clone). */
const NOT_FIELDS: ReadonlySet<string> = new Set(["name", "code", "message", "stack", "cause"]);

/** `error` in the wire format, with its own data fields. */
export function toWireError(error: unknown): WireError {
  const wire = serializeError(error);
  if (!(error instanceof KernelError)) return wire;
  const fields: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(error)) {
    if (NOT_FIELDS.has(name) || value === undefined) continue;
    const json = asJson(value);
    if (json !== undefined) fields[name] = json;
  }
  return Object.keys(fields).length > 0 ? { ...wire, fields } : wire;
}

/**
 * The error `wire` describes: an instance of the kernel's class of that name (with its fields) when the
 * code is that class's, else a KernelError with the wire's name and code (an app's own error, say).
 */
export function fromWireError(wire: WireError): KernelError {
  const error = deserializeError(wire);
  const Class = Object.hasOwn(CLASSES, wire.name) ? CLASSES[wire.name] : undefined;
  if (!Class || error.code !== wire.code) return error;
  // A real Error (its stack, the page's `Error.isError`) of the thrown class, carrying what it carried.
  Object.setPrototypeOf(error, Class.prototype);
  const fields = { ...DEFAULTS[wire.name], ...wire.fields };
  for (const [name, value] of Object.entries(fields))
    if (!NOT_FIELDS.has(name)) Object.defineProperty(error, name, { value, enumerable: true });
  return error;
}

/** `value` as JSON (a copy), or undefined when it is not JSON. */
function asJson(value: unknown): unknown {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}
