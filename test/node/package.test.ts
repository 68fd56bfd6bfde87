/**
 * The package as a user installs it: `npm pack` (which builds `dist/`), the tarball installed into a fresh
 * project next to its peer libraries, then used from the outside only — imported from plain Node ESM (a run
 * through the agent loop), type-checked against the shipped `.d.ts`, bundled for a page with Vite and for a
 * Worker the way wrangler's esbuild does (`workerd` conditions). Installing reaches the npm registry for the
 * peers (cached after the first run).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build as esbuild } from "esbuild";
import { build as viteBuild } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repo = process.cwd();
let app = "";

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), "durable-agent-package-"));
  const tarball = execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], {
    cwd: repo,
    encoding: "utf8",
  })
    .trim()
    .split("\n")
    .at(-1) as string;
  app = join(dir, "app");
  mkdirSync(app);
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({ name: "consumer", type: "module", private: true }),
  );
  execFileSync(
    "npm",
    [
      "install",
      join(dir, tarball),
      "zod",
      "comlink",
      "idb",
      "hono",
      "jose",
      "@ai-sdk/provider",
      // The AI SDK provider's own declarations import json-schema's types without depending on them.
      "@types/json-schema",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
    ],
    { cwd: app, stdio: "pipe" },
  );
}, 180_000);

afterAll(() => {
  if (app) rmSync(join(app, ".."), { recursive: true, force: true });
});

const consumer = `
import { z } from "zod";
import { createAgent, createRegistry, defineTool, memoryStorage, openSession, scriptedModel, type Submission } from "durable-agent";
import { connectSessionWorker } from "durable-agent/worker";
import { createEdgeApp } from "durable-agent/edge";
import { simulateCrashes } from "durable-agent/testing";
const lookup = defineTool({
  name: "lookup",
  description: "Look a key up",
  input: z.object({ key: z.string() }),
  replay: "safe",
  execute: ({ key }) => ({ key, length: key.length }),
});
const model = scriptedModel([{ toolCalls: [{ name: "lookup", args: { key: "abc" } }] }, { text: "found" }]);
const registry = createRegistry({ ...createAgent({ model, tools: [lookup] }) });
const session = await openSession({ id: "s", storage: memoryStorage(), registry });
await session.resume();
const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
const done: Submission = await session.wait(sub.id);
await session.close();
// Crash-tested from the package alone: killed after and as it makes every commit, reopened each time.
const crashes = await simulateCrashes({
  world: () => null,
  registry: () => createRegistry({ ...createAgent({ model: scriptedModel([{ toolCalls: [{ name: "lookup", args: { key: "abc" } }] }, { text: "found" }]), tools: [lookup] }) }),
  drive: async (s) => [await s.submit({ requestId: "r", conversationId: "c", input: "go" })],
});
console.log(JSON.stringify({ status: done.status, worker: typeof connectSessionWorker, edge: typeof createEdgeApp, crashRuns: crashes.runs > 3, crashFailures: crashes.failures }));
`;

describe("the installed package", () => {
  it("ships its build, and no devtools-only runtime dependency", () => {
    const installed = JSON.parse(readFileSync(join(app, "node_modules/durable-agent/package.json"), "utf8"));
    for (const entry of [
      "dist/src/index.js",
      "dist/worker/index.js",
      "dist/edge/index.js",
      "dist/devtools/index.html",
    ])
      expect(existsSync(join(app, "node_modules/durable-agent", entry)), entry).toBe(true);
    expect(Object.keys(installed.dependencies).sort()).toEqual([
      "eventsource-parser",
      "fast-json-patch",
      "zod",
    ]);
    // Each optional: comlink and idb for /worker, hono and jose for /edge, @ai-sdk/provider for aiSdkModel's types.
    expect(Object.keys(installed.peerDependencies).sort()).toEqual([
      "@ai-sdk/provider",
      "comlink",
      "hono",
      "idb",
      "jose",
    ]);
  });

  it("runs from plain Node ESM and type-checks against its own declarations", () => {
    writeFileSync(join(app, "consumer.ts"), consumer);
    writeFileSync(
      join(app, "check.mjs"),
      consumer.replace(", type Submission", "").replace(": Submission", ""),
    );
    const out = execFileSync(process.execPath, ["check.mjs"], { cwd: app, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual({
      status: "succeeded",
      worker: "function",
      edge: "function",
      crashRuns: true,
      crashFailures: [],
    });
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: [],
          lib: ["es2022", "dom"],
        },
        files: ["consumer.ts"],
      }),
    );
    // Any type error in the consumer or in the shipped declarations fails here, with tsc's report.
    const tsc = spawnSync(process.execPath, [join(repo, "node_modules/typescript/bin/tsc"), "-p", "."], {
      cwd: app,
      encoding: "utf8",
    });
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.status).toBe(0);
  }, 60_000);

  it("bundles for a Worker as wrangler does, and for a page with Vite", async () => {
    writeFileSync(
      join(app, "worker.js"),
      'import { createEdgeApp, defineSessionObject } from "durable-agent/edge";\nexport const app = createEdgeApp();\nexport { defineSessionObject };\nexport default { fetch: (r, env, ctx) => app.fetch(r, env, ctx) };\n',
    );
    const worker = await esbuild({
      entryPoints: [join(app, "worker.js")],
      absWorkingDir: app,
      bundle: true,
      format: "esm",
      platform: "neutral",
      mainFields: ["module", "main"],
      conditions: ["workerd", "worker", "browser", "import"],
      write: false,
      logLevel: "silent",
    });
    expect(worker.outputFiles[0]?.text).toContain("createEdgeApp");
    writeFileSync(join(app, "index.html"), '<script type="module" src="./page.js"></script>\n');
    writeFileSync(
      join(app, "page.js"),
      'import { indexedDbStorage, openSession } from "durable-agent";\nimport { connectSessionWorker } from "durable-agent/worker";\nwindow.parts = [indexedDbStorage, openSession, connectSessionWorker];\n',
    );
    await viteBuild({
      root: app,
      logLevel: "silent",
      configFile: false,
      build: { outDir: join(app, "out") },
    });
    expect(existsSync(join(app, "out/index.html"))).toBe(true);
  }, 60_000);
});
