/** The storage contract suite against the Durable Object SQLite store, running inside real workerd. */
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { RemoteStorage } from "../support/remote-storage.ts";
import { describeStorageContract } from "../support/storage-contract.ts";
import { bundleWorker, startWorkerd } from "../support/workerd.ts";

const script = await bundleWorker(fileURLToPath(new URL("./fixtures/storage-host.ts", import.meta.url)));
const workerd = startWorkerd(script, { HOST: "StorageHost" });
afterAll(() => workerd.dispose());

const post = async (body: unknown) => {
  const response = await workerd.dispatchFetch("http://storage-host/", {
    method: "POST",
    body: JSON.stringify(body),
  });
  return (await response.json()) as { ok: boolean; result?: unknown; error?: never };
};

describeStorageContract("Durable Object SQLite (workerd)", {
  storage: (options) => new RemoteStorage(post, options ?? {}),
  corrupt: async (sessionId, table, key, value) => {
    await new RemoteStorage(post).unsafeWriteRaw(sessionId, table, key, value);
  },
});
