/** Benchmarks that run in real Chromium with an on-disk profile (real IndexedDB), driven by playwright-core. */
import { join } from "node:path";
import { serveWithVite, withChromiumProfile } from "../test/support/chromium.ts";

export type ChromiumEntry =
  | "runCommitBench"
  | "runChainBench"
  | "runAgentBench"
  | "runWorkerCommitBench"
  | "runSignalBench"
  | "runWaitingBench"
  | "runToolCallBench"
  | "runLongLifeBench"
  | "runTurnBench";

/** Runs `window[entry]()` of bench/browser/index.html in Chromium and returns its result. */
export async function runInChromium(
  entry: ChromiumEntry,
  args: readonly string[] = [],
): Promise<{ ours: number; floor: number; hop?: number }> {
  const server = await serveWithVite(join(import.meta.dirname, "browser"));
  try {
    return await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(`${server.url}/index.html`);
      await page.waitForFunction((name) => name in window, entry, { timeout: 60_000 });
      page.setDefaultTimeout(0);
      return page.evaluate(
        (name) =>
          (window as unknown as Record<string, () => Promise<{ ours: number; floor: number; hop?: number }>>)[
            name
          ]?.() ?? Promise.reject(new Error(`no ${name}`)),
        entry,
      );
    }, args);
  } finally {
    await server.close();
  }
}
