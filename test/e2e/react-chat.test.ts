/**
 * examples of AI SDK UI: the react-chat page (plain `useChat` with durable-agent's transport) in real
 * Chromium with an on-disk profile. A question is answered with a tool call and a slowly streamed answer;
 * the page reloads mid-answer, shows the committed conversation and resumes the stream: the answer completes,
 * the question was sent once and the tool ran once. A booking asks for approval: the page shows Approve /
 * Reject, still does after a reload, and the approval given after the reload books once.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveWithVite, withChromiumProfile } from "../support/chromium.ts";

const artifacts = join(process.cwd(), "test-artifacts");
let server: Awaited<ReturnType<typeof serveWithVite>> | undefined;

beforeAll(async () => {
  server = await serveWithVite(join(process.cwd(), "web"));
  mkdirSync(artifacts, { recursive: true });
}, 60_000);

afterAll(async () => {
  await server?.close();
});

const FINAL =
  "It is 09:41 in Lisbon. This answer streams slowly on purpose: reload the page while it is being written, and the chat picks it up again from what was committed — the question is not sent twice and the tool does not run again.";

const assistantText = (page: Page) =>
  page.$$eval("[data-role=assistant] .text", (items) => items.map((p) => p.textContent ?? ""));

describe("react-chat example in Chromium", () => {
  it("resumes an answer across a reload mid-stream: sent once, the tool run once, the answer whole", async () => {
    await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(`${server?.url}/react-chat/`);
      await page.waitForSelector("input[aria-label=message]", { timeout: 60_000 });
      await page.fill("input[aria-label=message]", "What time is it in Lisbon?");
      await page.click("button[type=submit]");
      // Mid-answer: the tool has answered and part of the text has streamed, not all of it.
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll("[data-role=assistant] .text")].some(
            (p) => (p.textContent ?? "").length > 30,
          ),
        undefined,
        { timeout: 30_000 },
      );
      const before = (await assistantText(page)).join("");
      expect(before.length).toBeLessThan(FINAL.length);
      await page.screenshot({ path: join(artifacts, "react-chat-before-reload.png"), fullPage: true });
      await page.reload();
      await page.waitForFunction(
        (final) =>
          [...document.querySelectorAll("[data-role=assistant] .text")].some((p) => p.textContent === final),
        FINAL,
        { timeout: 60_000 },
      );
      await page.waitForFunction(
        () => document.querySelector("main")?.getAttribute("data-status") === "ready",
        undefined,
        {
          timeout: 30_000,
        },
      );
      await page.screenshot({ path: join(artifacts, "react-chat-after-reload.png"), fullPage: true });
      expect(await page.$$eval("[data-role=user]", (items) => items.map((i) => i.textContent))).toEqual([
        "What time is it in Lisbon?",
      ]);
      const tools = await page.$$eval(".tool", (items) => items.map((i) => i.getAttribute("data-state")));
      expect(tools).toEqual(["output-available"]);
      // The whole answer once, last; before it at most the part the reload cut off, a beginning of it.
      const parts = await assistantText(page);
      expect(parts.at(-1)).toBe(FINAL);
      expect(parts.filter((text) => text === FINAL)).toHaveLength(1);
      for (const text of parts.slice(0, -1)) expect(FINAL.startsWith(text)).toBe(true);
      expect(parts.length).toBeLessThanOrEqual(2);
      // A part the reload cut off is shown as cut off, not as a second answer; the answer is not.
      const cut = await page.$$eval("[data-role=assistant] .text", (items) =>
        items.map((p) => p.classList.contains("cut-off")),
      );
      expect(cut).toEqual(parts.map((_, i) => i < parts.length - 1));
      // Reloaded again once it ended: the same parts from the committed conversation, the cut-off one too.
      await page.reload();
      await page.waitForFunction(
        (final) =>
          [...document.querySelectorAll("[data-role=assistant] .text")].some((p) => p.textContent === final),
        FINAL,
        { timeout: 60_000 },
      );
      expect(await assistantText(page)).toEqual(parts);
      expect(
        await page.$$eval("[data-role=assistant] .text", (items) =>
          items.map((p) => p.classList.contains("cut-off")),
        ),
      ).toEqual(cut);
    });
  }, 120_000);

  it("asks before booking, still asks after a reload, and books once when approved", async () => {
    await withChromiumProfile(async (context) => {
      const page = await context.newPage();
      await page.goto(`${server?.url}/react-chat/`);
      await page.waitForSelector("input[aria-label=message]", { timeout: 60_000 });
      await page.fill("input[aria-label=message]", "Book a table for 4 tonight");
      await page.click("button[type=submit]");
      await page.waitForSelector(".tool[data-state=approval-requested] button", { timeout: 30_000 });
      await waitReady(page);
      await page.reload();
      // After the reload the call still waits for the decision: the run was never lost or re-sent.
      await page.waitForSelector(".tool[data-state=approval-requested] button", { timeout: 60_000 });
      await waitReady(page);
      // While it waits, a new message would queue behind it unanswered: the page asks for the decision first.
      expect(await page.isDisabled("button[type=submit]")).toBe(true);
      expect(await page.getAttribute("input[aria-label=message]", "placeholder")).toBe(
        "Approve or reject the call above first",
      );
      await page.screenshot({ path: join(artifacts, "react-chat-approval-pending.png"), fullPage: true });
      await page.getByRole("button", { name: "Approve" }).click();
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll("[data-role=assistant] .text")].some(
            (p) => p.textContent === "Done: a table for 4 at 20:00.",
          ),
        undefined,
        { timeout: 30_000 },
      );
      await waitReady(page);
      await page.screenshot({ path: join(artifacts, "react-chat-approval-done.png"), fullPage: true });
      expect(await page.isDisabled("button[type=submit]")).toBe(false);
      expect(await page.$$eval("[data-role=user]", (items) => items.map((i) => i.textContent))).toEqual([
        "Book a table for 4 tonight",
      ]);
      expect(await page.$$eval("[data-role=assistant]", (items) => items.length)).toBe(1);
      const tools = await page.$$eval(".tool", (items) => items.map((i) => i.textContent));
      // As many people as asked, and the answer says what was booked (it booked 2 for a request of 4).
      expect(tools).toEqual(['book_table({"people":4}) → {"booked":4,"at":"20:00"}']);
    });
  }, 120_000);
});

function waitReady(page: Page) {
  return page.waitForFunction(
    () => document.querySelector("main")?.getAttribute("data-status") === "ready",
    undefined,
    { timeout: 30_000 },
  );
}
