/**
 * `devtools/…`: the bundled devtools page in real Chromium, attached to a local session of 20,000 settled
 * Submissions whose whole change log is retained (20,000 commits to fold) vs one of 100, same run:
 * - `devtools/first-paint-20000-vs-100`: from navigation to the page showing the session at its latest version;
 * - `devtools/history-20000-vs-100` (diagnostic): until the history before it is in and every version can be
 *   scrubbed to (it is read in the background);
 * - `devtools/action-20000-vs-100`: median latency of user actions until the page shows their result
 *   (switching views, Home/End on the version slider, a search in the work list).
 * Sizes are alternated three times; both sides pay the same Vite module serving and CDP round trips.
 */
import { join } from "node:path";
import type { Page } from "playwright-core";
import { serveWithVite, withChromiumProfile } from "../test/support/chromium.ts";
import { median } from "./workload.ts";

const BIG = 20_000;
const SMALL = 100;
const DATABASE = "devtools-bench";

async function timed(action: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await action();
  return performance.now() - start;
}

const versionIs = (page: Page, text: string) =>
  page.waitForFunction((t) => document.querySelector("[data-testid=version]")?.textContent === t, text, {
    timeout: 300_000,
  });

/** Opens the page on one session; returns its first-paint time and its actions' latencies. */
async function measure(page: Page, origin: string, session: string, size: number) {
  const start = performance.now();
  await page.goto(`${origin}/devtools/?local=${DATABASE}&session=${session}&tab=submissions`);
  await versionIs(page, `v${size} of ${size}`);
  const paint = performance.now() - start;
  // Then the history before it, read in the background: from here on every version can be scrubbed to.
  await page.waitForFunction(() => !document.querySelector("[data-testid=history-loading]"), undefined, {
    timeout: 300_000,
  });
  const history = performance.now() - start;
  const actions: number[] = [];
  const act = async (run: () => Promise<unknown>) => actions.push(await timed(run));
  for (let round = 0; round < 3; round++) {
    await act(async () => {
      await page.click("[data-testid=tab-tasks]");
      await page.waitForSelector("[data-testid=work-count]");
    });
    await act(async () => {
      await page.fill("[data-testid=work-search]", `r${size - 2}`);
      await page.waitForFunction(() =>
        document.querySelector("[data-testid=work-count]")?.textContent?.startsWith("1 of"),
      );
    });
    await page.fill("[data-testid=work-search]", "");
    await act(async () => {
      await page.focus("[data-testid=scrubber]");
      await page.keyboard.press("Home");
      await page.waitForFunction(() =>
        document.querySelector("[data-testid=version]")?.textContent?.startsWith("v0 "),
      );
    });
    await act(async () => {
      await page.keyboard.press("End");
      await versionIs(page, `v${size} of ${size}`);
    });
    await act(async () => {
      await page.click("[data-testid=tab-timeline]");
      await page.waitForSelector("[data-testid=timeline] > li");
    });
    await act(async () => {
      await page.click("[data-testid=tab-submissions]");
      await page.waitForSelector("[data-testid=submissions]");
    });
  }
  return { paint, history, action: median(actions) };
}

export async function devtoolsBench(): Promise<{
  paint: { ours: number; floor: number };
  history: { ours: number; floor: number };
  action: { ours: number; floor: number };
}> {
  const root = join(import.meta.dirname, "..");
  const server = await serveWithVite(join(root, "web"));
  try {
    return await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      page.setDefaultTimeout(300_000);
      await page.goto(`${server.url}/devtools/`);
      // The histories, written in this origin's IndexedDB with every commit kept in the change log.
      await page.evaluate(`(async () => {
        const { writeHistoryForTest } = await import("/@fs${root}/bench/long-life.ts");
        const { indexedDbStorage } = await import("/@fs${root}/src/index.ts");
        const store = indexedDbStorage("${DATABASE}", { durability: "relaxed", retainChanges: 1000000 });
        await writeHistoryForTest(store, "big", ${BIG});
        await writeHistoryForTest(store, "small", ${SMALL});
        await store.close();
      })()`);
      const big: { paint: number; history: number; action: number }[] = [];
      const small: { paint: number; history: number; action: number }[] = [];
      await measure(page, server.url, "small", SMALL); // warm-up: modules compiled, caches filled
      for (let r = 0; r < 3; r++) {
        big.push(await measure(page, server.url, "big", BIG));
        small.push(await measure(page, server.url, "small", SMALL));
      }
      return {
        paint: { ours: median(big.map((m) => m.paint)), floor: median(small.map((m) => m.paint)) },
        history: { ours: median(big.map((m) => m.history)), floor: median(small.map((m) => m.history)) },
        action: { ours: median(big.map((m) => m.action)), floor: median(small.map((m) => m.action)) },
      };
    });
  } finally {
    await server.close();
  }
}
