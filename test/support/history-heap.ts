/**
 * Opens a Durable Object session of n settled Submissions in a fresh workerd and measures the isolate's
 * heap with the session open (for `edge/heap-100000` and its test). The history is built in one runtime and
 * opened in a new one, so the open is cold and nothing the build allocated is still around.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleWorker, isolateHeapBytes, startWorkerd } from "./workerd.ts";

let script: Promise<string> | undefined;
let ports = 9400;

export async function historyHeap(submissions: number, options: { heap?: boolean } = {}) {
  const measureHeap = options.heap ?? true;
  script ??= bundleWorker(fileURLToPath(new URL("../../bench/edge/history-worker.ts", import.meta.url)));
  const persist = mkdtempSync(join(tmpdir(), "history-heap-"));
  const port = ports++;
  try {
    const builder = startWorkerd(await script, { HISTORY: "HistoryHost" }, persist);
    const built = await builder.dispatchFetch(`http://history/build?n=${submissions}`);
    if (!built.ok) throw new Error(`build: HTTP ${built.status} ${await built.text()}`);
    await builder.dispose();
    // The first runtime to open a database another one has just written pays for SQLite's own recovery of
    // it (about 130 ms for 50,000 Submissions here, whatever is read): a throwaway runtime pays it.
    const settle = startWorkerd(await script, { HISTORY: "HistoryHost" }, persist);
    await (await settle.dispatchFetch("http://history/touch")).text();
    await (await settle.dispatchFetch("http://history/open?mode=read")).text();
    await (await settle.dispatchFetch("http://history/open?mode=read")).text();
    await settle.dispose();
    // With an inspector attached V8 runs slower: open times are taken in a runtime without one.
    const runtime = startWorkerd(
      await script,
      { HISTORY: "HistoryHost" },
      persist,
      {},
      measureHeap ? port : undefined,
    );
    const heapOf = () => (measureHeap ? isolateHeapBytes(port) : Promise.resolve(0));
    try {
      await runtime.ready;
      const empty = await heapOf(); // the isolate with the kernel loaded, no session yet
      // The database file is opened and read once first: what is timed below is the session's own open.
      await (await runtime.dispatchFetch("http://history/touch")).text();
      const baseline = await heapOf();
      const start = performance.now();
      const response = await runtime.dispatchFetch("http://history/open");
      const openMs = performance.now() - start; // workerd's own clock stands still between I/O: timed from here
      const opened = (await response.json()) as { version: number };
      const heap = await heapOf();
      const view = (await (await runtime.dispatchFetch("http://history/view")).json()) as {
        submissions: number;
        tasks: number;
        entries: number;
      };
      return { heap, baseline: Math.max(empty, baseline), openMs, version: opened.version, view };
    } finally {
      await runtime.dispose();
    }
  } finally {
    rmSync(persist, { recursive: true, force: true });
  }
}
