/**
 * Debian's Chromium for the browser tiers, e2e tests and benchmarks: one place for its path and flags,
 * a fresh on-disk profile per run (real IndexedDB that survives reloads), and Vite serving a folder.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";
import { createServer } from "vite";

/** Never a downloaded browser build. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Flags that work on this network-less machine (background networking would be refused). */
export const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/** Runs `run` in a Chromium with a fresh on-disk profile, removed afterwards. */
export async function withChromiumProfile<T>(
  run: (context: BrowserContext) => Promise<T>,
  extraArgs: readonly string[] = [],
): Promise<T> {
  const profile = mkdtempSync(join(tmpdir(), "chromium-profile-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: [...chromiumArgs, ...extraArgs],
  });
  try {
    return await run(context);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

/** Serves `root` with Vite on a loopback port (TypeScript and module workers compiled on request). */
export async function serveWithVite(root: string): Promise<{ url: string; close(): Promise<void> }> {
  // The served folder's own config (web/: the package name pointing at this checkout), if it has one.
  const config = join(root, "vite.config.ts");
  const server = await createServer({
    configFile: existsSync(config) ? config : false,
    root,
    server: { host: "127.0.0.1", port: 0 },
    logLevel: "silent",
  });
  await server.listen();
  const address = server.httpServer?.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}
