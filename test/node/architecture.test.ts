/**
 * The shape of `src/` (and of `worker/`, `edge/` and `web/` for the size of their files), checked on every
 * run: small modules, no import circles (type-only imports count: they are circles a reader has to untangle
 * too), task and Submission records written only by the task machine, and no clock or timer read from a
 * global inside the kernel.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SRC = resolve(ROOT, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

const files = sourceFiles(SRC);
const text = new Map(files.map((file) => [file, readFileSync(file, "utf8")]));
const name = (file: string) => relative(SRC, file);

/** Relative imports of a file (value and type-only alike), resolved to files. */
function importsOf(file: string): string[] {
  const found: string[] = [];
  for (const match of (text.get(file) ?? "").matchAll(/(?:import|export)[^;]*?from\s+"(\.[^"]+)"/g)) {
    found.push(resolve(dirname(file), match[1] as string));
  }
  return found;
}

describe("the kernel's layout", () => {
  it("has no file over 400 lines, nor have the browser and edge hosts and the pages", () => {
    const hosts = ["worker", "edge", "web"].flatMap((dir) => sourceFiles(resolve(ROOT, dir)));
    const long = [...files, ...hosts]
      .map((file) => [relative(ROOT, file), readFileSync(file, "utf8").split("\n").length] as const)
      .filter(([, lines]) => lines > 400);
    expect(long).toEqual([]);
  });

  it("has no import circle, type-only imports included", () => {
    const circles: string[] = [];
    const state = new Map<string, "visiting" | "done">();
    const visit = (file: string, path: string[]) => {
      if (state.get(file) === "done") return;
      if (state.get(file) === "visiting") {
        circles.push([...path.slice(path.indexOf(file)), file].map(name).join(" → "));
        return;
      }
      state.set(file, "visiting");
      for (const next of importsOf(file)) if (text.has(next)) visit(next, [...path, file]);
      state.set(file, "done");
    };
    for (const file of files) visit(file, []);
    expect(circles).toEqual([]);
  });

  it("writes task, Submission and Signal records only in the task machine and its await moves", () => {
    const writers = files
      .filter((file) => /\.write(Task|Submission|Signal)\(/.test(text.get(file) ?? ""))
      .map(name)
      .sort();
    expect(writers).toEqual(["tasks/awaiting.ts", "tasks/machine.ts"]);
  });

  it("reads no clock or timer from a global (they are injected)", () => {
    const global = /\b(Date\.now|performance\.now|new Date\(\)|(?<![\w.])setTimeout|(?<![\w.])setInterval)\b/;
    const readers = files.filter(
      (file) => file !== join(SRC, "clock.ts") && global.test(text.get(file) ?? ""),
    );
    expect(readers.map(name)).toEqual([]);
  });
});
