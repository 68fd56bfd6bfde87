/**
 * What a host needs to continue a session (DESIGN §6): the storage format, and for every unfinished task
 * its kind and version (or a migration to a registered one) and, for tool calls, the tool with a replay
 * policy that keeps the call's recovery as it was promised. `checkEnvironment` is the dry run: before a
 * deploy, it tells which stored sessions a new registry could not continue, and why. Hosts run the same
 * check before they take a session over, and refuse with `EnvironmentError` if it fails.
 */
import { EnvironmentError, KernelError } from "../errors.ts";
import { isTerminal, type Task } from "../records/schemas.ts";
import type { Registry } from "../registry.ts";
import { openSession } from "../session/open-session.ts";
import type { Storage } from "../storage/storage.ts";

/** One reason a registry cannot continue a session. */
export interface EnvironmentProblem {
  /** The task it is about (absent for the session as a whole: not found, unreadable, corrupt). */
  readonly taskId?: string;
  readonly kind?: string;
  readonly reason: string;
}

/** What one stored session needs, and whether the registry has it. */
export interface EnvironmentReport {
  readonly sessionId: string;
  readonly ok: boolean;
  readonly version?: number;
  /** The task kinds (and stored versions) its unfinished work uses. */
  readonly kinds: readonly { readonly kind: string; readonly version: number; readonly tasks: number }[];
  readonly problems: readonly EnvironmentProblem[];
}

/** Checks each stored session against `registry`, read-only (nothing is opened for writing or resumed). */
export async function checkEnvironment(
  storage: Storage,
  sessionIds: readonly string[],
  registry: Registry,
): Promise<EnvironmentReport[]> {
  const reports: EnvironmentReport[] = [];
  for (const sessionId of sessionIds) reports.push(await checkOne(storage, sessionId, registry));
  return reports;
}

async function checkOne(storage: Storage, sessionId: string, registry: Registry): Promise<EnvironmentReport> {
  let session: Awaited<ReturnType<typeof openSession>>;
  try {
    session = await openSession({ id: sessionId, storage, registry, mode: "read" });
  } catch (error) {
    const reason = error instanceof KernelError ? error.message : String(error);
    return { sessionId, ok: false, kinds: [], problems: [{ reason }] };
  }
  try {
    const view = session.view({ tasks: "active" });
    const problems: EnvironmentProblem[] = view.blocked.map((b) => ({ reason: `${b.record}: ${b.reason}` }));
    const kinds = new Map<string, { kind: string; version: number; tasks: number }>();
    for (const task of view.tasks) {
      if (isTerminal(task)) continue;
      const key = `${task.kind}@${task.kindVersion}`;
      const entry = kinds.get(key) ?? { kind: task.kind, version: task.kindVersion, tasks: 0 };
      entry.tasks++;
      kinds.set(key, entry);
      const reason = cannotContinue(registry, task);
      if (reason) problems.push({ taskId: task.id, kind: task.kind, reason });
    }
    return {
      sessionId,
      ok: problems.length === 0,
      version: view.version,
      kinds: [...kinds.values()],
      problems,
    };
  } finally {
    await session.close();
  }
}

function cannotContinue(registry: Registry, task: Task): string | undefined {
  const resolved = registry.resolveTask(task.kind, task.kindVersion);
  if (!resolved.ok) return resolved.reason;
  return resolved.definition.cannotContinue?.(task);
}

/** Throws `EnvironmentError` unless `registry` can continue the session. */
export async function assertCanContinue(
  storage: Storage,
  sessionId: string,
  registry: Registry,
): Promise<void> {
  const [report] = await checkEnvironment(storage, [sessionId], registry);
  if (!report || report.ok) return;
  const first = report.problems[0]?.reason ?? "unknown";
  throw new EnvironmentError(
    `this host cannot continue session ${sessionId}: ${first}${report.problems.length > 1 ? ` (and ${report.problems.length - 1} more)` : ""}`,
    report.problems,
  );
}
