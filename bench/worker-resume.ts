/**
 * worker/resume-10000-vs-100 (Chromium, on-disk profile): the time from a page load to the first resumed
 * phase — the page starts its session worker, which takes the lead, opens the session from IndexedDB and
 * resumes the interrupted probe task — for a session with 10,000 committed steps vs one with 100. Loads of
 * the two sessions alternate, so machine noise hits both; each is the median of 15 after 3 warm-ups.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build, preview } from "vite";
import { withChromiumProfile } from "../test/support/chromium.ts";
import { median } from "./workload.ts";

/** Serves a production build of the page (bundled, as an app ships it), not the module-by-module dev server. */
async function serveBuiltPage(): Promise<{ url: string; close(): Promise<void> }> {
  const outDir = mkdtempSync(join(tmpdir(), "resume-bench-"));
  const root = join(import.meta.dirname, "browser");
  await build({
    configFile: false,
    root,
    logLevel: "silent",
    build: { outDir, emptyOutDir: true, rollupOptions: { input: join(root, "resume.html") } },
    worker: { format: "es" },
  });
  const server = await preview({
    configFile: false,
    root,
    logLevel: "silent",
    build: { outDir },
    preview: { host: "127.0.0.1", port: 0 },
  });
  const address = server.httpServer.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await server.close();
      rmSync(outDir, { recursive: true, force: true });
    },
  };
}

export async function resumeBench(): Promise<{ ours: number; floor: number }> {
  const server = await serveBuiltPage();
  try {
    return await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      const sizes = [10_000, 100];
      for (const size of sizes) {
        await page.goto(`${server.url}/resume.html?setup=${size}&db=resume-${size}`);
        await page.waitForFunction(() => (window as { setupDone?: boolean }).setupDone === true, undefined, {
          timeout: 300_000,
          polling: 100,
        });
      }
      const times = new Map<number, number[]>(sizes.map((size) => [size, []]));
      for (let rep = 0; rep < 18; rep++) {
        for (const size of sizes) {
          await page.goto(`${server.url}/resume.html?db=resume-${size}`);
          const handle = await page.waitForFunction(
            () => (window as { resumeMs?: number }).resumeMs,
            undefined,
            {
              timeout: 60_000,
              polling: 10,
            },
          );
          if (rep >= 3) times.get(size)?.push((await handle.jsonValue()) as number);
        }
      }
      await page.close();
      return { ours: median(times.get(10_000) ?? []), floor: median(times.get(100) ?? []) };
    });
  } finally {
    await server.close();
  }
}
