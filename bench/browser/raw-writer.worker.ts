/**
 * The hop floor of worker/commit: the raw writer inside a plain worker, one message per transaction, so
 * the page pays exactly the thread hops the session worker adds and nothing of the kernel.
 */
import { indexedDbStorage } from "../../src/index.ts";
import type { CommitRecord } from "../../src/records/schemas.ts";
import { openRawWriter } from "../workload.ts";

let writer: Awaited<ReturnType<typeof openRawWriter>> | undefined;

self.onmessage = async (event: MessageEvent<{ database: string } | { commit: CommitRecord }>) => {
  if ("database" in event.data) {
    const setup = indexedDbStorage(event.data.database);
    await setup.open("raw", { mode: "write", at: 0, entryTail: 1, settled: 0 });
    await setup.close();
    writer = await openRawWriter(event.data.database, "strict");
  } else {
    await writer?.write([event.data.commit]);
  }
  self.postMessage("done");
};
