/**
 * Installing from a git checkout, as the README tells: `npm install git+<url>#<commit>` clones the commit,
 * installs its dev dependencies, runs `prepare` (the build), and installs what `npm pack` would ship. The
 * installed package then runs an agent from plain Node ESM. The commit is this checkout's HEAD (what was
 * committed, not the working tree). Reaches the npm registry for the build's dev dependencies (cached
 * after the first install).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const repo = process.cwd();
const dir = mkdtempSync(join(tmpdir(), "durable-agent-git-"));

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const consumer = `
import { z } from "zod";
import { createAgent, createRegistry, defineTool, memoryStorage, openSession, scriptedModel } from "durable-agent";
import { simulateCrashes } from "durable-agent/testing";
const echo = defineTool({
  name: "echo",
  description: "Echo",
  input: z.object({ text: z.string() }),
  replay: "safe",
  execute: ({ text }) => ({ text }),
});
const model = scriptedModel([{ toolCalls: [{ name: "echo", args: { text: "hi" } }] }, { text: "done" }]);
const session = await openSession({ id: "s", storage: memoryStorage(), registry: createRegistry({ ...createAgent({ model, tools: [echo] }) }) });
await session.resume();
const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
console.log(JSON.stringify({ status: (await session.wait(sub.id)).status, testing: typeof simulateCrashes }));
await session.close();
`;

describe("installing from git", () => {
  it("builds on install (prepare) and runs from plain Node ESM", () => {
    const commit = execFileSync("git", ["rev-parse", "HEAD"], { cwd: repo, encoding: "utf8" }).trim();
    const app = join(dir, "app");
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "consumer", type: "module", private: true }),
    );
    execFileSync(
      "npm",
      ["install", `git+file://${repo}#${commit}`, "zod", "--prefer-offline", "--no-audit", "--no-fund"],
      { cwd: app, stdio: "pipe" },
    );
    const installed = join(app, "node_modules/durable-agent");
    for (const entry of [
      "dist/src/index.js",
      "dist/worker/index.js",
      "dist/edge/index.js",
      "dist/devtools/index.html",
    ])
      expect(existsSync(join(installed, entry)), entry).toBe(true);
    writeFileSync(join(app, "run.mjs"), consumer);
    const out = execFileSync(process.execPath, ["run.mjs"], { cwd: app, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual({ status: "succeeded", testing: "function" });
  }, 300_000);
});
