import { type MemoryStorage, memoryStorage } from "../../src/index.ts";
import { describeStorageContract } from "../support/storage-contract.ts";

const disk: MemoryStorage = memoryStorage();

describeStorageContract("in-memory", {
  storage: (options) => disk.reopen(options ?? {}),
  corrupt: async (sessionId, table, key, value) => disk.unsafeWriteRaw(sessionId, table, key, value),
});
