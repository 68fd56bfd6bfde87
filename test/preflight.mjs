/**
 * Runs before any test tier (`npm test`): the browser and e2e tiers need Debian's Chromium, never a
 * downloaded build. Without it, one line says what to install and how, instead of a failure deep inside a tier.
 */
import { accessSync, constants } from "node:fs";

const path = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
try {
  accessSync(path, constants.X_OK);
} catch {
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const install = `${root ? "" : "sudo "}apt-get update && ${root ? "" : "sudo "}apt-get install -y chromium`;
  console.error(
    `npm test needs Chromium at ${path} for its browser and e2e tiers: install it with \`${install}\` (what .ci/run does on Debian), or point CHROMIUM_PATH at a Chromium binary.`,
  );
  process.exit(1);
}
