/**
 * One session, two real hosts (issue 21): the linked-session page in real Chromium (the kernel in a Web
 * Worker over on-disk IndexedDB) and the shipped edge example on workerd. The tab starts the five-email
 * run and is closed mid-send; the edge takes over on its own alarm once the tab's lease has run out and
 * finishes it, each mail once. The tab is opened again: it catches up from the edge, shows the edge's
 * result and leads again.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RECIPIENTS } from "../../examples/five-emails/app.ts";
import { serveWithVite, withChromiumProfile } from "../support/chromium.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const artifacts = join(process.cwd(), "test-artifacts");
const LEASE_MS = 1_500;
let server: Awaited<ReturnType<typeof serveWithVite>> | undefined;
let edge: EdgeExample | undefined;

beforeAll(async () => {
  server = await serveWithVite(join(process.cwd(), "web"));
  const script = await bundleWorker(
    fileURLToPath(new URL("../edge/fixtures/edge-example.ts", import.meta.url)),
  );
  edge = await EdgeExample.start(script, {
    corsOrigins: server.url,
    mailDelayMs: 250,
    // The change log keeps 100 commits: a session past them reaches a new tab as a snapshot.
    vars: { LEASE_MS: String(LEASE_MS), RETAIN_CHANGES: "100", RATE_LIMIT_PER_MINUTE: "100000" },
  });
  mkdirSync(artifacts, { recursive: true });
}, 60_000);

afterAll(async () => {
  await edge?.dispose();
  await server?.close();
});

const statusIs = (page: Page, wanted: string) =>
  page.waitForFunction((s) => document.querySelector("#status")?.getAttribute("data-status") === s, wanted, {
    timeout: 30_000,
  });

async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("a linked session: Chromium tab + workerd edge", () => {
  it("the edge finishes a run whose tab closed mid-send; the reopened tab shows it and leads again", async () => {
    const api = edge as EdgeExample;
    const session = "linked-e2e";
    const url = `${server?.url}/linked/?edge=${encodeURIComponent(api.url)}&token=${EdgeExample.token}&session=${session}&holder=browser-1`;
    const ownership = async () =>
      (await api.json<{ ownership: { holder: string } | null }>(`/sessions/${session}/replica`)).ownership;
    const before = (await api.deliveries()).length;
    await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(url);
      await statusIs(page, "leading");
      expect((await ownership())?.holder).toBe("tab");
      // The devtools attached to the edge session say who writes it: the linked tab, while its lease lasts.
      const devtools = await context.newPage();
      await devtools.goto(`${server?.url}/devtools/?${new URLSearchParams({ edge: api.url, session })}`);
      await devtools.fill("form.attach input[name=token]", EdgeExample.token);
      await devtools.click("form.attach button[type=submit]");
      await devtools.waitForSelector("[data-testid=writer][data-state=tab]", { timeout: 30_000 });
      expect(await devtools.textContent("[data-testid=writer]")).toContain("a linked tab leads this session");
      await page.click("#start");
      // Mid-send: the first mail is out, the run is not over.
      await until(
        () => api.deliveries(),
        (d) => d.length > before,
        "the first mail",
      );
      expect((await api.deliveries()).length - before).toBeLessThan(5);
      await page.close(); // the tab is gone: no hand-off, its lease simply stops being renewed

      // The edge takes over on its alarm (no request touches the session meanwhile) and finishes.
      await until(ownership, (o) => o?.holder === "edge", "the edge to take over");
      await devtools.waitForSelector("[data-testid=writer][data-state=edge]", { timeout: 30_000 });
      await devtools.close();
      const view = await until(
        () =>
          api.json<{ submissions: { status: string; result?: { text?: string } }[] }>(
            `/sessions/${session}/view`,
          ),
        (v) => v.submissions.some((s) => s.status === "succeeded"),
        "the run to end at the edge",
      );
      expect(view.submissions[0]?.result?.text).toBe("Done: 5 of 5 notices delivered.");
      const mails = (await api.deliveries()).slice(before).map((d) => d.to);
      expect([...mails].sort()).toEqual([...RECIPIENTS].sort());

      // The tab comes back: it claims the session, catches up and shows what the edge did.
      const back = await context.newPage();
      await back.goto(url);
      await statusIs(back, "leading");
      await back.waitForFunction(
        () => document.querySelector("#result")?.getAttribute("data-status") === "succeeded",
        undefined,
        {
          timeout: 30_000,
        },
      );
      expect(await back.textContent("#result")).toContain("Done: 5 of 5 notices delivered.");
      expect((await ownership())?.holder).toBe("tab");
      await back.screenshot({ path: join(artifacts, "linked-session-back.png"), fullPage: true });
      // Handing off from the page moves ownership to the edge at once.
      await back.click("#handoff");
      await statusIs(back, "released");
      expect((await ownership())?.holder).toBe("edge");
    });
    // No mail was sent twice, across both hosts and the reopened tab.
    expect((await api.deliveries()).length - before).toBe(5);
  });

  it("a new browser on a session its edge has long run starts from the edge's snapshot, leads it and hands it back", async () => {
    const api = edge as EdgeExample;
    const session = "linked-long";
    const ended = await api.request(`/sessions/${session}/submissions?wait=20000`, {
      body: { requestId: "campaign", conversationId: "main", input: "Send the approved notice" },
    });
    expect(ended.status).toBe(200);
    // The session lives on at the edge (decisions kept for plans nobody asked about yet), far past its log.
    const decide = (n: number) =>
      api.json(`/sessions/${session}/signals/plan-approval:later-${n}`, {
        body: { requestId: `decision-${n}`, payload: { approved: true } },
      });
    for (let n = 0; n < 300; n++) await decide(n);
    const log = await api.json<{ oldestRetained: number }>(
      `/sessions/${session}/replica/changes?after=0&limit=1`,
    );
    expect(log.oldestRetained).toBeGreaterThan(1);
    const ownership = async () =>
      (await api.json<{ ownership: { holder: string } | null }>(`/sessions/${session}/replica`)).ownership;
    const url = `${server?.url}/linked/?edge=${encodeURIComponent(api.url)}&token=${EdgeExample.token}&session=${session}&holder=browser-3`;
    const before = (await api.deliveries()).length;
    await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(url);
      // It claims the session: its empty copy is made from the edge's snapshot, then it leads.
      await statusIs(page, "leading");
      expect((await ownership())?.holder).toBe("tab");
      await page.waitForFunction(
        () => document.querySelector("#result")?.getAttribute("data-status") === "succeeded",
        undefined,
        { timeout: 30_000 },
      );
      expect(await page.textContent("#result")).toContain("Done: 5 of 5 notices delivered.");
      await page.screenshot({ path: join(artifacts, "linked-session-snapshot.png"), fullPage: true });
      // And hands it back: the edge leads again, from the version the tab holds.
      await page.click("#handoff");
      await statusIs(page, "released");
      expect((await ownership())?.holder).toBe("edge");
      await decide(300);
    });
    expect((await api.deliveries()).length).toBe(before);
  });

  it("a new browser asked to follow a long-run session follows it from the edge's snapshot, then live", async () => {
    const api = edge as EdgeExample;
    const session = "linked-long-follow";
    const ended = await api.request(`/sessions/${session}/submissions?wait=20000`, {
      body: { requestId: "campaign", conversationId: "main", input: "Send the approved notice" },
    });
    expect(ended.status).toBe(200);
    const decide = (n: number) =>
      api.json(`/sessions/${session}/signals/plan-approval:later-${n}`, {
        body: { requestId: `decision-${n}`, payload: { approved: true } },
      });
    for (let n = 0; n < 300; n++) await decide(n);
    const log = await api.json<{ oldestRetained: number }>(
      `/sessions/${session}/replica/changes?after=0&limit=1`,
    );
    expect(log.oldestRetained).toBeGreaterThan(1);
    const url = `${server?.url}/linked/?edge=${encodeURIComponent(api.url)}&token=${EdgeExample.token}&session=${session}&holder=browser-4&takeBack=when-asked`;
    const ownership = async () =>
      (await api.json<{ ownership: { holder: string } | null }>(`/sessions/${session}/replica`)).ownership;
    await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(url);
      await statusIs(page, "following");
      await page.waitForFunction(
        () => document.querySelector("#result")?.getAttribute("data-status") === "succeeded",
        undefined,
        { timeout: 30_000 },
      );
      expect(await page.textContent("#result")).toContain("Done: 5 of 5 notices delivered.");
      // Following claims nothing: no tab was ever recorded as leading this session.
      expect(await ownership()).toBeNull();
      // The edge goes on; the copy follows it from the change log: a new run shows up as it runs there.
      const next = await api.json<{ id: string }>(`/sessions/${session}/submissions`, {
        body: { requestId: "stamp-long", conversationId: "stamp", input: "Stamp the page" },
      });
      expect(next.id).toBeDefined();
      // The page shows the session's latest run: the new one, waiting at the edge for a browser to stamp.
      await page.waitForFunction(
        () => document.querySelector("#result")?.getAttribute("data-status") === "running",
        undefined,
        { timeout: 30_000 },
      );
      expect(await page.getAttribute("#status", "data-status")).toBe("following");
      await page.screenshot({
        path: join(artifacts, "linked-session-snapshot-following.png"),
        fullPage: true,
      });
    });
  });

  it("a tab that comes back follows the edge's run live, claims the session only when asked, then runs a browser-only call", async () => {
    const api = edge as EdgeExample;
    const session = "linked-follow";
    const base = `${server?.url}/linked/?edge=${encodeURIComponent(api.url)}&token=${EdgeExample.token}&session=${session}&holder=browser-2`;
    const ownership = async () =>
      (await api.json<{ ownership: { holder: string } | null }>(`/sessions/${session}/replica`)).ownership;
    const before = (await api.deliveries()).length;
    await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(base);
      await statusIs(page, "leading");
      await page.click("#start");
      await until(
        () => api.deliveries(),
        (d) => d.length > before,
        "the first mail",
      );
      await page.close(); // gone mid-send, no hand-off

      // Back at once, asked to follow first: it does not claim, even once its old lease is over.
      const back = await context.newPage();
      await back.goto(`${base}&takeBack=when-asked`);
      await statusIs(back, "following");
      await until(ownership, (o) => o?.holder === "edge", "the edge to take over");
      // The edge's sends show up in this tab as the edge commits them, and then its end.
      await back.waitForFunction(
        () => document.querySelector("#result")?.getAttribute("data-status") === "succeeded",
        undefined,
        { timeout: 30_000 },
      );
      expect(await back.textContent("#result")).toContain("Done: 5 of 5 notices delivered.");
      const sends = await back.$$eval("#log li", (items) => items.map((li) => li.textContent ?? ""));
      expect(sends.length).toBeGreaterThanOrEqual(5);
      expect((await ownership())?.holder).toBe("edge");
      expect(await back.getAttribute("#status", "data-status")).toBe("following");
      await back.screenshot({ path: join(artifacts, "linked-session-following.png"), fullPage: true });
      // While the edge leads, someone asks it to stamp the page: only a tab can, so the call waits.
      const stamp = await api.json<{ id: string }>(`/sessions/${session}/submissions`, {
        body: { requestId: "stamp-1", conversationId: "stamp", input: "Stamp the page" },
      });
      await until(
        () =>
          api.json<{ pending: { key: string; about?: { runsOn?: string } }[] }>(
            `/sessions/${session}/pending`,
          ),
        (p) => p.pending.some((w) => w.key.startsWith("run-on:") && w.about?.runsOn === "browser"),
        "the stamp to wait for a browser",
      );
      // Asked, the tab takes the session back, and runs the browser-only call it finds waiting.
      await back.click("#takeback");
      await statusIs(back, "leading");
      expect((await ownership())?.holder).toBe("tab");
      const stamped = await until(
        () =>
          api.json<{ status: string; result?: { text?: string } }>(
            `/sessions/${session}/submissions/${stamp.id}`,
          ),
        (s) => s.status === "succeeded",
        "the stamp to run in the tab and reach the edge",
      );
      expect(stamped.result?.text).toBe("Stamped by the linked tab.");
    });
    expect((await api.deliveries()).length - before).toBe(5);
  });
});
