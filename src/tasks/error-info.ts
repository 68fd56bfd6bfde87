/** Stored error info: what a failed task or Submission records about why. */
import { KernelError } from "../errors.ts";
import type { ErrorInfo } from "../records/schemas.ts";

/** Turns anything thrown by a phase into stored error info. */
export function errorInfo(error: unknown, code = "phase-failed"): ErrorInfo {
  if (error instanceof KernelError) return { name: error.name, code: error.code, message: error.message };
  if (error instanceof Error) return { name: error.name, code, message: error.message };
  if (
    typeof error === "object" &&
    error !== null &&
    "message" in error &&
    "code" in error &&
    "name" in error
  ) {
    const e = error as ErrorInfo;
    return { name: String(e.name), code: String(e.code), message: String(e.message) };
  }
  return { name: "Error", code, message: String(error) };
}

/** Error info the task machine writes itself (`TaskError` with one of its codes). */
export function taskError(code: string, message: string): ErrorInfo {
  return { name: "TaskError", code, message };
}
