/**
 * The memory store and IndexedDB (fake-indexeddb) against a model of what was committed
 * (`test/support/storage-model.ts`).
 */
import "fake-indexeddb/auto";
import { describe, it } from "vitest";
import { indexedDbStorage, memoryStorage } from "../../src/index.ts";
import { runStoreModel } from "../support/storage-model.ts";

describe("stores against a model of what was committed", () => {
  for (const seed of [1, 2, 3, 4]) {
    it(`memory store, seed ${seed}`, async () => {
      const disk = memoryStorage();
      await runStoreModel(seed, (options) => disk.reopen(options));
    }, 120_000);
    it(`fake-indexeddb, seed ${seed}`, async () => {
      await runStoreModel(seed, (options) => indexedDbStorage(`model-${seed}`, options));
    }, 120_000);
  }
});
