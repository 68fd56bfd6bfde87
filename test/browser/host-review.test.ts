/**
 * The browser host's promises to a page, in real Chromium (two hosts in one page act as two tabs): a wait
 * settles however its Submission ended and whichever tab asks, a tab whose lock was stolen leads again once
 * it is free, and a follower's input that cannot be queued is refused with the store's typed error.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createRegistry,
  defineTask,
  InvalidArgumentError,
  indexedDbStorage,
  StorageError,
} from "../../src/index.ts";
import { BrowserSessionHost } from "../../worker/index.ts";

/** "slow" echoes wait here until the test lets them finish; "forever" ones run until they are told to stop. */
let gate: Promise<void> = Promise.resolve();
const echo = defineTask({
  kind: "echo",
  version: 1,
  input: z.object({ text: z.string() }),
  phases: {
    run: async (ctx) => {
      if (ctx.input.text === "slow") await gate;
      if (ctx.input.text === "forever")
        await new Promise((_, reject) =>
          ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)),
        );
      return ctx.complete({ echoed: ctx.input.text });
    },
  },
});
const registry = () =>
  createRegistry({
    tasks: [echo],
    submissionTask: (s) => ({ kind: "echo", input: { text: String(s.input) } }),
  });

const names = () => {
  const id = Math.random().toString(36).slice(2);
  return { database: `host-review-${id}`, sessionId: `s-${id}` };
};
const start = (n: ReturnType<typeof names>, extra: { steal?: boolean } = {}) =>
  BrowserSessionHost.start({ ...n, registry, durability: "relaxed", ...extra });

/** Polls `condition` (a role change, a copy catching up) until it holds or the loop gives up. */
async function until(condition: () => boolean): Promise<boolean> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  return condition();
}

/**
 * Starts a "slow" run that stays unfinished while more Submissions than the session keeps in memory finish:
 * the commit that ends it also takes it out of memory. `finish()` lets it end.
 */
async function slowRunOutlivingTheWorkingSet(leader: BrowserSessionHost) {
  let release!: () => void;
  gate = new Promise((resolve) => {
    release = resolve;
  });
  const slow = await leader.submit({ requestId: "slow", conversationId: "main", input: "slow" });
  for (let i = 0; i < 21; i++) {
    const quick = await leader.submit({ requestId: `q${i}`, conversationId: `c${i}`, input: `q${i}` });
    await leader.wait(quick.id);
  }
  return { slow, finish: release };
}

describe("browser host: waits", () => {
  it("settles a wait on a Submission that ends and leaves memory in one commit, in the leader and a follower tab", async () => {
    const n = names();
    const a = await start(n);
    await a.whenLeader();
    const { slow, finish } = await slowRunOutlivingTheWorkingSet(a);
    const b = await start(n);
    await until(() => b.session?.submission(slow.id) !== undefined);
    const onLeader = a.wait(slow.id);
    const onFollower = b.wait(slow.id);
    finish();
    expect((await onLeader).status).toBe("succeeded");
    expect((await onFollower).status).toBe("succeeded");
    expect(a.session?.submission(slow.id)).toBeUndefined(); // it did leave memory
    // Asked again once it ended (a page reloaded): read from storage, in either tab.
    expect((await a.wait(slow.id)).status).toBe("succeeded");
    expect((await b.wait(slow.id)).status).toBe("succeeded");
    await b.close();
    await a.close();
  }, 30_000);

  it("answers a wait after a reload from storage, and refuses an id no tab knows", async () => {
    const n = names();
    const a = await start(n);
    await a.whenLeader();
    const done = await a.submit({ requestId: "r1", conversationId: "main", input: "hi" });
    await a.wait(done.id);
    await a.close();
    const reloaded = await start(n);
    expect((await reloaded.wait(done.id)).status).toBe("succeeded");
    await expect(reloaded.wait("no-such-submission")).rejects.toBeInstanceOf(InvalidArgumentError);
    const follower = await start(n);
    await until(() => follower.session !== undefined);
    await expect(follower.wait("no-such-submission")).rejects.toBeInstanceOf(InvalidArgumentError);
    await follower.close();
    await reloaded.close();
  });

  it("cancels from a follower tab through the inbox: resolved once the cancel is committed, and the run ends cancelled", async () => {
    const n = names();
    const a = await start(n);
    await a.whenLeader();
    const run = await a.submit({ requestId: "run", conversationId: "main", input: "forever" });
    const b = await start(n);
    await until(() => b.session?.submission(run.id) !== undefined);
    const cancelled = await b.cancelSubmission(run.id, "stopped in the second tab");
    expect(cancelled.id).toBe(run.id);
    // Committed by the leader by then, with this tab's reason.
    expect(a.session?.task(run.taskId ?? "")?.cancelRequested).toBe("stopped in the second tab");
    expect((await b.wait(run.id)).status).toBe("cancelled");
    // Once it ended, a cancel changes nothing and answers with it as it ended; an unknown id is refused.
    expect((await b.cancelSubmission(run.id)).status).toBe("cancelled");
    await expect(b.cancelSubmission("no-such-submission")).rejects.toBeInstanceOf(InvalidArgumentError);
    await b.close();
    await a.close();
  });

  it("carries a wait across a role change: a follower's wait settles once it leads and the run ends", async () => {
    const n = names();
    const a = await start(n);
    await a.whenLeader();
    let release!: () => void;
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const slow = await a.submit({ requestId: "slow", conversationId: "main", input: "slow" });
    const b = await start(n);
    await until(() => b.session?.submission(slow.id) !== undefined);
    const waiting = b.wait(slow.id);
    await a.close(); // b takes the lead and resumes the run
    await b.whenLeader();
    release();
    expect((await waiting).status).toBe("succeeded");
    await b.close();
  });
});

