/**
 * The demo page in real Chromium with on-disk profiles (one fresh profile per test): reload while tools run
 * and the parent task waits on them, reload while the model streams, and two tabs sharing one session.
 * Screenshots are kept in test-artifacts/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveWithVite, withChromiumProfile as withBrowser } from "../support/chromium.ts";

const artifacts = join(process.cwd(), "test-artifacts");
let server: Awaited<ReturnType<typeof serveWithVite>> | undefined;
let url = "";

beforeAll(async () => {
  server = await serveWithVite(join(process.cwd(), "web"));
  url = `${server.url}/`;
  mkdirSync(artifacts, { recursive: true });
}, 60_000);

afterAll(async () => {
  await server?.close();
});

const statusIs = (page: Page, wanted: string, timeout = 30_000) =>
  page.waitForFunction((s) => document.querySelector("#status")?.getAttribute("data-status") === s, wanted, {
    timeout,
  });
const logHas = (page: Page, text: string, timeout = 30_000) =>
  page.waitForFunction(
    (t) => [...document.querySelectorAll("#log li")].some((li) => li.textContent?.includes(t)),
    text,
    {
      timeout,
    },
  );
const isLeader = (page: Page) =>
  page.waitForFunction(() => document.querySelector("#status")?.textContent?.includes("leader"), undefined, {
    timeout: 30_000,
  });

async function deliveries(page: Page): Promise<string[]> {
  return page.evaluate(async () => {
    // Opening a database that does not exist would create it empty, and break the provider's own upgrade.
    if (!(await indexedDB.databases()).some((d) => d.name === "durable-agent-demo-mail")) return [];
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
}

const FIVE = ["ana@example.com", "bo@example.com", "cy@example.com", "di@example.com", "ed@example.com"];

describe("demo page in Chromium", () => {
  it("finishes the five-email run across a reload while tools run and their parent waits, each mail once", async () => {
    await withBrowser(async (context) => {
      const page = await context.newPage();
      // Each send takes 3 s: the reload below lands mid-send on a loaded machine too.
      await page.goto(`${url}?approval=auto&mailDelay=3000`);
      await isLeader(page);
      await page.click("#start");
      await logHas(page, "Sending the approved notice."); // the model asked for the campaign
      await page.waitForTimeout(300); // the campaign now waits on five send_email tasks
      await page.screenshot({ path: join(artifacts, "demo-before-reload.png"), fullPage: true });
      // Really mid-run: no mail result is committed yet.
      expect(
        await page.$$eval(
          "#log li",
          (items) => items.filter((li) => li.textContent?.includes("send_email →")).length,
        ),
      ).toBe(0);
      await page.reload(); // the worker dies with the page, mid-send
      await statusIs(page, "succeeded");
      await page.screenshot({ path: join(artifacts, "demo-after-reload.png"), fullPage: true });
      expect([...(await deliveries(page))].sort()).toEqual(FIVE);
      expect(await page.textContent("#status")).toContain("Done: 5 of 5 notices delivered.");
    });
  }, 90_000);

  it("keeps text streamed before a reload as an interrupted record, then completes the answer", async () => {
    await withBrowser(async (context) => {
      const page = await context.newPage();
      await page.goto(`${url}?scenario=stream`);
      await isLeader(page);
      await page.click("#start");
      await page.waitForTimeout(900); // several chunks streamed (previews), the first one checkpointed
      await page.reload();
      await statusIs(page, "succeeded");
      await page.screenshot({ path: join(artifacts, "demo-stream-after-reload.png"), fullPage: true });
      const kinds = await page.$$eval("#log li", (items) =>
        items.map((li) => (li as HTMLElement).dataset.kind),
      );
      // The reloaded tab took over (epoch 2): what came before is reused, the cut-off text kept as a record.
      expect(kinds).toEqual(["user", "takeover", "interrupted", "model"]);
      expect(await page.textContent("#log li[data-kind=interrupted] .tag")).toBe("interrupted");
      // What it keeps is what storage held: a checkpointed start of the answer the retried attempt gave.
      const partial = await page.$eval("#log li[data-kind=interrupted]", (li) =>
        /“([^”]*)”|"([^"]*)"/
          .exec(li.textContent ?? "")
          ?.slice(1)
          .find((t) => t !== undefined),
      );
      const answer = (await page.textContent("#log li[data-kind=model]")) ?? "";
      expect(partial).toMatch(/^Here is a/);
      expect(answer).toContain(partial ?? "(none)");
    });
  }, 90_000);

  it("two tabs: one leads, the other follows and submits; when the leader closes, the follower finishes", async () => {
    await withBrowser(async (context) => {
      const leader = await context.newPage();
      await leader.goto(`${url}?approval=auto`);
      await isLeader(leader);
      const follower = await context.newPage();
      await follower.goto(`${url}?approval=auto`);
      await follower.waitForFunction(
        () => document.querySelector("#status")?.textContent?.includes("follower"),
        undefined,
        {
          timeout: 30_000,
        },
      );
      await follower.click("#start"); // through the durable inbox; the leader accepts it
      await logHas(follower, "send_approved_notice");
      await logHas(leader, "send_approved_notice");
      const started = Date.now();
      await leader.close(); // the leader tab goes away mid-run
      await statusIs(follower, "succeeded");
      expect(Date.now() - started).toBeLessThan(20_000);
      await follower.screenshot({ path: join(artifacts, "demo-two-tabs-follower.png"), fullPage: true });
      expect([...(await deliveries(follower))].sort()).toEqual(FIVE);
      // The follower's live view went through its own role change without repeating or skipping a change.
      const versions = await follower.$$eval("#log li .kind", (items) =>
        items.map((i) => Number(i.textContent?.match(/v(\d+)/)?.[1])),
      );
      expect(versions).toEqual([...versions].sort((a, b) => a - b));
      const lines = await follower.$$eval("#log li", (items) => items.map((li) => li.textContent ?? ""));
      expect(new Set(lines).size).toBe(lines.length);
      const sends = await follower.$$eval(
        "#log li",
        (items) => items.filter((li) => li.textContent?.includes("send_email →")).length,
      );
      expect(sends).toBe(5);
    });
  }, 90_000);

  it("waits for a person across a reload; approved in a follower tab, the leader sends each mail once", async () => {
    await withBrowser(async (context) => {
      const leader = await context.newPage();
      await leader.goto(url);
      await isLeader(leader);
      await leader.click("#start");
      await leader.waitForSelector(".approval[data-key='plan-approval:plan'] button.approve", {
        timeout: 30_000,
      });
      expect(await leader.textContent(".approval")).toContain("ana@example.com");
      await leader.reload(); // the tab dies while the campaign waits: the wait is stored, not in memory
      await leader.waitForSelector(".approval[data-key='plan-approval:plan'] button.approve", {
        timeout: 30_000,
      });
      await leader.screenshot({ path: join(artifacts, "demo-waiting-for-approval.png"), fullPage: true });
      expect(await deliveries(leader)).toEqual([]);
      // Nothing was in flight (the campaign waited for a person): no takeover is told.
      expect(await leader.$$("#log li[data-kind=takeover]")).toHaveLength(0);
      expect(await leader.getAttribute("#status", "data-status")).toBe("running");
      await leader.waitForSelector("#role[data-role=leader]", { timeout: 30_000 });
      const follower = await context.newPage();
      await follower.goto(url);
      await follower.waitForSelector("#role[data-role=follower]", { timeout: 30_000 });
      await follower.waitForSelector(".approval button.approve", { timeout: 30_000 });
      await follower.click(".approval button.approve"); // through the durable inbox to the leader
      await statusIs(leader, "succeeded");
      await statusIs(follower, "succeeded");
      expect(await leader.$(".approval")).toBeNull();
      expect([...(await deliveries(leader))].sort()).toEqual(FIVE);
      // The reload interrupted nothing (the campaign waited for a person): no takeover was told, before the
      // approval or after it.
      expect(await leader.$$("#log li[data-kind=takeover]")).toHaveLength(0);
      await leader.screenshot({ path: join(artifacts, "demo-approved-from-follower.png"), fullPage: true });
    });
  }, 90_000);

  it("after a reload at any moment of the sends, shows what was reused, what recovery settled and how; reset starts over", async () => {
    await withBrowser(async (context) => {
      const page = await context.newPage();
      page.on("dialog", (dialog) => void dialog.accept());
      // The five mails go out at once and take 2 s each: reloads 0.2, 0.9 and 1.6 s into the sends.
      for (const [i, offset] of [200, 900, 1600].entries()) {
        await page.goto(`${url}?approval=auto&mailDelay=2000`);
        await isLeader(page);
        await page.click("#start");
        await logHas(page, "Sending the approved notice.");
        await page.waitForTimeout(offset);
        await page.reload(); // the worker dies with the page, wherever the sends are
        await statusIs(page, "succeeded", 60_000);
        const log = await page.$$eval("#log li", (items) =>
          items.map((li) => ({
            kind: (li as HTMLElement).dataset.kind ?? "",
            text: li.textContent ?? "",
            tag: li.querySelector(".tag")?.textContent ?? "",
          })),
        );
        await page.screenshot({ path: join(artifacts, `demo-reload-at-${offset}ms.png`), fullPage: true });
        const takeover = log.findLastIndex((line) => line.kind === "takeover");
        expect(takeover, `reload ${i}: the takeover is marked`).toBeGreaterThan(0);
        const sends = log.flatMap((line, at) =>
          line.text.includes("send_email →") ? [{ ...line, at }] : [],
        );
        expect(sends).toHaveLength(5);
        // Above the takeover: results committed before the reload, reused as they were. Below: each one
        // recovery settled says how (confirmed, or sent once after confirm found nothing); none is an error.
        for (const send of sends) {
          if (send.at < takeover) expect(send.tag).toBe("ok");
          else expect(send.tag).toMatch(/^(ok|recovered: .*operation id.*)$/);
        }
        expect(sends.some((send) => send.tag.startsWith("recovered"))).toBe(true);
        expect([...(await deliveries(page))].sort()).toEqual(FIVE);
        // A second click is a new run (its own requestId), not the first one returned again.
        if (i === 0) {
          const users = log.filter((line) => line.kind === "user").length;
          await page.click("#start");
          await page.waitForFunction(
            (n) => document.querySelectorAll("#log li[data-kind=user]").length > n,
            users,
            { timeout: 30_000 },
          );
          await statusIs(page, "succeeded", 60_000);
          // It did what was asked again, and says so: a run of its own, each mail under its own operation id.
          expect(await page.textContent("#status")).toContain("Done: 5 of 5 notices delivered.");
          expect([...(await deliveries(page))].sort()).toEqual([...FIVE, ...FIVE].sort());
        }
        // Reset deletes the session and the mail log; the next round starts from nothing.
        await page.click("#reset");
        await page.waitForFunction(() => document.querySelectorAll("#log li").length === 0, undefined, {
          timeout: 30_000,
        });
        await isLeader(page);
        expect(await deliveries(page)).toEqual([]);
      }
    });
  }, 240_000);

  it("shows a rejection and failed sends as they are, never as ok; asked again, it asks again", async () => {
    await withBrowser(async (context) => {
      const page = await context.newPage();
      await page.goto(url);
      await isLeader(page);
      await page.click("#start");
      await page.click(".approval[data-key='plan-approval:plan'] button.reject", { timeout: 30_000 });
      await statusIs(page, "succeeded");
      expect(await page.textContent("#status")).toContain(
        "Not sent: the plan was rejected (rejected on the demo page).",
      );
      const tagOf = (text: string) =>
        page.$$eval(
          "#log li",
          (items, t) =>
            items
              .filter((li) => li.textContent?.includes(t))
              .map((li) => ({
                tag: li.querySelector(".tag")?.textContent,
                css: li.querySelector(".tag")?.className,
              })),
          text,
        );
      expect(await tagOf("send_approved_notice")).toEqual([
        { tag: "rejected: nothing sent", css: "tag declined" },
      ]);
      await failMail(page); // the mail provider fails from now on
      // Asked again: a new ask on a key of its own, approved this time; every send fails.
      await page.click("#start");
      await page.click(".approval[data-key='plan-approval:plan:1'] button.approve", { timeout: 30_000 });
      await page.waitForFunction(
        () =>
          document.querySelectorAll("#log li[data-kind=user]").length === 2 &&
          document.querySelector("#status")?.textContent?.includes("5 failed"),
        undefined,
        { timeout: 60_000 },
      );
      await page.screenshot({ path: join(artifacts, "demo-rejected-then-failing.png"), fullPage: true });
      // Five failed sends are five problems (the campaign's "0 of 5 delivered" sums them up, not a sixth).
      expect(await page.textContent("#status")).toBe(
        "submission succeeded with 5 problems: Done: 0 of 5 notices delivered; 5 failed.",
      );
      const sends = await page.$$eval("#log li", (items) =>
        items
          .filter((li) => li.textContent?.includes("send_email"))
          .map((li) => ({
            text: li.querySelector(".text")?.textContent,
            tag: li.querySelector(".tag")?.textContent,
          })),
      );
      expect(sends.map((send) => send.text)).toEqual(FIVE.map((to) => `send_email → ${to}`));
      for (const send of sends) expect(send.tag).toMatch(/^failed: .+/);
      const notices = await tagOf("send_approved_notice");
      expect(notices.at(-1)).toEqual({ tag: "0 of 5 delivered", css: "tag error" });
    });
  }, 120_000);

  it("counts a run's problems on that run, also while another run of the same conversation waits", async () => {
    await withBrowser(async (context) => {
      const page = await context.newPage();
      await page.goto(url);
      await isLeader(page);
      await page.click("#start");
      await page.waitForSelector(".approval[data-key='plan-approval:plan'] button.approve", {
        timeout: 30_000,
      });
      await failMail(page);
      await page.reload();
      await page.click("#start"); // taken once the page is ready: a second run, while the first waits
      await page.waitForFunction(
        () => document.querySelectorAll("#log li[data-kind=user]").length === 2,
        undefined,
        {
          timeout: 30_000,
        },
      );
      // Status lines as they are written, in order.
      await page.evaluate(() => {
        const seen: string[] = [];
        (window as unknown as { seen: string[] }).seen = seen;
        const status = document.querySelector("#status") as HTMLElement;
        new MutationObserver(() => seen.push(status.textContent ?? "")).observe(status, {
          childList: true,
          characterData: true,
          subtree: true,
        });
      });
      await page.click(".approval[data-key='plan-approval:plan'] button.approve", { timeout: 30_000 });
      await page.waitForFunction(
        () => (window as unknown as { seen: string[] }).seen.some((line) => line.includes("5 failed")),
        undefined,
        { timeout: 60_000 },
      );
      const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
      // The first run's five mails failed: its own status says so, counted on it.
      expect(seen.find((line) => line.includes("5 failed"))).toBe(
        "submission succeeded with 5 problems: Done: 0 of 5 notices delivered; 5 failed.",
      );
    });
  }, 120_000);
});

/** Makes the demo's mail provider fail from now on: its database at a version the provider cannot open. */
function failMail(page: Page): Promise<void> {
  return page.evaluate(
    () =>
      new Promise<void>((resolve, reject) => {
        const request = indexedDB.open("durable-agent-demo-mail", 2);
        request.onsuccess = () => {
          request.result.close();
          resolve();
        };
        request.onerror = () => reject(request.error);
      }),
  );
}
