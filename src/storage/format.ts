/** Which storage formats this code reads (see `STORAGE_FORMAT`). */
import { EnvironmentError } from "../errors.ts";
import { STORAGE_FORMAT } from "../records/schemas.ts";

/**
 * Refuses a session a newer version of the app stored in a format this one does not know: it must neither
 * take it over (writing its row back in an older format) nor read rows it would misread. Every open checks
 * it, and so does every read of the change log (a tab that follows a writer running newer code).
 */
export function checkFormat(stored: unknown, sessionId: string): void {
  const format = (stored as { format?: unknown } | undefined)?.format;
  if (typeof format !== "number" || format <= STORAGE_FORMAT) return;
  throw new EnvironmentError(
    `session ${sessionId} is stored in format ${format}, by a newer version of the app; this version reads formats up to ${STORAGE_FORMAT} (reload to run the newer one)`,
    [{ reason: `storage format ${format}` }],
  );
}
