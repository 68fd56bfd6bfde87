/**
 * The page side: a typed client for a session worker. Listeners passed to `subscribe` are proxied into the
 * worker and released when unsubscribed; errors arrive as KernelErrors with their original name and code.
 *
 * @example
 * const client = connectSessionWorker(new Worker(new URL("./session.worker.ts", import.meta.url), { type: "module" }));
 * const sub = await client.submit({ requestId: crypto.randomUUID(), conversationId: "main", input: "Hi" });
 * const stop = await client.subscribe(0, (change) => render(change));
 */
import * as Comlink from "comlink";
import type {
  ChangeListener,
  CommitRecord,
  SessionView,
  Submission,
  SubmitInput,
  ViewOptions,
} from "../src/index.ts";
import { installErrorTransfer, type SessionWorkerApi } from "./protocol.ts";

export interface SessionWorkerClient {
  role(): Promise<"leader" | "follower">;
  submit(input: SubmitInput): Promise<Submission>;
  wait(submissionId: string): Promise<Submission>;
  /** The session's view (trimmed for display by `options`), or undefined in a follower tab. */
  view(options?: ViewOptions): Promise<SessionView | undefined>;
  /** Resolves with the function that stops the subscription (and releases its proxy). */
  subscribe(fromVersion: number, listener: ChangeListener): Promise<() => Promise<void>>;
  cancelSubmission(submissionId: string, reason?: string): Promise<Submission | undefined>;
  /** Live subscriptions the worker holds for this client (0 after every `stop`). */
  subscriptionCount(): Promise<number>;
  /** Committed changes after a version, from the change log. */
  changes(afterVersion: number, limit?: number): Promise<CommitRecord[]>;
  /** Closes the host in the worker and releases the connection. */
  close(): Promise<void>;
}

export function connectSessionWorker(endpoint: Comlink.Endpoint): SessionWorkerClient {
  installErrorTransfer();
  const remote = Comlink.wrap<SessionWorkerApi>(endpoint);
  return {
    role: () => remote.role(),
    submit: (input) => remote.submit(input),
    wait: (submissionId) => remote.wait(submissionId),
    view: (options) => remote.view(options),
    async subscribe(fromVersion, listener) {
      const id = await remote.subscribe(fromVersion, Comlink.proxy(listener));
      return () => remote.unsubscribe(id);
    },
    cancelSubmission: (submissionId, reason) => remote.cancelSubmission(submissionId, reason),
    changes: (afterVersion, limit) => remote.changes(afterVersion, limit),
    subscriptionCount: () => remote.subscriptionCount(),
    async close() {
      await remote.close();
      remote[Comlink.releaseProxy]();
    },
  };
}
