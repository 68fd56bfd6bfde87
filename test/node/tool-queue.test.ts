/**
 * Tool calls that must not overlap: an exclusive tool's (or group's) calls of one model response run one
 * after another, in the model's order, while other calls run alongside; a sequential agent runs every call
 * one at a time. The calls still to start live in the turn's checkpoint: a process killed after any commit
 * leaves a run that finishes with each call answered once, in order, never two of a group at once.
 */

import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type CommitGuard,
  type CommitRecord,
  createAgent,
  createRegistry,
  defineTool,
  type MemoryStorage,
  memoryStorage,
  openSession,
  scriptedModel,
  type ToolDefinition,
} from "../../src/index.ts";
import { KillableStorage } from "../support/storage-wrappers.ts";

/** Tools that log when each call starts and ends, and take a few macrotasks to finish. */
function loggingTools(exclusive: Record<string, boolean | string | undefined>) {
  const log: string[] = [];
  const tools = Object.entries(exclusive).map(([name, group]) =>
    defineTool({
      name,
      description: name,
      input: z.object({ n: z.number() }),
      replay: "safe",
      ...(group !== undefined && { exclusive: group }),
      execute: async ({ n }) => {
        log.push(`start ${name}${n}`);
        for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
        log.push(`end ${name}${n}`);
        return { n };
      },
    }),
  );
  return { log, tools: tools as ToolDefinition<unknown>[] };
}

const calls = (...names: string[]) =>
  scriptedModel([
    { toolCalls: names.map((name, n) => ({ name: name.replace(/\d+$/, ""), args: { n } })) },
    // An async turn: the final answer lists the results in the order the model received them.
    async (request) => ({
      text: request.messages
        .filter((m) => m.role === "tool")
        .map((m) => (m.role === "tool" ? m.toolName : ""))
        .join(","),
    }),
  ]);

/** Kills the process (its store handle) right after its `killAt`-th commit. */
class KillAfter extends KillableStorage {
  commits = 0;
  constructor(
    inner: MemoryStorage,
    private readonly killAt: number,
  ) {
    super(inner);
  }
  override async commit(guard: CommitGuard, commits: readonly CommitRecord[]): Promise<void> {
    await super.commit(guard, commits);
    if (++this.commits === this.killAt) this.kill();
  }
}

async function run(options: {
  exclusive: Record<string, boolean | string | undefined>;
  names: string[];
  sequential?: boolean;
  killAt?: number;
}) {
  const { log, tools } = loggingTools(options.exclusive);
  const registry = () =>
    createRegistry({
      ...createAgent({
        model: calls(...options.names),
        tools,
        ...(options.sequential && { toolCalls: "sequential" as const }),
      }),
    });
  const disk = memoryStorage();
  const first = new KillAfter(disk.reopen(), options.killAt ?? Number.POSITIVE_INFINITY);
  let session = await openSession({ id: "q", storage: first, registry: registry() });
  await session.resume();
  const sub = await session.submit({ requestId: "r", conversationId: "c", input: "go" });
  let done = await session.wait(sub.id).catch(() => undefined);
  const reopened = !done;
  if (!done) {
    await session.whenIdle().catch(() => undefined);
    session = await openSession({ id: "q", storage: disk.reopen(), registry: registry() });
    await session.resume();
    done = await session.wait(sub.id);
  }
  const text = (done.result as { text?: string } | undefined)?.text ?? "";
  const results =
    session.view().conversations[0]?.entries.filter((e) => e.content.kind === "tool-result") ?? [];
  await session.close();
  return { log, status: done.status, text, results, commits: first.commits, reopened };
}

/** The calls running at once, at their busiest, among those named. */
function overlap(log: readonly string[], names: readonly string[]): number {
  let running = 0;
  let most = 0;
  for (const line of log) {
    const [what, call] = line.split(" ");
    if (!names.some((name) => call?.startsWith(name))) continue;
    running += what === "start" ? 1 : -1;
    most = Math.max(most, running);
  }
  return most;
}

describe("exclusive and sequential tool calls", () => {
  it("runs a response's calls in parallel by default", async () => {
    const { log, status } = await run({ exclusive: { a: undefined }, names: ["a", "a", "a"] });
    expect(status).toBe("succeeded");
    expect(overlap(log, ["a"])).toBe(3);
  });

  it("runs an exclusive group's calls one after another, in order, alongside the others", async () => {
    const { log, status, text } = await run({
      exclusive: { read: "files", write: "files", fetch: undefined },
      names: ["write", "fetch", "read", "write"],
    });
    expect(status).toBe("succeeded");
    expect(overlap(log, ["read", "write"])).toBe(1);
    const files = log.filter((line) => /(read|write)/.test(line));
    expect(files).toEqual([
      "start write0",
      "end write0",
      "start read2",
      "end read2",
      "start write3",
      "end write3",
    ]);
    // The unrelated call ran while the group's first did.
    expect(log.indexOf("start fetch1")).toBeLessThan(log.indexOf("end write0"));
    expect(text.split(",").sort()).toEqual(["fetch", "read", "write", "write"]);
  });

  it("runs every call one at a time in a sequential agent", async () => {
    const { log, status } = await run({
      exclusive: { a: undefined, b: undefined },
      names: ["a", "b", "a"],
      sequential: true,
    });
    expect(status).toBe("succeeded");
    expect(log).toEqual(["start a0", "end a0", "start b1", "end b1", "start a2", "end a2"]);
  });

  it("killed after any commit, still answers each call once, in order, one at a time", async () => {
    const whole = await run({ exclusive: { a: true }, names: ["a", "a", "a"] });
    expect(whole.commits).toBeGreaterThan(5);
    for (let killAt = 1; killAt < whole.commits; killAt++) {
      const { log, status, results, reopened } = await run({
        exclusive: { a: true },
        names: ["a", "a", "a"],
        killAt,
      });
      expect(reopened, `killed after commit ${killAt}: a second process finished it`).toBe(true);
      expect(status, `killed after commit ${killAt}`).toBe("succeeded");
      expect(overlap(log, ["a"])).toBe(1);
      // One result per call, in the model's order, whatever the dead process had started.
      expect(results.map((e) => (e.content.kind === "tool-result" ? e.content.toolCallId : ""))).toEqual([
        "call_0_0",
        "call_0_1",
        "call_0_2",
      ]);
    }
  });

  it("never runs an exclusive tool's calls at once across conversations running at the same time", async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    const write = defineTool({
      name: "write_file",
      description: "Writes the shared file",
      input: z.object({ n: z.number() }),
      replay: "safe",
      exclusive: true,
      execute: async ({ n }) => {
        running += 1;
        most = Math.max(most, running);
        for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
        running -= 1;
        done.push(n);
        return { n };
      },
    });
    const model = scriptedModel([
      (request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: "written" }
          : {
              toolCalls: [{ name: "write_file", args: { n: Number(request.messages.at(-1)?.content ?? 0) } }],
            },
    ]);
    const session = await openSession({
      id: "exclusive-across",
      storage: memoryStorage(),
      registry: createRegistry({ ...createAgent({ model, tools: [write] }) }),
    });
    await session.resume();
    // Three conversations at once: their turns run concurrently, each calling the tool once.
    const subs = await Promise.all(
      [1, 2, 3].map((n) => session.submit({ requestId: `r${n}`, conversationId: `c${n}`, input: String(n) })),
    );
    const ended = await Promise.all(subs.map((sub) => session.wait(sub.id)));
    expect(ended.map((s) => s.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    expect([...done].sort()).toEqual([1, 2, 3]);
    expect(most).toBe(1);
    await session.close();
  });
});
