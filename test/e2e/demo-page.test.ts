/**
 * The demo page in real Chromium with an on-disk profile: start the five-email run, reload the tab while
 * the mails are being sent, and check the run completes with exactly five deliveries. Screenshots are kept
 * in test-artifacts/.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";
import { createServer, type ViteDevServer } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const artifacts = join(process.cwd(), "test-artifacts");
let server: ViteDevServer;
let context: BrowserContext;
let url = "";
let profile = "";

beforeAll(async () => {
  server = await createServer({
    configFile: false,
    root: join(process.cwd(), "web"),
    server: { host: "127.0.0.1", port: 0 },
    logLevel: "silent",
  });
  await server.listen();
  const address = server.httpServer?.address();
  url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/`;
  profile = mkdtempSync(join(tmpdir(), "demo-profile-"));
  context = await chromium.launchPersistentContext(profile, {
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
  mkdirSync(artifacts, { recursive: true });
}, 60_000);

afterAll(async () => {
  await context?.close();
  await server?.close();
  rmSync(profile, { recursive: true, force: true });
});

describe("demo page", () => {
  it("finishes the five-email run across a reload in the middle of the sends, delivering each mail once", async () => {
    const page = await context.newPage();
    await page.goto(url);
    await page.waitForFunction(
      () => document.querySelector("#status")?.textContent?.includes("leader"),
      undefined,
      { timeout: 30_000 },
    );
    await page.click("#start");
    // The campaign has started its five send_email calls (each takes ~0.7 s at the mail service).
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll("#log li")].some((li) =>
          li.textContent?.includes("send_approved_notice"),
        ),
      undefined,
      { timeout: 30_000 },
    );
    await page.waitForTimeout(250);
    await page.screenshot({ path: join(artifacts, "demo-before-reload.png"), fullPage: true });
    await page.reload(); // the worker dies with the page, mid-send
    await page.waitForFunction(
      () => document.querySelector("#status")?.getAttribute("data-status") === "succeeded",
      undefined,
      {
        timeout: 30_000,
      },
    );
    await page.screenshot({ path: join(artifacts, "demo-after-reload.png"), fullPage: true });
    const deliveries = await page.evaluate(async () => {
      const request = indexedDB.open("durable-agent-demo-mail");
      const db = await new Promise<IDBDatabase>((resolve, reject) => {
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
      const all = await new Promise<{ to: string }[]>((resolve) => {
        const read = db.transaction("deliveries").objectStore("deliveries").getAll();
        read.onsuccess = () => resolve(read.result as { to: string }[]);
      });
      db.close();
      return all.map((d) => d.to);
    });
    expect([...deliveries].sort()).toEqual([
      "ana@example.com",
      "bo@example.com",
      "cy@example.com",
      "di@example.com",
      "ed@example.com",
    ]);
    const status = await page.textContent("#status");
    expect(status).toContain("Done: 5 of 5 notices delivered.");
    await page.close();
  }, 90_000);
});
