/**
 * Task ids an app or a phase chose (`spawn(…, { id })`) rather than the kernel generated. Memory holds only
 * the working set, so such an id may belong to a task only storage holds — a finished task that left memory,
 * a parked wait — and must never be written over. The task machine notes each chosen id memory does not hold;
 * the commit pipeline then looks those up in storage before it builds that request again, first in its queue
 * (so commits still land in the order they were made), and refuses the request if one exists.
 */
import type { KernelDraft } from "./draft.ts";

/** What the pipeline knows of the chosen ids of the request it builds. */
export interface ChosenIdCheck {
  /** Ids looked up in storage for this request and found absent. */
  readonly absent: ReadonlySet<string>;
  /** Ids the request chose that neither memory nor `absent` knows (filled while it builds). */
  readonly unverified: string[];
}

/** The draft being built and its check: builds run one at a time, synchronously (`commit-pipeline.ts`). */
let building: KernelDraft | undefined;
let buildingCheck: ChosenIdCheck | undefined;

/** Builds `draft` with `build`, the task machine noting in `check` the chosen ids of tasks it creates. */
export function buildChecked<T>(
  draft: KernelDraft,
  check: ChosenIdCheck,
  build: (draft: KernelDraft) => T,
): T {
  building = draft;
  buildingCheck = check;
  try {
    return build(draft);
  } finally {
    building = undefined;
    buildingCheck = undefined;
  }
}

/** A task `draft` creates has the chosen id `id`: noted unless memory or a lookup already answers for it. */
export function noteChosenId(draft: KernelDraft, id: string): void {
  if (draft !== building || !buildingCheck || draft.task(id)) return; // memory refuses a task it holds
  if (!buildingCheck.absent.has(id)) buildingCheck.unverified.push(id);
}
