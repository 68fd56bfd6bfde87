/**
 * The worker side: `exposeSessionWorker` runs a BrowserSessionHost inside a dedicated Web Worker and exposes
 * it to the page with comlink. An app's worker entry is a few lines:
 *
 * @example
 * // session.worker.ts
 * import { exposeSessionWorker } from "durable-agent/worker";
 * exposeSessionWorker({ database: "my-app", sessionId: "support-42", registry: () => createRegistry({ ...agent }) });
 */
import * as Comlink from "comlink";
import { toWireError, type WireError } from "./error-wire.ts";
import type { BrowserSessionHostOptions } from "./host-options.ts";
import { installErrorTransfer, type SessionWorkerApi } from "./protocol.ts";
import { BrowserSessionHost } from "./session-host.ts";

export function exposeSessionWorker(
  options: BrowserSessionHostOptions,
  endpoint: Comlink.Endpoint = globalThis as unknown as Comlink.Endpoint,
): Promise<BrowserSessionHost> {
  installErrorTransfer();
  const starting = BrowserSessionHost.start(options);
  const subscriptions = new Map<number, () => void>();
  let nextId = 1;
  // Exposed at once (messages that arrive before a listener exists are lost); calls wait for the host.
  const api: SessionWorkerApi = {
    role: async () => ((await starting).isLeader ? "leader" : "follower"),
    submit: async (input) => (await starting).submit(input),
    wait: async (submissionId) => (await starting).wait(submissionId),
    submissionForRequest: async (requestId) => (await starting).session?.readSubmissionForRequest(requestId),
    view: async (options) => (await starting).session?.view(options),
    async subscribe(fromVersion, listener, onError?: (error: WireError) => void, withPreviews?: boolean) {
      const host = await starting;
      const id = nextId++;
      const remote = listener as typeof listener & { [Comlink.releaseProxy]?: () => void };
      // Changes and previews through one proxy (one port), so the page gets them in the order they happened.
      const stop = host.subscribe(
        fromVersion,
        (change) => void remote(change),
        // Sent in the error wire format: the page rebuilds the typed error (name, code, fields).
        onError && ((error) => void (onError as unknown as (wire: WireError) => void)(toWireError(error))),
        withPreviews ? (preview) => void remote({ preview }) : undefined,
      );
      subscriptions.set(id, () => {
        stop();
        remote[Comlink.releaseProxy]?.(); // free the page-side proxy: no leak per subscription
      });
      return id;
    },
    unsubscribe(id) {
      subscriptions.get(id)?.();
      subscriptions.delete(id);
    },
    cancelSubmission: async (submissionId, reason) => (await starting).cancelSubmission(submissionId, reason),
    async parkedWaits(options) {
      const session = (await starting).session;
      if (!session) return undefined;
      return { parked: session.parkedInStorage, ...(await session.readParkedWaits(options)) };
    },
    signal: async (key, payload, options) => (await starting).signal(key, payload, options),
    earlySignals: async () => (await starting).session?.earlySignals() ?? [],
    dropEarlySignal: async (key) => (await starting).dropEarlySignal(key),
    subscriptionCount: async () => subscriptions.size,
    async changes(afterVersion, limit) {
      const session = (await starting).session;
      return session ? (await session.readChanges(afterVersion, limit)).changes : [];
    },
    link: async () => (await starting).linkState(),
    handOff: async () => (await starting).handOff(),
    takeBack: async () => (await starting).takeBack(),
    async close() {
      for (const stop of subscriptions.values()) stop();
      subscriptions.clear();
      await (await starting).close();
    },
  };
  Comlink.expose(api, endpoint);
  return starting;
}
