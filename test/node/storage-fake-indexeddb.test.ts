import "fake-indexeddb/auto";
import { indexedDbStorage } from "../../src/index.ts";
import { writeRawIndexedDbRow } from "../support/raw-indexeddb.ts";
import { describeStorageContract } from "../support/storage-contract.ts";

describeStorageContract("IndexedDB (fake-indexeddb)", {
  storage: (options) => indexedDbStorage("contract", options),
  corrupt: (sessionId, table, key, value) => writeRawIndexedDbRow("contract", sessionId, table, key, value),
});
