/**
 * The page side: a typed client for a session worker. Listeners passed to `subscribe` are proxied into the
 * worker and released when unsubscribed; errors arrive as the kernel's class thrown, with its fields.
 *
 * @example
 * const client = connectSessionWorker(new Worker(new URL("./session.worker.ts", import.meta.url), { type: "module" }));
 * const sub = await client.submit({ requestId: crypto.randomUUID(), conversationId: "main", input: "Hi" });
 * const stop = await client.subscribe(0, (change) => render(change));
 */
import * as Comlink from "comlink";
import type { ChangeListener, CommitRecord, Preview } from "../src/index.ts";
import { fromWireError, type WireError } from "./error-wire.ts";
import { installErrorTransfer, type PreviewItem, type SessionWorkerApi } from "./protocol.ts";

/** The worker's API as the page uses it: a subscription is stopped by the function `subscribe` resolves with. */
export interface SessionWorkerClient extends Omit<SessionWorkerApi, "subscribe" | "unsubscribe" | "close"> {
  /** Resolves with the function that stops the subscription (and releases its proxy). */
  subscribe(
    fromVersion: number,
    listener: ChangeListener,
    onError?: (error: Error) => void,
    /** Previews (the model's text as it streams, uncommitted), in order with the changes. */
    onPreview?: (preview: Preview) => void,
  ): Promise<() => Promise<void>>;
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
    submissionForRequest: (requestId) => remote.submissionForRequest(requestId),
    view: (options) => remote.view(options),
    async subscribe(fromVersion, listener, onError, onPreview) {
      const deliver = (item: CommitRecord | PreviewItem) =>
        "preview" in item ? onPreview?.(item.preview) : listener(item);
      const id = await remote.subscribe(
        fromVersion,
        Comlink.proxy(deliver),
        onError && Comlink.proxy((wire: WireError) => onError(fromWireError(wire))),
        onPreview !== undefined,
      );
      return () => remote.unsubscribe(id);
    },
    cancelSubmission: (submissionId, reason) => remote.cancelSubmission(submissionId, reason),
    signal: (key, payload, options) => remote.signal(key, payload, options),
    earlySignals: () => remote.earlySignals(),
    dropEarlySignal: (key) => remote.dropEarlySignal(key),
    parkedWaits: (options) => remote.parkedWaits(options),
    changes: (afterVersion, limit) => remote.changes(afterVersion, limit),
    subscriptionCount: () => remote.subscriptionCount(),
    link: () => remote.link(),
    handOff: () => remote.handOff(),
    takeBack: () => remote.takeBack(),
    async close() {
      await remote.close();
      remote[Comlink.releaseProxy]();
    },
  };
}
