/**
 * The pages `npm start` serves: the demo and the devtools from `web/`, and the react-chat example from
 * `examples/react-chat/` at `/react-chat/`. Example code imports the package by its name, as an app would
 * (`import { chatTransport } from "durable-agent"`): here the name points at this checkout's sources.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * Serves a folder outside `web/` under a path of the same server: its `index.html` through Vite's HTML
 * transform, everything else read by Vite through `/@fs/`.
 */
function mount(prefix: string, folder: string): Plugin {
  return {
    name: `mount ${prefix}`,
    configureServer(server) {
      server.middlewares.use(async (request, response, next) => {
        const [path = "", query] = (request.url ?? "").split("?");
        if (path === prefix.slice(0, -1) || path === prefix || path === `${prefix}index.html`) {
          try {
            // Its scripts by their file's own path: Vite pre-transforms a page's scripts as it serves the page,
            // and `./main.tsx` read from the root (`/react-chat/main.tsx`) is no file ("Failed to load url").
            const html = (await readFile(join(folder, "index.html"), "utf8")).replaceAll(
              'src="./',
              `src="/@fs${folder}`,
            );
            response.setHeader("content-type", "text/html");
            response.end(await server.transformIndexHtml(prefix, html));
          } catch (error) {
            next(error);
          }
          return;
        }
        if (path.startsWith(prefix))
          request.url = `/@fs${join(folder, path.slice(prefix.length))}${query ? `?${query}` : ""}`;
        next();
      });
    },
  };
}

export default defineConfig({
  plugins: [mount("/react-chat/", here("../examples/react-chat/"))],
  resolve: {
    alias: [
      { find: /^durable-agent\/worker$/, replacement: here("../worker/index.ts") },
      { find: /^durable-agent$/, replacement: here("../src/index.ts") },
    ],
  },
});
