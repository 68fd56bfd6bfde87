/**
 * The pages `npm start` serves. Example code imports the package by its name, as an app would
 * (`import { chatTransport } from "durable-agent"`): here the name points at this checkout's sources.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^durable-agent\/worker$/, replacement: here("../worker/index.ts") },
      { find: /^durable-agent$/, replacement: here("../src/index.ts") },
    ],
  },
});
