/**
 * The devtools page in real Chromium (on-disk profile), attached read-only to a live session of the demo
 * app (local, IndexedDB) and to an edge session (the shipped edge example on workerd, over HTTP + SSE):
 * the task graph and timeline update as commits land, scrubbing shows an old version's tasks and
 * documents, and the recovery preview matches what resume then does. Screenshots of every view are kept.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Submission } from "../../src/index.ts";
import { serveWithVite, withChromiumProfile } from "../support/chromium.ts";
import { bundleWorker, EdgeExample } from "../support/workerd.ts";

const artifacts = join(process.cwd(), "test-artifacts");
let server: Awaited<ReturnType<typeof serveWithVite>> | undefined;
let origin = "";

beforeAll(async () => {
  server = await serveWithVite(join(process.cwd(), "web"));
  origin = server.url;
  mkdirSync(artifacts, { recursive: true });
}, 60_000);

afterAll(async () => {
  await server?.close();
});

const TIMEOUT = { timeout: 30_000 };

/** The version the devtools show and the latest they know: "v12 of 40". */
/** The repository as the test's Vite server serves it (for imports inside pages). */
const ROOT = `/@fs${process.cwd()}`;

/**
 * Runs `body` (statements) in a page of the devtools' origin, so what it writes lands in that origin's
 * IndexedDB. A string, so the test runner does not rewrite the page's own dynamic imports.
 */
async function runInOrigin(context: BrowserContext, body: string): Promise<void> {
  const writer = await context.newPage();
  await writer.goto(`${origin}/devtools/`);
  await writer.evaluate(`(async () => { ${body} })()`);
  await writer.close();
}

async function versions(page: Page): Promise<{ shown: number; latest: number }> {
  const text = (await page.textContent("[data-testid=version]")) ?? "";
  const [, shown, latest] = /v(\d+) of (\d+)/.exec(text) ?? [];
  return { shown: Number(shown), latest: Number(latest) };
}

async function nodes(page: Page): Promise<{ task: string; status: string; text: string }[]> {
  return page.$$eval("[data-testid=task-graph] g.node", (items) =>
    items.map((g) => ({
      task: g.getAttribute("data-task") ?? "",
      status: g.getAttribute("data-status") ?? "",
      text: g.textContent ?? "",
    })),
  );
}

/** Waits until the graph shows the whole five-email run (8 tasks) finished. */
function everyTaskSucceeded(page: Page) {
  return page.waitForFunction(
    () => {
      const all = [...document.querySelectorAll("[data-testid=task-graph] g.node")];
      return all.length >= 8 && all.every((g) => g.getAttribute("data-status") === "succeeded");
    },
    undefined,
    TIMEOUT,
  );
}

async function tab(page: Page, name: string): Promise<void> {
  await page.click(`[data-testid=tab-${name}]`);
}

const VIEWS = ["submissions", "pending", "conversation", "tasks", "documents", "timeline", "wake"];

/** The views wider than the window (a row or table running off the screen), with how wide the page got. */
async function viewsWiderThanWindow(page: Page): Promise<string[]> {
  const wide: string[] = [];
  for (const view of VIEWS) {
    await tab(page, view);
    const { width, inner } = await page.evaluate(() => ({
      width: document.documentElement.scrollWidth,
      inner: window.innerWidth,
    }));
    if (width > inner) wide.push(`${view}: ${width} px in a ${inner} px window`);
  }
  return wide;
}

/** Statements run in a page of the devtools' origin, and what they return (JSON). */
async function readInOrigin<T>(context: BrowserContext, body: string): Promise<T> {
  const reader = await context.newPage();
  await reader.goto(`${origin}/devtools/`);
  const result = (await reader.evaluate(`(async () => { ${body} })()`)) as T;
  await reader.close();
  return result;
}

/** axe-core's serious and critical violations on the page as it is now: rule id and where. */
async function accessibilityProblems(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: join(process.cwd(), "node_modules/axe-core/axe.min.js") });
  return page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(): Promise<{
            violations: {
              id: string;
              impact: string;
              nodes: { target: string[]; failureSummary: string }[];
            }[];
          }>;
        };
      }
    ).axe;
    const { violations } = await axe.run();
    return violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map(
        (v) =>
          `${v.id}: ${v.nodes
            .map((n) => `${n.target.join(" ")} — ${n.failureSummary}`)
            .slice(0, 2)
            .join("; ")}`,
      );
  });
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(artifacts, `devtools-${name}.png`), fullPage: true });
}

