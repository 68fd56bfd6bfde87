/**
 * What crosses the worker boundary: the host API the page calls through comlink, and typed errors.
 * Errors travel as `{ name, code, message }` with their own fields and are rebuilt on the page as the
 * class thrown (see `error-wire.ts`; comlink's own "throw" handler would flatten them to plain Errors).
 */
import * as Comlink from "comlink";
import type {
  CommitRecord,
  Json,
  PendingWait,
  Preview,
  SessionView,
  Signal,
  SignalOptions,
  SignalReceipt,
  Submission,
  SubmitInput,
  ViewOptions,
} from "../src/index.ts";
import { fromWireError, toWireError, type WireError } from "./error-wire.ts";

/** A preview as a subscription delivers it next to committed changes (see `subscribe`). */
export interface PreviewItem {
  readonly preview: Preview;
}

/** The API a session worker exposes. */
export interface SessionWorkerApi {
  role(): Promise<"leader" | "follower">;
  submit(input: SubmitInput): Promise<Submission>;
  wait(submissionId: string): Promise<Submission>;
  /**
   * The Submission accepted for a `requestId`, if any (from memory, else the store's requestId index): a
   * reloaded page finds the run it started without submitting again. Leader or follower alike.
   */
  submissionForRequest(requestId: string): Promise<Submission | undefined>;
  /**
   * The session's view (trimmed by `options`): the leader's own, or in a following tab its read-only copy,
   * brought up to date at each commit the leader announces. Undefined until some tab has created the session.
   */
  view(options?: ViewOptions): Promise<SessionView | undefined>;
  /**
   * Delivers committed changes after `fromVersion`; resolves with an id for `unsubscribe`. `onError` hears
   * why a subscription cannot go on (the history it needs was pruned), in the error wire format.
   */
  subscribe(
    fromVersion: number,
    listener: (item: CommitRecord | PreviewItem) => void,
    onError?: (error: WireError) => void,
    withPreviews?: boolean,
  ): Promise<number>;
  unsubscribe(id: number): void;
  /**
   * Cancels a Submission (its task tree): from the leader at once, from a follower through the durable inbox,
   * resolved once the leader committed the cancel. An unknown id rejects with InvalidArgumentError.
   */
  cancelSubmission(submissionId: string, reason?: string): Promise<Submission>;
  /**
   * Parked waits left in storage (not in `view().pending`): how many, and a page of them (`before`: the
   * `next` of the previous page), read from storage by the leader's session or a follower's read-only one.
   */
  parkedWaits(options?: {
    before?: string;
    limit?: number;
  }): Promise<{ parked: number; waits: PendingWait[]; next?: string } | undefined>;
  /** Answers a wait (`view().pending`): from the leader at once, from a follower through the durable inbox. */
  signal(key: string, payload: Json, options: SignalOptions): Promise<SignalReceipt>;
  /** The signals kept that no wait has taken yet, oldest first (any tab: as its session holds them). */
  earlySignals(): Promise<Signal[]>;
  /**
   * Drops the early signal kept for `key`: the dropped signal, or undefined when none is kept. From a follower
   * tab through the durable inbox, resolved once the leader dropped it (undefined when a wait took it first).
   */
  dropEarlySignal(key: string): Promise<Signal | undefined>;
  /** Live subscriptions held in the worker for this page (each one holds a proxied listener). */
  subscriptionCount(): Promise<number>;
  /** Committed changes after a version, from the change log (devtools, catch-up, benchmarks). */
  changes(afterVersion: number, limit?: number): Promise<CommitRecord[]>;
  /** A linked session's state while this tab leads it (`link` option of the worker), else undefined. */
  link(): Promise<
    { status: "leading" | "fenced" | "released" | "closed"; epoch: number; acknowledged: number } | undefined
  >;
  /** Hands a linked session to its edge host, which takes over at once; this tab follows its copy. */
  handOff(): Promise<void>;
  /** Claims a linked session back from its edge host and leads it here again. */
  takeBack(): Promise<void>;
  close(): Promise<void>;
}

export type { CommitRecord };

let installed = false;

/** Makes thrown errors cross the boundary as their class, with their fields. Idempotent; call on both sides. */
export function installErrorTransfer(): void {
  if (installed) return;
  installed = true;
  // comlink marks thrown values with a private symbol: keep its detection, replace the wire format.
  const original = Comlink.transferHandlers.get("throw");
  if (!original) return;
  Comlink.transferHandlers.set("throw", {
    canHandle: (value: unknown): value is { value: unknown } => original.canHandle(value),
    serialize: ({ value }: { value: unknown }) => [{ error: toWireError(value) }, []],
    deserialize: (serialized: unknown) => {
      throw fromWireError((serialized as { error: WireError }).error);
    },
  } as Comlink.TransferHandler<unknown, unknown>);
}