describe("browser host: leadership", () => {
  it("leads again once the tab that stole its lock closes, and takes the input it queued while nobody led", async () => {
    const n = names();
    const a = await start(n);
    await a.whenLeader();
    const thief = await start(n, { steal: true });
    await thief.whenLeader();
    expect(await until(() => !a.isLeader)).toBe(true);
    await thief.close();
    const queued = await a.submit({ requestId: "after", conversationId: "main", input: "after" });
    expect((await a.wait(queued.id)).status).toBe("succeeded");
    expect(a.isLeader).toBe(true);
    await a.close();
  });
});

describe("browser host: a full disk", () => {
  it("leads on once space frees: the leader's own input and a follower's queued one are taken", async () => {
    const n = names();
    let full = false;
    const a = await BrowserSessionHost.start({
      ...n,
      registry,
      durability: "relaxed",
      storage: (database: string) =>
        indexedDbStorage(database, {
          durability: "relaxed",
          onWrite: () => {
            if (full) throw new DOMException("The quota has been exceeded.", "QuotaExceededError");
          },
        }),
    });
    await a.whenLeader();
    const first = await a.submit({ requestId: "r0", conversationId: "main", input: "fits" });
    expect((await a.wait(first.id)).status).toBe("succeeded");
    const b = await start(n);
    await until(() => b.session !== undefined);
    full = true;
    await expect(a.submit({ requestId: "r1", conversationId: "main", input: "x" })).rejects.toMatchObject({
      code: "quota-exceeded",
    });
    full = false; // space frees
    // The follower's input is taken by the next drain (it reopens the stopped writer), the leader's own too.
    const queued = await b.submit({ requestId: "r2", conversationId: "main", input: "after space freed" });
    expect((await b.wait(queued.id)).status).toBe("succeeded");
    const own = await a.submit({ requestId: "r3", conversationId: "main", input: "y" });
    expect((await a.wait(own.id)).status).toBe("succeeded");
    expect([a.isLeader, b.isLeader]).toEqual([true, false]);
    // What was committed before the full disk is all there.
    expect((await a.session?.readSubmissionForRequest("r0"))?.status).toBe("succeeded");
    await b.close();
    await a.close();
  }, 30_000);
});

describe("browser host: a follower's inbox", () => {
  it("refuses a follower's input a full disk cannot queue with the store's StorageError, and takes it once space frees", async () => {
    const n = names();
    const a = await start(n);
    await a.whenLeader();
    const b = await start(n);
    await until(() => b.session !== undefined);
    const put = IDBObjectStore.prototype.put;
    IDBObjectStore.prototype.put = () => {
      throw new DOMException("The quota has been exceeded.", "QuotaExceededError");
    };
    try {
      const input = { requestId: "full", conversationId: "main", input: "x" };
      const refused = await b.submit(input).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(StorageError);
      expect(refused).toMatchObject({ code: "quota-exceeded" });
    } finally {
      IDBObjectStore.prototype.put = put;
    }
    const taken = await b.submit({ requestId: "full", conversationId: "main", input: "x" });
    expect((await b.wait(taken.id)).status).toBe("succeeded");
    await b.close();
    await a.close();
  });
});