describe("devtools page in Chromium", () => {
  it("follows a local session live, scrubs back to old versions, and previews recovery as resume then does it", async () => {
    await withChromiumProfile(async (context) => {
      const demo = await context.newPage();
      await demo.goto(`${origin}/?mailDelay=4000&approval=auto`); // each send takes 4 s: a wide window to close the tab in
      await demo.waitForFunction(
        () => document.querySelector("#status")?.textContent?.includes("leader"),
        undefined,
        TIMEOUT,
      );

      // Attached before the run starts (the session holds only the approved plan), read-only.
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=durable-agent-demo&session=support-42`);
      await devtools.waitForSelector("[data-testid=version]", TIMEOUT);
      const attachedAt = await versions(devtools);
      expect(await devtools.textContent(".panel")).toContain("No tasks at this version");

      await demo.click("#start");
      await demo.waitForFunction(
        () => document.body.textContent?.includes("Sending the approved notice."),
        undefined,
        TIMEOUT,
      );
      // The graph grows as commits land: the campaign and its mail tasks appear; wait until mails have
      // committed their intent and are sending (phase "execute").
      await devtools.waitForFunction(
        () =>
          [...document.querySelectorAll("[data-testid=task-graph] g.node[data-task*='/mail-']")].filter((g) =>
            g.textContent?.includes("running @execute"),
          ).length > 0,
        undefined,
        TIMEOUT,
      );
      const before = await nodes(devtools);
      expect(before.some((n) => n.status !== "succeeded")).toBe(true);
      expect((await versions(devtools)).latest).toBeGreaterThan(attachedAt.latest);

      // A tab leads it (it holds the session's Web Lock); the devtools say so.
      await devtools.waitForSelector("[data-testid=writer][data-state=leading]", TIMEOUT);
      // The demo tab closes with tools running: its worker dies mid-send, like a crashed tab.
      await demo.close();
      // Nothing drives the session now, and the page says so (open work waits for a tab).
      await devtools.waitForSelector("[data-testid=writer][data-state=none]", TIMEOUT);
      // Work is open (mails were sending), and the page says what waits.
      expect(await devtools.textContent("[data-testid=writer]")).toMatch(
        /^no tab leads this session since \d\d:\d\d:\d\d: its open work \(\d+ unfinished tasks?(, 1 open submission)?\) waits until one does$/,
      );
      await tab(devtools, "wake");
      // The preview of the version storage holds last (the page may still be reading the dying tab's last
      // commit; a preview of the one before would name another mail).
      const head = await readInOrigin<number>(
        context,
        `
        const { indexedDbStorage, openSession } = await import("${ROOT}/src/index.ts");
        const storage = indexedDbStorage("durable-agent-demo");
        const session = await openSession({ id: "support-42", storage, mode: "read" });
        const version = session.view().version;
        await session.close();
        await storage.close();
        return version;
        `,
      );
      await devtools.waitForSelector(`[data-testid=recovery][data-version="${head}"] li`, TIMEOUT);
      await shoot(devtools, "wake-recovery");
      const preview = await devtools.$$eval("[data-testid=recovery] li", (items) =>
        items.map((li) => ({
          task: li.getAttribute("data-task") ?? "",
          kind: li.getAttribute("data-kind") ?? "",
          text: li.textContent ?? "",
        })),
      );
      const restarted = preview.filter((a) => a.kind === "restarted" && a.text.includes("counted restart"));
      expect(restarted.length).toBeGreaterThan(0);
      expect(restarted.every((a) => a.text.includes("send_email:"))).toBe(true);
      expect(restarted.some((a) => a.text.includes("send_email: confirm by operation id"))).toBe(true);
      // The campaign waits on one mail at a time: its join has one child open, and the page says "1 child".
      const joins = preview.filter((a) => a.kind === "join-rechecked").map((a) => a.text);
      expect(joins.length).toBeGreaterThan(0);
      for (const join of joins)
        expect(join).toMatch(/re-check its join \((1 child|([02-9]|\d\d+) children) still open\)/);
      expect(await devtools.textContent("[data-testid=runnable]")).not.toBe("nothing");

      // A new tab resumes the session; the devtools watch it happen, live.
      const resumed = await context.newPage();
      await resumed.goto(`${origin}/?approval=auto`);
      await resumed.waitForFunction(
        () => document.querySelector("#status")?.getAttribute("data-status") === "succeeded",
        undefined,
        { timeout: 60_000 },
      );
      await tab(devtools, "tasks");
      await everyTaskSucceeded(devtools);
      await devtools.waitForSelector("[data-testid=writer][data-state=leading]", TIMEOUT);
      const after = await versions(devtools);
      expect(after.latest).toBeGreaterThan(attachedAt.latest);
      expect(after.shown).toBe(after.latest); // live mode follows the newest commit

      // Resume did what the preview said: exactly the previewed re-entries count a restart.
      const finalNodes = await nodes(devtools);
      const restartedIds = new Set(restarted.map((a) => a.task));
      for (const node of finalNodes)
        expect({ task: node.task, restarted: node.text.includes("↻") }).toEqual({
          task: node.task,
          restarted: restartedIds.has(node.task),
        });
      await devtools.click(`[data-testid=task-graph] g.node[data-task="${restarted[0]?.task}"]`);
      const history = (await devtools.textContent("[data-testid=task-history]")) ?? "";
      expect(history).toContain("restarts 1");
      await shoot(devtools, "task-graph");
      // The waterfall: a bar per task of the tree shown, each as long as the task took (its details say so).
      const bars = await devtools.$$eval("[data-testid=waterfall] li", (items) =>
        items.map((li) => ({ task: li.getAttribute("data-task"), ms: Number(li.getAttribute("data-ms")) })),
      );
      expect(bars.map((b) => b.task).sort()).toEqual(finalNodes.map((n) => n.task).sort());
      const took = (await devtools.textContent("[data-testid=task-took]")) ?? "";
      expect(took).toMatch(new RegExp(`^${bars.find((b) => b.task === restarted[0]?.task)?.ms} ms`));
      // Token totals of the run's model calls, and their cost at the prices the page was given.
      // The cost is called an estimate, at prices the page says are illustrative and where they are set.
      expect(await devtools.textContent("[data-testid=token-totals]")).toMatch(
        /scripted: (1 call|\d+ calls), \d+ in \/ \d+ out tokens \(model entries the view holds\) · estimated cost \$\d+\.\d{4} at illustrative prices of \$3 in \/ \$15 out per million tokens \(set in web\/devtools\/main\.tsx, not a provider's\)/,
      );
      // Siblings stand in the order they were started: mail-0 on the left, mail-4 on the right.
      const mails = await devtools.$$eval("[data-testid=task-graph] g.node[data-task*='/mail-']", (items) =>
        items.map((g) => ({
          mail: /mail-\d+$/.exec(g.getAttribute("data-task") ?? "")?.[0],
          x: g.getBoundingClientRect().x,
        })),
      );
      expect(mails.sort((a, b) => a.x - b.x).map((m) => m.mail)).toEqual([
        "mail-0",
        "mail-1",
        "mail-2",
        "mail-3",
        "mail-4",
      ]);

      // Scrub back to the commit where the first mail task started: that version's tasks and documents.
      await tab(devtools, "timeline");
      await shoot(devtools, "timeline");
      const firstMail = await devtools.$$eval("[data-testid=timeline] > li", (items) => {
        const versions = items
          .filter((li) => /task \S+\/mail-0 \(agent\.tool\) → running/.test(li.textContent ?? ""))
          .map((li) => Number(/v(\d+)/.exec(li.querySelector("button")?.textContent ?? "")?.[1]));
        return Math.min(...versions);
      });
      expect(Number.isFinite(firstMail)).toBe(true);
      await devtools.click(`[data-testid=timeline] > li button:text-is("v${firstMail}")`);
      expect((await versions(devtools)).shown).toBe(firstMail);
      await tab(devtools, "tasks");
      const then = await nodes(devtools);
      expect(then.find((n) => n.task.endsWith("/mail-0"))?.status).toBe("running");
      expect(then.filter((n) => n.task.includes("/mail-") && n.status === "succeeded")).toEqual([]);
      expect(then.length).toBeLessThan(finalNodes.length + 1);
      await tab(devtools, "documents");
      expect(await devtools.textContent("[data-testid=document-value]")).toContain("ana@example.com");
      await shoot(devtools, "documents");

      // Keyboard: Home on the scrubber goes to the oldest version (before anything existed), End to the newest.
      await devtools.focus("[data-testid=scrubber]");
      await devtools.keyboard.press("Home");
      expect((await versions(devtools)).shown).toBe(0);
      await tab(devtools, "tasks");
      expect(await devtools.textContent("[data-testid=tabpanel], .panel")).toContain(
        "No tasks at this version",
      );
      await devtools.focus("[data-testid=scrubber]");
      await devtools.keyboard.press("End");
      expect((await versions(devtools)).shown).toBe(after.latest);

      // A document diff between versions: the campaign recorded its result on the approved plan.
      await tab(devtools, "documents");
      await devtools.click('[aria-label=documents] button:has-text("plan")');
      expect(await devtools.textContent("[data-testid=document-title]")).toContain("plan — v2");
      const diff = (await devtools.textContent("[data-testid=document-diff]")) ?? "";
      expect(diff).toContain("add /result");
      expect(diff).not.toContain("no difference");
      // The value as a JSON tree: every node names its path, the one the diff added included.
      const paths = await devtools.$$eval("[data-testid=document-value] li[data-path]", (items) =>
        items.map((li) => li.getAttribute("data-path")),
      );
      expect(paths).toContain("result");
      expect(paths).toContain("approved");

      // Keyboard: arrow keys move between the views.
      await devtools.focus("[data-testid=tab-documents]");
      await devtools.keyboard.press("ArrowLeft");
      await devtools.keyboard.press("ArrowLeft");
      await devtools.waitForSelector("[data-testid=tab-conversation][aria-selected=true]", TIMEOUT);
      expect(await devtools.evaluate(() => document.activeElement?.getAttribute("data-testid"))).toBe(
        "tab-conversation",
      );

      await tab(devtools, "submissions");
      expect(await devtools.textContent("[data-testid=submissions]")).toContain("succeeded");
      await shoot(devtools, "submissions");
      await tab(devtools, "conversation");
      const conversation = (await devtools.textContent("[data-testid=conversation]")) ?? "";
      expect(conversation).toContain("Done: 5 of 5 notices delivered.");
      expect(conversation).toContain("send_email");
      // An entry's whole record, opened on request: the last tool result as stored, field by field.
      const results = await devtools.$$("[data-testid=conversation] li.entry.tool-result");
      const last = results.at(-1);
      await (await last?.$("button.record"))?.click();
      const record = await devtools.waitForSelector("[data-testid^=entry-record-]", TIMEOUT);
      const leaf = async (path: string) => (await record.$(`li[data-path="${path}"] > span`))?.textContent();
      expect(await leaf("content.kind")).toBe('"tool-result"');
      // The same tool and outcome the line itself shows.
      const shown = await last?.$eval("span:not(.meta) > code", (code) => code.textContent);
      expect(await leaf("content.toolName")).toBe(JSON.stringify(shown));
      expect(await leaf("content.outcome")).toBe('"ok"');
      expect(await last?.textContent()).toContain("ok");
      await shoot(devtools, "conversation");

      await (await last?.$("button.record"))?.click(); // closes the record again

      // A deep link: the tab, a pinned version and a task in the URL open the page as they were.
      await tab(devtools, "tasks");
      const mail0 = restarted[0]?.task ?? "";
      await devtools.click(`[data-testid=task-graph] g.node[data-task="${mail0}"]`);
      await devtools.focus("[data-testid=scrubber]");
      await devtools.keyboard.press("ArrowLeft"); // one version back: no longer live
      const pinned = await versions(devtools);
      await devtools.waitForFunction(
        (v) => new URL(location.href).searchParams.get("v") === v,
        String(pinned.shown),
        TIMEOUT,
      );
      const link = new URL(devtools.url());
      expect(link.searchParams.get("tab")).toBe("tasks");
      expect(link.searchParams.get("v")).toBe(String(pinned.shown));
      expect(link.searchParams.get("task")).toBe(mail0);
      const linked = await context.newPage();
      await linked.goto(link.toString());
      await linked.waitForSelector(`[data-testid=task-graph] g.node.selected[data-task="${mail0}"]`, TIMEOUT);
      // The page shows the latest version first and reads the history before it: then the pinned one.
      await linked.waitForFunction(
        (v) => document.querySelector("[data-testid=version]")?.textContent?.startsWith(`v${v} `),
        pinned.shown,
        TIMEOUT,
      );
      expect((await versions(linked)).shown).toBe(pinned.shown);
      expect(await linked.isChecked("[data-testid=live]")).toBe(false);
      expect(await linked.textContent("[data-testid=task-details]")).toContain(mail0);
      await linked.close();
      await devtools.check("[data-testid=live]");
      await tab(devtools, "conversation");

      // Export the history, then open the file instead: the same versions, the same conversation.
      const [download] = await Promise.all([
        devtools.waitForEvent("download"),
        devtools.click("[data-testid=export]"),
      ]);
      const saved = await download.path();
      const attached = await versions(devtools);
      await devtools.setInputFiles("[data-testid=import]", saved);
      await devtools.waitForSelector("[data-testid=source]:has-text('file ')", TIMEOUT);
      expect(await versions(devtools)).toEqual(attached);
      await tab(devtools, "conversation");
      expect(await devtools.textContent("[data-testid=conversation]")).toBe(conversation);
      await shoot(devtools, "imported-history");
      // A file that is not a history is refused, naming why; what is shown stays as it was.
      const bad = join(dirname(saved), "not-a-history.json");
      writeFileSync(
        bad,
        JSON.stringify({
          format: "durable-agent-history",
          formatVersion: 1,
          base: {
            id: "x",
            version: 0,
            epoch: 0,
            limits: { settled: 20, entries: 200 },
            ...{ conversations: [], documents: [], tasks: [], submissions: [], pending: [], blocked: [] },
          },
          changes: [{ version: 2 }],
        }),
      );
      await devtools.setInputFiles("[data-testid=import]", bad);
      expect(await devtools.textContent("[role=alert]")).toContain(
        "not-a-history.json: change #0 is not a commit record",
      );
      expect(await versions(devtools)).toEqual(attached);
      // A base that is not a view is refused too (it would not render).
      const badBase = join(dirname(saved), "not-a-view.json");
      writeFileSync(
        badBase,
        JSON.stringify({
          format: "durable-agent-history",
          formatVersion: 1,
          base: { id: "x", version: 3 },
          changes: [],
        }),
      );
      await devtools.setInputFiles("[data-testid=import]", badBase);
      await devtools.waitForFunction(() =>
        document.querySelector("[role=alert]")?.textContent?.includes("needs a base view"),
      );
      expect(await versions(devtools)).toEqual(attached);
    });
  }, 120_000);

  it("follows an edge session over HTTP + SSE while it runs, scrubs it, and cancels a submission on request", async () => {
    const script = await bundleWorker(
      fileURLToPath(new URL("../edge/fixtures/edge-example.ts", import.meta.url)),
    );
    // Mails slow enough that the run is still going when the page has attached, on a loaded machine too.
    const edge = await EdgeExample.start(script, { mailDelayMs: 2000, corsOrigins: origin });
    try {
      await withChromiumProfile(async (context) => {
        const devtools = await context.newPage();
        await devtools.goto(`${origin}/devtools/`); // loaded once, so attaching below is quick
        await devtools.waitForSelector("form.attach", TIMEOUT);
      });
      const accepted = await edge.json<Submission>("/sessions/edge-devtools/submissions", {
        body: { requestId: "r1", conversationId: "main", input: "Send the approved notice" },
      });
      await withChromiumProfile(async (context) => {
        const devtools = await context.newPage();
        // A link names the edge and the session; the token is typed in, never carried in the URL.
        const query = new URLSearchParams({ edge: edge.url, session: "edge-devtools" });
        await devtools.goto(`${origin}/devtools/?${query}`);
        await devtools.waitForSelector("form.attach input[name=token]", TIMEOUT);
        expect(await devtools.$("[data-testid=task-graph]")).toBeNull();
        await devtools.fill("form.attach input[name=token]", EdgeExample.token);
        // The edge lists the sessions this token may read (GET /sessions): attach from the list.
        await devtools.click("text=List its sessions");
        await devtools.waitForSelector("[data-testid=edge-session-list] button", TIMEOUT);
        expect(
          await devtools.$$eval("[data-testid=edge-session-list] button", (b) => b.map((x) => x.textContent)),
        ).toContain("edge-devtools");
        await shoot(devtools, "edge-session-list");
        await devtools.click("[data-testid=edge-session-list] button:text-is('edge-devtools')");
        await devtools.waitForSelector("[data-testid=task-graph]", TIMEOUT);
        // Who writes: this session was never linked to a tab, so its Durable Object does.
        await devtools.waitForSelector("[data-testid=writer][data-state=edge]", TIMEOUT);
        expect(await devtools.textContent("[data-testid=writer]")).toContain(
          "its Durable Object writes this session",
        );
        const first = await versions(devtools);
        const firstNodes = await nodes(devtools);
        expect(firstNodes.some((n) => n.status !== "succeeded")).toBe(true);
        await everyTaskSucceeded(devtools);
        const last = await versions(devtools);
        expect(last.latest).toBeGreaterThan(first.latest);
        const done = await edge.json<Submission>(
          `/sessions/edge-devtools/submissions/${accepted.id}?wait=10000`,
        );
        const server = await edge.json<{ version: number }>("/sessions/edge-devtools/view");
        expect(last.latest).toBe(server.version);
        await tab(devtools, "submissions");
        expect(await devtools.textContent("[data-testid=submissions]")).toContain(done.status);
        await tab(devtools, "wake");
        await devtools.waitForSelector("[data-testid=recovery-empty]", TIMEOUT); // answered by the Durable Object
        await tab(devtools, "tasks");
        await shoot(devtools, "edge-task-graph");
        // The latest version was shown first; the history behind it is read in the background.
        await devtools.waitForFunction(
          () => !document.querySelector("[data-testid=history-loading]"),
          undefined,
          TIMEOUT,
        );
        await devtools.focus("[data-testid=scrubber]");
        await devtools.keyboard.press("Home");
        await devtools.keyboard.press("ArrowRight"); // version 1: the approved plan, nothing else yet
        expect((await versions(devtools)).shown).toBe(1);
        expect(await devtools.textContent(".panel")).toContain("No tasks at this version");
        await tab(devtools, "documents");
        expect(await devtools.textContent("[data-testid=document-title]")).toContain("plan");

        // The one write the devtools offer: cancelling a running submission, after a confirmation. A campaign
        // still sending, in a session of its own (asked again, edge-devtools's campaign ends at once: its
        // notice went out already), attached from the form.
        const second = await edge.json<Submission>("/sessions/edge-cancel/submissions", {
          body: { requestId: "r2", conversationId: "main", input: "Send the approved notice" },
        });
        await devtools.fill("form.attach input[name=session]", "edge-cancel");
        await devtools.click("form.attach button[type=submit]");
        await devtools.waitForSelector("[data-testid=source]:has-text('edge-cancel')", TIMEOUT);
        await devtools.check("[data-testid=live]");
        await tab(devtools, "submissions");
        const cancel = `[data-testid=submissions] tr:has-text("${second.id}") button`;
        await devtools.waitForSelector(cancel, TIMEOUT);
        devtools.once("dialog", (dialog) => void dialog.accept());
        await devtools.click(cancel);
        const ended = await edge.json<Submission>(
          `/sessions/edge-cancel/submissions/${second.id}?wait=20000`,
        );
        expect(ended.status).toBe("cancelled");
        await devtools.waitForSelector(
          `[data-testid=submissions] tr:has-text("${second.id}") .status.cancelled`,
          TIMEOUT,
        );
        // A decision sent before anyone asks for it is kept; dropping it is a second, confirmed write.
        await edge.json("/sessions/edge-cancel/signals/plan-approval%3Alater", {
          body: { requestId: "early-1", payload: { approved: false } },
        });
        await tab(devtools, "pending");
        const early = "[data-testid=early-signals] tr:has-text('plan-approval:later')";
        await devtools.waitForSelector(early, TIMEOUT);
        expect(await devtools.textContent(early)).toContain('{"approved":false}');
        await shoot(devtools, "early-signals");
        devtools.once("dialog", (dialog) => void dialog.dismiss());
        await devtools.click(`${early} button`);
        const kept = await edge.json<{ earlySignals: unknown[] }>("/sessions/edge-cancel/early-signals");
        expect(kept.earlySignals).toHaveLength(1); // declined: nothing written
        devtools.once("dialog", (dialog) => void dialog.accept());
        await devtools.click(`${early} button`);
        await devtools.waitForSelector("[data-testid=early-signals]", { state: "detached", ...TIMEOUT });
        const left = await edge.json<{ earlySignals: unknown[] }>("/sessions/edge-cancel/early-signals");
        expect(left.earlySignals).toEqual([]);
      });
    } finally {
      await edge.dispose();
    }
  }, 120_000);

  it("shows a pending approval with its age and no deadline, and answers it only after confirmation", async () => {
    await withChromiumProfile(async (context) => {
      const demo = await context.newPage();
      await demo.goto(`${origin}/`); // the default demo: the campaign asks a person first
      await demo.waitForSelector("#role[data-role=leader]", TIMEOUT);
      await demo.click("#start");
      await demo.waitForSelector(".approval button.approve", TIMEOUT);
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=durable-agent-demo&session=support-42`);
      await devtools.waitForSelector("[data-testid=task-graph]", TIMEOUT);
      await tab(devtools, "pending");
      await devtools.waitForSelector("[data-testid=pending] tr:has-text('plan-approval:plan')", TIMEOUT);
      const row = (await devtools.textContent("[data-testid=pending] tbody tr")) ?? "";
      expect(row).toContain("email-campaign");
      expect(row).toContain("ana@example.com");
      expect(row).toMatch(/since .*\(\d+ s\)/);
      expect(row).toContain("none");
      // At 1280 px the whole page fits the window: the plan's unbroken JSON wraps in its cell, and the answer
      // button is on screen.
      expect(await devtools.evaluate(() => window.innerWidth)).toBe(1280);
      expect(await viewsWiderThanWindow(devtools)).toEqual([]);
      await tab(devtools, "pending");
      const answerButton = await devtools.$eval("[data-testid=pending] button", (b) =>
        b.getBoundingClientRect(),
      );
      expect(answerButton.right).toBeLessThanOrEqual(1280);
      await shoot(devtools, "pending");
      // Declining the confirmation writes nothing: the wait stays. Then a payload the signal refuses, then the
      // suggested one; each prompt is answered with the next of these (undefined: the suggested payload).
      const answers: string[] = [];
      const typed = [undefined, '{"approved":"yes"}', undefined];
      devtools.on("dialog", (dialog) => {
        answers.push(dialog.type());
        if (dialog.type() === "prompt") void dialog.accept(typed.shift() ?? dialog.defaultValue());
        else void (answers.length <= 2 ? dialog.dismiss() : dialog.accept());
      });
      await devtools.click("[data-testid=pending] button");
      expect(await devtools.$("[data-testid=pending] tr:has-text('plan-approval:plan')")).not.toBeNull();
      expect(await demo.$(".approval button.approve")).not.toBeNull();
      expect(await devtools.$("[data-testid=write-outcome]")).toBeNull();
      // Refused, and the page says why; nothing was written.
      await devtools.click("[data-testid=pending] button");
      await devtools.waitForSelector("[data-testid=write-outcome][data-ok=false]", TIMEOUT);
      expect(await devtools.textContent("[data-testid=write-outcome]")).toContain(
        'invalid payload for "plan-approval:plan"',
      );
      await shoot(devtools, "refused-answer");
      expect(await demo.$(".approval button.approve")).not.toBeNull();
      await devtools.click("[data-testid=pending] button"); // the suggested payload, confirmed
      await demo.waitForFunction(
        () => document.querySelector("#status")?.getAttribute("data-status") === "succeeded",
        undefined,
        TIMEOUT,
      );
      expect(answers).toEqual(["prompt", "confirm", "prompt", "confirm", "prompt", "confirm"]);
      await devtools.waitForSelector("[data-testid=pending-empty]", TIMEOUT);
      expect(await demo.$(".approval")).toBeNull();
      // The refusal is gone once an answer went through: only the answer sent is said.
      const outcome = (await devtools.textContent("[data-testid=write-outcome]")) ?? "";
      expect(await devtools.getAttribute("[data-testid=write-outcome]", "data-ok")).toBe("true");
      expect(outcome).toMatch(
        /^sent \{"approved": true\} to plan-approval:plan \(request devtools-[0-9a-f-]+\)$/,
      );
      expect(await devtools.$("[data-testid=write-outcome][data-ok=false]")).toBeNull();
      await shoot(devtools, "after-answer");

      // Who approved, when, with what, and which task took it: in the timeline as storage holds it.
      const stored = await readInOrigin<
        { version: number; key: string; requestId: string; payload: unknown; consumedBy?: string }[]
      >(
        context,
        `
        const { indexedDbStorage, openSession } = await import("${ROOT}/src/index.ts");
        const storage = indexedDbStorage("durable-agent-demo");
        const session = await openSession({ id: "support-42", storage, mode: "read" });
        const { changes } = await session.readChanges(0, 10000);
        await session.close();
        await storage.close();
        return changes.flatMap((c) => (c.signals ?? []).map((s) => ({ version: c.version, key: s.key, requestId: s.requestId, payload: s.payload, consumedBy: s.consumedBy })));
        `,
      );
      const approval = stored.findLast((signal) => signal.key === "plan-approval:plan");
      expect(approval?.requestId).toBe(/request (devtools-[0-9a-f-]+)/.exec(outcome)?.[1]);
      await tab(devtools, "timeline");
      await devtools.check("[data-testid=signals-only]");
      const signalRows = await devtools.$$eval("[data-testid=timeline] > li", (items) =>
        items.map((li) => ({
          version: li.querySelector("button")?.textContent,
          lines: [...li.querySelectorAll("[data-testid=commit-signals] li")].map((line) => ({
            kind: line.getAttribute("data-kind"),
            key: line.getAttribute("data-key"),
            text: line.textContent ?? "",
          })),
        })),
      );
      // Every commit that holds a signal, newest first, and no other.
      expect(signalRows.map((r) => r.version)).toEqual(
        [...new Set(stored.map((signal) => `v${signal.version}`))].reverse(),
      );
      const line = signalRows
        .find((r) => r.version === `v${approval?.version}`)
        ?.lines.find((l) => l.key === approval?.key);
      expect(line).toMatchObject({ kind: "taken", key: approval?.key });
      expect(line?.text).toContain(
        `${approval?.key} from request ${approval?.requestId}: ${JSON.stringify(approval?.payload)}; taken by ${approval?.consumedBy}`,
      );
      expect(approval?.consumedBy).toMatch(/\/run$/); // the campaign's task
      await shoot(devtools, "signal-in-timeline");
      // The task that took it says so in its history.
      await devtools.click("[data-testid=commit-signals] button.link");
      expect(await devtools.textContent("[data-testid=task-took-signal]")).toContain(
        `took signal ${approval?.key} from request ${approval?.requestId}`,
      );
      // A decision for a plan nobody asks about yet, given by another tab: the leader keeps it. Dropping it
      // from the devtools goes through the same inbox, after a confirmation, and the leader drops it.
      await runInOrigin(
        context,
        `
        const { DurableInbox } = await import("${ROOT}/worker/inbox.ts");
        const inbox = new DurableInbox("durable-agent-demo:inbox");
        const signal = { key: "plan-approval:later", payload: { approved: false }, requestId: "early-1" };
        await inbox.put("support-42", { signal });
        await inbox.close();
        new BroadcastChannel("durable-agent:durable-agent-demo:support-42").postMessage({ type: "inbox" });
        `,
      );
      await tab(devtools, "pending");
      const early = "[data-testid=early-signals] tr:has-text('plan-approval:later')";
      await devtools.waitForSelector(early, TIMEOUT);
      await devtools.click(`${early} button`);
      await devtools.waitForSelector("[data-testid=early-signals]", { state: "detached", ...TIMEOUT });
      expect(answers).toEqual(["prompt", "confirm", "prompt", "confirm", "prompt", "confirm", "confirm"]);
      expect(await devtools.textContent("[data-testid=write-outcome]")).toBe(
        "dropped the signal kept for plan-approval:later",
      );
      // The timeline says it came (kept, no wait took it) and that it was dropped.
      await tab(devtools, "timeline");
      await devtools.check("[data-testid=signals-only]");
      const later = "[data-testid=commit-signals] li[data-key='plan-approval:later']";
      await devtools.waitForSelector(`${later}[data-kind=dropped]`, TIMEOUT);
      expect(await devtools.textContent(`${later}[data-kind=received]`)).toContain(
        'plan-approval:later from request early-1: {"approved":false}; no wait takes it yet, kept',
      );
    });
  }, 90_000);

  it("shows a failed, interrupted and confirmed run as it is: outcomes on the nodes, problems on the Submission, the recovery lane", async () => {
    await withChromiumProfile(async (context) => {
      // The run is written by this origin's own page, into its IndexedDB, in two "processes".
      await runInOrigin(
        context,
        `
        const { writeFailedRun } = await import("${ROOT}/test/support/failed-run.ts");
        const { indexedDbStorage } = await import("${ROOT}/src/index.ts");
        const { session } = await writeFailedRun(() => indexedDbStorage("devtools-failures"));
        await session.close();
        `,
      );

      // A mistyped database name is refused, and attaching creates nothing.
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=devtools-failurez&session=failures`);
      await devtools.waitForSelector("[role=alert]", TIMEOUT);
      expect(await devtools.textContent("[role=alert]")).toContain(
        'No IndexedDB database "devtools-failurez"',
      );
      const names = await devtools.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
      expect(names).toContain("devtools-failures");
      expect(names).not.toContain("devtools-failurez");

      // With nothing in the URL, the page lists the origin's sessions; one click attaches (and links it).
      await devtools.goto(`${origin}/devtools/`);
      await devtools.click("[data-testid=session-list] button:has-text('failures')");
      await devtools.waitForFunction(
        () => new URLSearchParams(location.search).get("local") === "devtools-failures",
        undefined,
        TIMEOUT,
      );
      await devtools.waitForSelector("[data-testid=task-graph] g.node[data-outcome=confirmed]", TIMEOUT);
      const shown = await devtools.$$eval("[data-testid=task-graph] g.node", (items) =>
        items.map((g) => ({
          outcome: g.getAttribute("data-outcome"),
          status: g.getAttribute("data-status"),
          tone: [...g.classList].find((c) => c.startsWith("tone-")),
          visible: [...g.querySelectorAll("text")].map((t) => t.textContent).join(" "),
          label: g.getAttribute("aria-label") ?? "",
        })),
      );
      const of = (outcome: string) => shown.find((n) => n.outcome === outcome);
      // The turn succeeded, but over tool calls that did not: its node says so, in the warning tone.
      expect(shown.map((n) => n.outcome).sort()).toEqual([
        "confirmed",
        "error",
        "interrupted",
        "succeeded with problems",
      ]);
      expect(of("succeeded with problems")?.tone).toBe("tone-warn");
      expect(of("succeeded with problems")?.label).toContain("1 error, 1 interrupted below");
      // So does its entry in the list of units of work, as the Submissions view does below.
      expect(await devtools.textContent("[data-testid=work-status-label]")).toBe("succeeded with problems");
      // Nothing in this session is unfinished (every task ended) and no tab leads it: nothing is said to wait.
      expect(shown.every((n) => ["succeeded", "failed", "cancelled"].includes(n.status ?? ""))).toBe(true);
      await devtools.waitForSelector("[data-testid=writer][data-state=none]", TIMEOUT);
      const writer = (await devtools.textContent("[data-testid=writer]")) ?? "";
      expect(writer).toContain("nothing in it is unfinished, so nothing waits for one");
      expect(writer).not.toContain("open work");
      expect(of("error")?.visible).toContain("error: HTTP 503");
      expect(of("interrupted")?.visible).toContain("charge_card");
      expect(of("interrupted")?.visible).toContain("↻1");
      // What a screen reader hears starts with what is written on the node.
      for (const node of shown) expect(node.label.startsWith(node.visible.split(" ")[0] ?? "?")).toBe(true);
      await shoot(devtools, "failed-run-graph");

      // The nodes are reachable by keyboard: Tab lands on one, Enter opens its details, reason in full.
      let focused = false;
      for (let i = 0; i < 40 && !focused; i++) {
        await devtools.keyboard.press("Tab");
        focused = await devtools.evaluate(
          () => document.activeElement?.matches("g.node[data-outcome=error]") ?? false,
        );
      }
      expect(focused).toBe(true);
      await devtools.keyboard.press("Enter");
      expect(await devtools.textContent("[data-testid=task-outcome]")).toBe("error");
      expect(await devtools.textContent("[data-testid=task-reason]")).toBe(
        "HTTP 503 Service Unavailable from prices.example",
      );
      // The state as a tree: every value reachable by its path, nothing cut.
      expect(
        await devtools.textContent('[data-testid=task-state] [data-path="result.output.error"]'),
      ).toContain('"HTTP 503 Service Unavailable from prices.example"');

      await tab(devtools, "submissions");
      const status = devtools.locator("[data-testid=submission-status]");
      expect(await status.getAttribute("data-tone")).toBe("warn");
      expect(await status.textContent()).toContain("succeeded with problems 1 error, 1 interrupted");
      // The timeline's commit that ended the turn says the same, never a plain "succeeded".
      await tab(devtools, "timeline");
      const ended = await devtools.$$eval("[data-testid=timeline] li li", (items) =>
        items.map((li) => li.textContent ?? "").filter((text) => /^submission \S+ → succeeded/.test(text)),
      );
      expect(ended).toEqual([
        expect.stringMatching(/→ succeeded with problems \(1 error, 1 interrupted below\)$/),
      ]);
      await tab(devtools, "submissions");
      // What the run did: two model rounds, three tool calls, its token totals.
      expect(await devtools.textContent("[data-testid=submission-work]")).toMatch(
        /^2 rounds · 3 tool calls · \d+ in \/ \d+ out tokens$/,
      );
      await shoot(devtools, "failed-run-submissions");

      // Every view passes axe-core with no serious or critical violation.
      for (const view of [
        "submissions",
        "pending",
        "conversation",
        "tasks",
        "documents",
        "timeline",
        "wake",
      ]) {
        await tab(devtools, view);
        expect(await accessibilityProblems(devtools), `the ${view} view`).toEqual([]);
      }
      // The tabs follow the WAI-ARIA pattern: arrows move, Home and End jump to the ends.
      await devtools.focus("[data-testid=tab-submissions]");
      await devtools.keyboard.press("End");
      expect(await devtools.evaluate(() => document.activeElement?.getAttribute("data-testid"))).toBe(
        "tab-wake",
      );
      await devtools.keyboard.press("Home");
      expect(await devtools.evaluate(() => document.activeElement?.getAttribute("data-testid"))).toBe(
        "tab-submissions",
      );
      expect(await devtools.getAttribute("[data-testid=tab-submissions]", "aria-selected")).toBe("true");

      await tab(devtools, "timeline");
      await devtools.check("[data-testid=recovery-only]");
      const marks = await devtools.$$eval("[data-testid=recovery-marks] li", (items) =>
        items.map((li) => li.getAttribute("data-kind")),
      );
      expect(new Set(marks)).toEqual(new Set(["epoch", "restart", "interrupted", "confirmed"]));
      await shoot(devtools, "failed-run-timeline");
      // A mark leads to its task.
      await devtools.click("[data-testid=recovery-marks] li[data-kind=confirmed] button");
      expect(await devtools.textContent("[data-testid=task-outcome]")).toBe("confirmed");
    });
  }, 90_000);

  it("shows one unit of work at a time in a session of 300 submissions: listed newest first, filtered and searched", async () => {
    await withChromiumProfile(async (context) => {
      await runInOrigin(
        context,
        `
        const { writeManyRuns } = await import("${ROOT}/test/support/many-runs.ts");
        const { indexedDbStorage } = await import("${ROOT}/src/index.ts");
        await writeManyRuns(indexedDbStorage("devtools-many", { durability: "relaxed" }), 300);
        `,
      );
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=devtools-many&session=many`);
      // The change log is read page by page: wait until the newest run has arrived.
      await devtools.waitForFunction(
        () => document.querySelector("[data-testid=work-items] li")?.textContent?.includes("req-299"),
        undefined,
        TIMEOUT,
      );
      // The view holds the working set (the latest settled runs); older ones are paged in from storage.
      expect(await devtools.textContent("[data-testid=work-count]")).toBe("20 of 20");
      // Newest first; the graph holds that one turn's tree only, not 300 of them side by side.
      expect(await devtools.textContent("[data-testid=work-items] li:first-child")).toContain("req-299");
      const nodes = await devtools.$$eval("[data-testid=task-graph] g.node", (gs) => gs.length);
      expect(nodes).toBe(2); // the turn and its one tool call
      await tab(devtools, "submissions");
      expect(await devtools.textContent("[data-testid=submission-work]")).toMatch(
        /(^| · )1 tool call( · |$)/,
      );
      await tab(devtools, "tasks");
      const width = Number(await devtools.getAttribute("[data-testid=task-graph]", "width"));
      expect(width).toBeLessThan(2 * 210 + 100);
      // Of the runs in the view (280–299), 280 and 290 had a failed tool call.
      await devtools.selectOption("[data-testid=work-status]", "problems");
      expect(await devtools.textContent("[data-testid=work-count]")).toBe("2 of 20");
      await devtools.selectOption("[data-testid=work-status]", "all");
      while (await devtools.$("[data-testid=load-older]")) {
        const before = await devtools.textContent("[data-testid=work-count]");
        await devtools.click("[data-testid=load-older]");
        await devtools.waitForFunction(
          (text) => document.querySelector("[data-testid=work-count]")?.textContent !== text,
          before,
          TIMEOUT,
        );
      }
      expect(await devtools.textContent("[data-testid=work-count]")).toBe("300 of 300");
      expect(await devtools.textContent("[data-testid=older-note]")).toContain(
        "280 older read from storage (all of them)",
      );
      await devtools.selectOption("[data-testid=work-status]", "all");
      // A stored run is not shown as a plain success before its tool calls are read: run 40's failed. Opened,
      // its tree is read and it says so, as a run in the view does.
      const label = "[data-testid=work-items] [data-testid=work-status-label]";
      await devtools.fill("[data-testid=work-search]", "req-40");
      expect(await devtools.getAttribute(label, "class")).toContain("tone-unread");
      expect(await devtools.getAttribute(label, "title")).toContain("read when it is opened");
      await devtools.click("[data-testid=work-items] button");
      await devtools.waitForFunction(
        (selector) => document.querySelector(selector)?.textContent === "succeeded with problems",
        label,
        TIMEOUT,
      );
      expect(await devtools.getAttribute(label, "class")).toContain("tone-warn");
      await devtools.fill("[data-testid=work-search]", "");
      await devtools.selectOption("[data-testid=work-status]", "problems");
      expect(await devtools.textContent("[data-testid=work-count]")).toBe("3 of 300");
      await devtools.selectOption("[data-testid=work-status]", "all");
      await devtools.fill("[data-testid=work-search]", "req-42");
      expect(await devtools.textContent("[data-testid=work-count]")).toBe("1 of 300");
      await devtools.click("[data-testid=work-items] button");
      // Its tree is read from storage: the same two tasks a turn has.
      await devtools.waitForSelector("[data-testid=task-graph] g.node[data-outcome=ok]", TIMEOUT);
      await devtools.click("[data-testid=task-graph] g.node[data-outcome=ok]");
      expect(await devtools.textContent('[data-testid=task-state] [data-path="result.output.n"]')).toContain(
        "n: 42",
      );
      expect(await devtools.textContent(label)).toBe("succeeded");
      expect(await devtools.getAttribute(label, "class")).toContain("tone-good");
      expect(await accessibilityProblems(devtools)).toEqual([]);
      await shoot(devtools, "many-submissions");
    });
  }, 120_000);

  it("says where history stops when the change log no longer reaches the start, and reads older work from storage", async () => {
    await withChromiumProfile(async (context) => {
      await runInOrigin(
        context,
        `
        const { writeHistoryForTest } = await import("${ROOT}/bench/long-life.ts");
        const { indexedDbStorage } = await import("${ROOT}/src/index.ts");
        const store = indexedDbStorage("devtools-pruned", { durability: "relaxed", retainChanges: 500 });
        await writeHistoryForTest(store, "pruned", 3000);
        await store.close();
        `,
      );
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=devtools-pruned&session=pruned&tab=timeline`);
      await devtools.waitForFunction(
        () => document.querySelector("[data-testid=version]")?.textContent === "v3000 of 3000",
        undefined,
        TIMEOUT,
      );
      const note = (await devtools.textContent("[data-testid=history-start]")) ?? "";
      // Versions before the attach are not rebuilt from a log that lost the start: the page says so, and
      // the slider starts at the version attached to.
      expect(note).toContain("versions before v3000 cannot be rebuilt");
      await devtools.focus("[data-testid=scrubber]");
      await devtools.keyboard.press("Home");
      expect((await versions(devtools)).shown).toBe(3000);
      // What is older is still reachable from storage: the Submissions, 200 at a time.
      await tab(devtools, "tasks");
      await devtools.click("[data-testid=load-older]");
      await devtools.waitForFunction(() =>
        document
          .querySelector("[data-testid=older-note]")
          ?.textContent?.startsWith("200 older read from storage"),
      );
      expect(await accessibilityProblems(devtools)).toEqual([]);
      await shoot(devtools, "pruned-history");
    });
  }, 120_000);

  it("counts the parked waits left in storage and lists them from storage, a page at a time", async () => {
    await withChromiumProfile(async (context) => {
      await runInOrigin(
        context,
        `
        const { writeParkedWaitsForTest } = await import("${ROOT}/test/support/parked-seed.ts");
        const { indexedDbStorage } = await import("${ROOT}/src/index.ts");
        const store = indexedDbStorage("devtools-parked", { durability: "relaxed" });
        await writeParkedWaitsForTest(store, "parked", 250, 50, ["ask:900", "ask:901"], 1);
        await store.close();
        `,
      );
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=devtools-parked&session=parked&tab=pending`);
      await devtools.waitForSelector("[data-testid=pending-parked]", TIMEOUT);
      const parkedRows = () =>
        devtools.$$eval("[data-testid=pending] tr[data-parked=true]", (rows) => rows.length);
      // None is in the session's memory (its view lists no task); all 250 are in storage, listed 100 at a time.
      expect(await parkedRows()).toBe(100);
      expect(await devtools.textContent("[data-testid=pending-parked]")).toContain(
        "250 parked waits are in storage, not in memory",
      );
      const row = (await devtools.textContent("[data-testid=pending] tr:has-text('ask:249')")) ?? "";
      expect(row).toContain("asker");
      expect(row).toContain("question 249");
      // Its deadline passed an hour ago with no writer to run it: said so, not shown as a time still ahead.
      expect(row).toMatch(/passed (59|60) min ago, not yet acted on/);
      const plain = (await devtools.textContent("[data-testid=pending] tr:has-text('ask:248')")) ?? "";
      expect(plain).not.toContain("passed");
      await devtools.click("[data-testid=pending-parked] button");
      await devtools.waitForFunction(
        () => document.querySelectorAll("[data-testid=pending] tr[data-parked=true]").length === 200,
        undefined,
        TIMEOUT,
      );
      await devtools.click("[data-testid=pending-parked] button");
      await devtools.waitForFunction(
        () => document.querySelectorAll("[data-testid=pending] tr[data-parked=true]").length === 250,
        undefined,
        TIMEOUT,
      );
      // Every key once: what the page lists is what storage holds.
      const keys = await devtools.$$eval(
        "[data-testid=pending] tr[data-parked=true] td:first-child code",
        (cells) => cells.map((cell) => cell.textContent ?? ""),
      );
      expect(new Set(keys)).toEqual(new Set(Array.from({ length: 250 }, (_, n) => `ask:${n}`)));
      expect(await devtools.$("[data-testid=pending-parked] button")).toBeNull();
      // The signals no wait took (their keys awaited by none) are listed as the session holds them.
      const early = await devtools.$$eval("[data-testid=early-signals] tbody tr", (rows) =>
        rows.map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent ?? "")),
      );
      expect(early.map((cells) => [cells[0], cells[2], cells[3]])).toEqual([
        ["ask:900", "ask:900", '{"answer":"early ask:900"}'],
        ["ask:901", "ask:901", '{"answer":"early ask:901"}'],
      ]);
      expect(await accessibilityProblems(devtools)).toEqual([]);
      await shoot(devtools, "parked-waits");
    });
  }, 120_000);

  it("is interactive on a session of 20,000 Submissions with all 20,000 commits kept: latest first, then the whole history", async () => {
    await withChromiumProfile(async (context) => {
      await runInOrigin(
        context,
        `
        const { writeHistoryForTest } = await import("${ROOT}/bench/long-life.ts");
        const { indexedDbStorage } = await import("${ROOT}/src/index.ts");
        const store = indexedDbStorage("devtools-20000", { durability: "relaxed", retainChanges: 1000000 });
        await writeHistoryForTest(store, "big", 20000);
        await store.close();
        `,
      );
      const devtools = await context.newPage();
      await devtools.goto(`${origin}/devtools/?local=devtools-20000&session=big&tab=submissions`);
      await devtools.waitForFunction(
        () => document.querySelector("[data-testid=version]")?.textContent === "v20000 of 20000",
        undefined,
        TIMEOUT,
      );
      // The working set's Submissions, newest first in the work list; one of them found by search.
      await tab(devtools, "tasks");
      expect(await devtools.textContent("[data-testid=work-items] li:first-child")).toContain("r19999");
      await devtools.fill("[data-testid=work-search]", "r19990");
      expect(await devtools.textContent("[data-testid=work-count]")).toBe("1 of 20");
      await devtools.fill("[data-testid=work-search]", "");
      // Once the history behind it is in, the slider reaches back to the session's start.
      await devtools.waitForFunction(
        () => !document.querySelector("[data-testid=history-loading]"),
        undefined,
        {
          timeout: 120_000,
        },
      );
      await devtools.focus("[data-testid=scrubber]");
      await devtools.keyboard.press("Home");
      expect((await versions(devtools)).shown).toBe(0);
      await devtools.keyboard.press("End");
      expect((await versions(devtools)).shown).toBe(20_000);
      // The whole timeline is one list, rendered only near where it is scrolled: 20,000 commits, a few
      // dozen rows in the page; its end (the first commit) is reached by scrolling or by End.
      await tab(devtools, "timeline");
      expect(await devtools.textContent("[data-testid=timeline] > li:first-child")).toContain("v20000");
      const rendered = () => devtools.$$eval("[data-testid=timeline] > li", (items) => items.length);
      expect(await rendered()).toBeLessThan(100);
      expect(await devtools.getAttribute("[data-testid=timeline] > li:first-child", "aria-setsize")).toBe(
        "20000",
      );
      await devtools.$eval(".virtual-scroller", (scroller) => {
        scroller.scrollTop = scroller.scrollHeight;
      });
      await devtools.waitForFunction(() =>
        [...document.querySelectorAll("[data-testid=timeline] > li > button")].some(
          (b) => b.textContent === "v1",
        ),
      );
      expect(await rendered()).toBeLessThan(100);
      await devtools.$eval(".virtual-scroller", (scroller) => {
        scroller.scrollTop = 0;
      });
      await devtools.focus("[data-testid=timeline] > li:first-child > button");
      await devtools.keyboard.press("End");
      await devtools.waitForFunction(() => document.activeElement?.textContent === "v1");
      await devtools.keyboard.press("ArrowUp");
      await devtools.waitForFunction(() => document.activeElement?.textContent === "v2");
      await devtools.keyboard.press("Enter");
      expect((await versions(devtools)).shown).toBe(2);
      await devtools.keyboard.press("Home");
      await devtools.waitForFunction(() => document.activeElement?.textContent === "v20000");
      await devtools.keyboard.press("Enter");
      expect((await versions(devtools)).shown).toBe(20_000);
      await shoot(devtools, "20000-timeline");

      // The conversation: the view's tail, then older entries read from storage a page at a time, in
      // one list that stays a few dozen rows in the page.
      await tab(devtools, "conversation");
      const shownEntries = async () => (await devtools.textContent("[data-testid=entry-count]")) ?? "";
      const before = /\((\d+) of 40000 entries shown\)/.exec(await shownEntries());
      expect(before).not.toBeNull();
      await devtools.click("[data-testid=load-older-entries]");
      await devtools.waitForFunction(
        (n) => document.querySelector("[data-testid=entry-count]")?.textContent?.startsWith(`(${n} of`),
        Number(before?.[1]) + 500,
      );
      await devtools.click("[data-testid=load-older-entries]");
      await devtools.waitForFunction(
        (n) => document.querySelector("[data-testid=entry-count]")?.textContent?.startsWith(`(${n} of`),
        Number(before?.[1]) + 1000,
      );
      expect(await devtools.$$eval("[data-testid=entries-main] > li", (items) => items.length)).toBeLessThan(
        100,
      );
      // The oldest entry read is the first row of the list, with the seq storage gave it.
      const oldest = 40_000 - Number(before?.[1]) - 1000;
      expect(await devtools.textContent("[data-testid=entries-before]")).toContain(`${oldest} older entries`);
      expect(await devtools.textContent("[data-testid=entries-main] > li:first-child")).toContain(
        `#${oldest} `,
      );
      await shoot(devtools, "20000-conversation");
      await tab(devtools, "tasks");
      await shoot(devtools, "20000-submissions");
    });
  }, 180_000);
});
