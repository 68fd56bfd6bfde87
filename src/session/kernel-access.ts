/**
 * The kernel's own commit of a session, reachable from the kernel's tests only: this module is not
 * exported from the package. Apps commit through `session.commit` and its role drafts.
 */
import { InvalidArgumentError } from "../errors.ts";
import type { CommitResult, KernelCommit, KernelCommitOptions } from "./commit-pipeline.ts";

/** The kernel's own commit of each open session (see {@link commitAsKernel}). */
type KernelCommitFn = <T>(build: KernelCommit<T>, options?: KernelCommitOptions) => Promise<CommitResult<T>>;
const kernelCommits = new WeakMap<object, KernelCommitFn>();

/** Called by each Session as it is built: its kernel commit, for {@link commitAsKernel}. */
export function registerKernelCommit(session: object, commit: KernelCommitFn): void {
  kernelCommits.set(session, commit);
}

/**
 * Commits on the kernel's own draft of `session`, which writes any record: for the kernel's own tests of
 * storage and recovery. Not exported from the package; apps use `session.commit`.
 */
export function commitAsKernel<T>(
  session: object,
  build: KernelCommit<T>,
  options?: KernelCommitOptions,
): Promise<CommitResult<T>> {
  const commit = kernelCommits.get(session);
  if (!commit) return Promise.reject(new InvalidArgumentError("not a session"));
  return commit(build, options);
}
