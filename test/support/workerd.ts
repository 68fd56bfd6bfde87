/** Bundles a TypeScript entry for workerd and starts it in miniflare with SQLite-backed Durable Objects. */
import { build } from "esbuild";
import { Miniflare } from "miniflare";

export async function bundleWorker(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    write: false,
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser", "import"],
  });
  return result.outputFiles[0]?.text ?? "";
}

export function startWorkerd(
  script: string,
  durableObjects: Record<string, string>,
  persist?: string,
): Miniflare {
  return new Miniflare({
    modules: true,
    script,
    compatibilityDate: "2026-04-01",
    compatibilityFlags: ["nodejs_compat"],
    durableObjects: Object.fromEntries(
      Object.entries(durableObjects).map(([binding, className]) => [binding, { className, useSQLite: true }]),
    ),
    ...(persist !== undefined && { durableObjectsPersist: persist }),
  });
}
