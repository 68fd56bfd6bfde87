/** commit/chromium-indexeddb: the commit workload in real Chromium with an on-disk profile. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { createServer } from "vite";

export async function chromiumCommitBench(executablePath: string): Promise<{ ours: number; floor: number }> {
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
    await page.waitForFunction(() => "runCommitBench" in window, undefined, { timeout: 60_000 });
    return await page.evaluate(() =>
      (window as unknown as { runCommitBench(): Promise<{ ours: number; floor: number }> }).runCommitBench(),
    );
  } finally {
    await context.close();
    await server.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
