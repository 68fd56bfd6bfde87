/** `npm test` on a machine without Chromium says, in one line and before any tier, what to install. */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const preflight = (env: Record<string, string>) =>
  spawnSync(process.execPath, ["test/preflight.mjs"], { env: { ...process.env, ...env }, encoding: "utf8" });

describe("test preflight", () => {
  it("names the missing Chromium and how to install it, and stops", () => {
    const run = preflight({ CHROMIUM_PATH: "/nonexistent/chromium" });
    expect(run.status).toBe(1);
    const lines = run.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("/nonexistent/chromium");
    expect(lines[0]).toContain("apt-get install -y chromium");
  });

  it("lets the tests run when Chromium is there", () => {
    const run = preflight({ CHROMIUM_PATH: process.execPath }); // any executable file stands in for it
    expect(run.status).toBe(0);
    expect(run.stderr).toBe("");
  });
});
