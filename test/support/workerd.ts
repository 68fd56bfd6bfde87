/** Bundles a TypeScript entry for workerd and starts it in miniflare with SQLite-backed Durable Objects. */
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { serverEvents } from "../../src/index.ts";

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
    // The platform's own modules (`DurableObject` for RPC), as wrangler leaves them.
    external: ["cloudflare:*"],
  });
  return result.outputFiles[0]?.text ?? "";
}

export function startWorkerd(
  script: string,
  durableObjects: Record<string, string>,
  persist?: string,
  bindings: Record<string, string> = {},
  inspectorPort?: number,
): Miniflare {
  return new Miniflare({
    ...(inspectorPort !== undefined && { inspectorPort }),
    modules: true,
    script,
    compatibilityDate: "2026-04-01",
    compatibilityFlags: ["nodejs_compat"],
    durableObjects: Object.fromEntries(
      Object.entries(durableObjects).map(([binding, className]) => [binding, { className, useSQLite: true }]),
    ),
    ...(persist !== undefined && { durableObjectsPersist: persist }),
    bindings,
  });
}

/** The shipped edge example (with a test hook to fire alarms) on workerd, and a client for its API. */
export class EdgeExample {
  static readonly token = "test-token";
  private constructor(
    readonly workerd: Miniflare,
    /** Where the runtime listens (for browsers). */
    readonly url: string,
  ) {}

  static async start(
    script: string,
    options: {
      persist?: string;
      watchdogMs?: number;
      mailDelayMs?: number;
      corsOrigins?: string;
      /** More vars for the Worker (JWT_SECRET, RATE_LIMIT_PER_MINUTE, …). */
      vars?: Record<string, string>;
    } = {},
  ): Promise<EdgeExample> {
    const workerd = startWorkerd(script, { SESSIONS: "AgentSession", MAIL: "MailBox" }, options.persist, {
      API_TOKEN: EdgeExample.token,
      WATCHDOG_MS: String(options.watchdogMs ?? 30_000),
      MAIL_DELAY_MS: String(options.mailDelayMs ?? 20),
      ...(options.corsOrigins !== undefined && { CORS_ORIGINS: options.corsOrigins }),
      ...options.vars,
    });
    const url = await workerd.ready;
    return new EdgeExample(workerd, url.origin);
  }

  /** A request exactly as given (no token added). Miniflare's undici Response is the standard one. */
  raw(path: string, init: RequestInit = {}): Promise<Response> {
    return this.workerd.dispatchFetch(
      `http://edge.test${path}`,
      init as Parameters<Miniflare["dispatchFetch"]>[1],
    ) as unknown as Promise<Response>;
  }

  /** An authenticated request to the example's API. */
  request(
    path: string,
    init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    return this.raw(path, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: {
        authorization: `Bearer ${EdgeExample.token}`,
        ...(init.body !== undefined && { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
    });
  }

  async json<T>(path: string, init?: Parameters<EdgeExample["request"]>[1]): Promise<T> {
    const response = await this.request(path, init);
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  }

  deliveries(): Promise<{ to: string; operationId: string }[]> {
    return this.json("/mail/deliveries");
  }

  dispose(): Promise<void> {
    return this.workerd.dispose();
  }
}

/**
 * Parsed Server-Sent Events from a streaming response (with the devtools' parser), until `stop` returns
 * true or the stream ends; then the connection is dropped.
 */
export async function readEvents(
  response: { body: ReadableStream<Uint8Array> | null },
  stop: (event: { id?: string; event: string; data: string }) => boolean,
): Promise<void> {
  const body = response.body;
  if (!body) throw new Error("no event stream body");
  for await (const event of serverEvents(body)) if (stop(event)) break;
  await body.cancel().catch(() => undefined);
}

/**
 * The JS heap the user worker's isolate holds, in bytes, after a full garbage collection — through V8's
 * inspector (start the runtime with `inspectorPort`). workerd reports no heap figures itself
 * (`process.memoryUsage()` answers zeros), and its inspector does not answer `collectGarbage`; taking a heap
 * snapshot collects garbage first, so one is taken (its chunks are discarded) before the heap is read.
 */
export async function isolateHeapBytes(inspectorPort: number): Promise<number> {
  const { default: WebSocket } = await import("ws");
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as {
    title: string;
    webSocketDebuggerUrl: string;
  }[];
  const target = targets.find((t) => t.title.includes("core:user:"));
  if (!target) throw new Error("no user worker target on the inspector");
  const socket = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  let next = 0;
  const call = (method: string, params: object = {}) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const id = ++next;
      const onMessage = (data: unknown) => {
        const message = JSON.parse(String(data)) as { id?: number; result?: Record<string, unknown> };
        if (message.id !== id) return;
        socket.off("message", onMessage);
        resolve(message.result ?? {});
      };
      socket.on("message", onMessage);
      socket.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call("HeapProfiler.enable");
    await call("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
    const usage = await call("Runtime.getHeapUsage");
    return Number(usage.usedSize);
  } finally {
    socket.close();
  }
}
