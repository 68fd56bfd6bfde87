/** Benchmarks that run in real Chromium with an on-disk profile (real IndexedDB), driven by playwright-core. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { createServer } from "vite";

export type ChromiumEntry = "runCommitBench" | "runChainBench" | "runAgentBench" | "runWorkerCommitBench";

/** Runs `window[entry]()` of bench/browser/index.html in Chromium and returns its result. */
export async function runInChromium(
  executablePath: string,
  entry: ChromiumEntry,
): Promise<{ ours: number; floor: number }> {
  const server = await createServer({
    configFile: false,
    root: join(import.meta.dirname, "browser"),
    server: { host: "127.0.0.1", port: 0 },
    logLevel: "silent",
  });
  await server.listen();
  const address = server.httpServer?.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const profile = mkdtempSync(join(tmpdir(), "bench-profile-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  try {
    const page = await context.newPage();
    await page.goto(`http://127.0.0.1:${port}/index.html`);
    await page.waitForFunction((name) => name in window, entry, { timeout: 60_000 });
    return await page.evaluate(
      (name) =>
        (window as unknown as Record<string, () => Promise<{ ours: number; floor: number }>>)[name]?.() ??
        Promise.reject(new Error(`no ${name}`)),
      entry,
    );
  } finally {
    await context.close();
    await server.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
