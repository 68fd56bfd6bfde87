/** The Durable Object SQLite store, inside workerd, against a model of what was committed. */
import { fileURLToPath } from "node:url";
import { afterAll, describe, it } from "vitest";
import { RemoteStorage } from "../support/remote-storage.ts";
import { runStoreModel } from "../support/storage-model.ts";
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

describe("Durable Object SQLite against a model of what was committed", () => {
  for (const seed of [1, 2]) {
    it(`seed ${seed}`, async () => {
      await runStoreModel(seed, (options) => new RemoteStorage(post, options), 400);
    }, 300_000);
  }
});
