/**
 * Follow-up messages while a turn runs (DESIGN §5): a Submission accepted while another in its conversation
 * is unfinished follows the conversation's policy — `queue` (runs after, in order), `interrupt` (the running
 * turn is cancelled durably, then it runs), `steer` (the running turn reads it before its next model round)
 * — and each survives the process dying while the follow-up waits.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type AgentOptions,
  createAgent,
  createRegistry,
  defineTool,
  type FollowUp,
  type MemoryStorage,
  type Model,
  type ModelRequest,
  type ModelResponse,
  memoryStorage,
  openSession,
  type Session,
  sequentialIds,
} from "../../src/index.ts";

/** A model the test drives: each call waits until the test answers it (or its signal aborts it). */
class PuppetModel implements Model {
  readonly id = "puppet";
  readonly calls: { request: ModelRequest; answer: (response: Partial<ModelResponse>) => void }[] = [];
  private waiters: (() => void)[] = [];
  generate(request: ModelRequest, options: { signal: AbortSignal }): Promise<ModelResponse> {
    return new Promise((resolve, reject) => {
      this.calls.push({ request, answer: (r) => resolve({ text: "", toolCalls: [], ...r }) });
      options.signal.addEventListener("abort", () => reject(options.signal.reason), { once: true });
      for (const waiter of this.waiters.splice(0)) waiter();
    });
  }
  /** Resolves once the model has been called `n` times. */
  async called(n: number): Promise<ModelRequest> {
    while (this.calls.length < n) await new Promise<void>((resolve) => this.waiters.push(resolve));
    return (this.calls[n - 1] as (typeof this.calls)[number]).request;
  }
}

const userTexts = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === "user").map((m) => m.content);

/** Each tool call's answer as providers require it: right after the call, one per call (ids in call order). */
function answers(request: ModelRequest): { call: string; outcome: string }[] {
  const found: { call: string; outcome: string }[] = [];
  request.messages.forEach((m, i) => {
    if (m.role !== "assistant") return;
    m.toolCalls.forEach((call, k) => {
      const next = request.messages[i + 1 + k];
      const outcome = next?.role === "tool" && next.toolCallId === call.id;
      found.push({ call: call.id, outcome: outcome ? JSON.parse(next.content).outcome : "missing" });
    });
  });
  return found;
}

/** What the request's answer to call `id` says (its result message, parsed). */
function answerTo(request: ModelRequest, id: string): { outcome: string; output: { error?: string } } {
  const message = request.messages.find((m) => m.role === "tool" && m.toolCallId === id);
  if (message?.role !== "tool") throw new Error(`no answer to ${id}`);
  return JSON.parse(message.content);
}

/** A tool that runs until the test opens its gate (or the call is cancelled). */
function gatedTool() {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const tool = defineTool({
    name: "lookup",
    description: "Look something up",
    input: z.object({ q: z.string() }),
    replay: "safe",
    execute: async ({ q }, { signal }) => {
      await Promise.race([gate, new Promise((_, reject) => signal.addEventListener("abort", reject))]);
      return { found: q };
    },
  });
  return { tool, open: () => open() };
}

async function open(
  storage: MemoryStorage,
  model: Model,
  followUp: FollowUp,
  tools: AgentOptions["tools"] = [gatedTool().tool],
) {
  const session = await openSession({
    id: "follow-up",
    storage,
    registry: createRegistry({ ...createAgent({ model, tools, followUp }) }),
    ids: sequentialIds(),
  });
  await session.resume();
  return session;
}

/** Resolves once `holds` is true of the session, checked after every commit. */
function until(session: Session, holds: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (holds()) return resolve();
    const stop = session.subscribe(session.version, () => {
      if (!holds()) return;
      stop();
      resolve();
    });
  });
}

/** The tool call of the conversation's turn is running (its phase started). */
const toolRunning = (session: Session) => () =>
  session.view().tasks.some((t) => t.kind === "agent.tool" && t.state.status === "running");

const say = (session: Session, requestId: string, input: string) =>
  session.submit({ requestId, conversationId: "main", input });

/** A turn asked "find the colour", whose lookup call (c1) now runs: its Submission. */
async function lookupRunning(session: Session, model: PuppetModel) {
  const first = await say(session, "a", "find the colour");
  await model.called(1);
  model.calls[0]?.answer({
    toolCalls: [{ id: "c1", name: "lookup", args: JSON.stringify({ q: "colour" }) }],
  });
  await until(session, toolRunning(session));
  return first;
}

describe("follow-up messages while a turn runs", () => {
  it("queue: the follow-up waits for the running turn, then runs with its answer in context, in order", async () => {
    const model = new PuppetModel();
    const session = await open(memoryStorage(), model, "queue");
    const first = await say(session, "a", "first question");
    await model.called(1);
    const second = await say(session, "b", "second question");
    expect(model.calls.length).toBe(1); // the follow-up has not asked the model
    const queued = session.task(second.taskId as string);
    expect(queued?.state).toMatchObject({ status: "awaiting", keys: [`turn:${first.id}`] });
    expect(session.view().pending).toEqual([]); // a queued turn waits on the kernel, not on outside input
    model.calls[0]?.answer({ text: "first answer" });
    const request = await model.called(2);
    expect(userTexts(request)).toEqual(["first question", "second question"]);
    expect(request.messages.some((m) => m.role === "assistant" && m.content === "first answer")).toBe(true);
    model.calls[1]?.answer({ text: "second answer" });
    expect((await session.wait(second.id)).status).toBe("succeeded");
    expect((await session.wait(first.id)).status).toBe("succeeded");
  });

  it("queue: a follow-up queued when the process dies starts after the earlier turn, once, on reopen", async () => {
    const storage = memoryStorage();
    const before = new PuppetModel();
    const session = await open(storage, before, "queue");
    const first = await say(session, "a", "first question");
    await before.called(1);
    const second = await say(session, "b", "second question");
    await session.close(); // dies with the first turn asking the model and the second queued
    const model = new PuppetModel();
    const reopened = await open(storage, model, "queue");
    const plan = reopened.previewRecovery();
    expect(plan.awaiting.map((a) => a.keys)).toEqual([[`turn:${first.id}`]]);
    const request = await model.called(1);
    expect(userTexts(request)).toEqual(["first question"]);
    model.calls[0]?.answer({ text: "first answer" });
    await model.called(2);
    model.calls[1]?.answer({ text: "second answer" });
    expect((await reopened.wait(second.id)).status).toBe("succeeded");
    expect(model.calls.length).toBe(2);
  });

  it("queue: a turn cancelled while queued never runs, its message leaves every later context, and the line behind it keeps its order", async () => {
    const storage = memoryStorage();
    const model = new PuppetModel();
    const session = await open(storage, model, "queue");
    const first = await say(session, "a", "first");
    await model.called(1);
    const second = await say(session, "b", "second");
    const third = await say(session, "c", "third");
    // Cancelled in the middle of the line: the one behind it now waits for the running turn.
    expect((await session.cancelSubmission(second.id)).status).toBe("cancelled");
    expect(session.task(third.taskId as string)?.state).toMatchObject({ keys: [`turn:${first.id}`] });
    // Cancelled at the end of the line: the next message still queues, behind the last one queued.
    const fourth = await say(session, "d", "fourth");
    await session.cancelSubmission(fourth.id);
    const fifth = await say(session, "e", "fifth");
    expect(session.task(fifth.taskId as string)?.state).toMatchObject({ keys: [`turn:${third.id}`] });
    expect(model.calls).toHaveLength(1); // nothing ran beside the running turn
    const conversation = session.view().conversations[0];
    expect(conversation?.withdrawn).toEqual([second.entrySeq, fourth.entrySeq]);

    await session.close(); // dies with the line as it is; the next process keeps it
    const next = new PuppetModel();
    const reopened = await open(storage, next, "queue");
    expect(userTexts(await next.called(1))).toEqual(["first"]);
    expect(next.calls).toHaveLength(1);
    next.calls[0]?.answer({ text: "first answer" });
    expect(userTexts(await next.called(2))).toEqual(["first", "third"]);
    expect(next.calls).toHaveLength(2);
    next.calls[1]?.answer({ text: "third answer" });
    expect(userTexts(await next.called(3))).toEqual(["first", "third", "fifth"]);
    next.calls[2]?.answer({ text: "fifth answer" });
    expect((await reopened.wait(fifth.id)).status).toBe("succeeded");
    // The withdrawn messages stay stored, as they were sent.
    const texts = reopened.view().conversations[0]?.entries.map((e) => (e.content as { text?: string }).text);
    expect(texts).toEqual(expect.arrayContaining(["second", "fourth"]));
    expect((await reopened.wait(second.id)).status).toBe("cancelled");
  });

  it("queue: a turn cancelled while its tool call waits for approval leaves that call answered for every later turn", async () => {
    const model = new PuppetModel();
    const send = defineTool({
      name: "send",
      description: "Send it",
      input: z.object({ q: z.string() }),
      replay: "unsafe",
      approval: true,
      execute: ({ q }) => ({ sent: q }),
    });
    const session = await open(memoryStorage(), model, "queue", [send]);
    const first = await say(session, "a", "send it");
    await model.called(1);
    model.calls[0]?.answer({ toolCalls: [{ id: "c1", name: "send", args: JSON.stringify({ q: "x" }) }] });
    await until(session, () => session.view().pending.length === 1);
    await session.cancelSubmission(first.id, "changed my mind");
    expect((await session.wait(first.id)).status).toBe("cancelled");
    await say(session, "b", "something else");
    // It never ran (it waited for approval): the call says so, in the commit that ended it.
    const stored = session.view().conversations[0]?.entries.find((e) => e.content.kind === "tool-result");
    expect(stored?.content).toMatchObject({ toolCallId: "c1", outcome: "not-run" });
    const request = await model.called(2);
    expect(answers(request)).toEqual([{ call: "c1", outcome: "not-run" }]);
    expect(answerTo(request, "c1").output.error).toContain("cancelled before it ran (changed my mind)");
    expect(userTexts(request)).toEqual(["send it", "something else"]);
  });

  it("interrupt: the running turn is cancelled in the commit that accepts the follow-up, which then runs", async () => {
    const storage = memoryStorage();
    const model = new PuppetModel();
    const { tool } = gatedTool();
    const session = await open(storage, model, "interrupt", [tool]);
    const first = await say(session, "a", "look it up");
    await model.called(1);
    model.calls[0]?.answer({ toolCalls: [{ id: "c1", name: "lookup", args: JSON.stringify({ q: "x" }) }] });
    await until(session, toolRunning(session)); // the lookup runs (its gate stays shut)
    const versionBefore = session.version;
    const second = await say(session, "b", "never mind, do this instead");
    // The interruption is durable: its intent is in the same commit as the follow-up.
    const { changes } = await session.readChanges(versionBefore);
    const accepted = changes.find((c) => c.submissions.some((s) => s.id === second.id));
    expect(accepted?.tasks.find((t) => t.id === first.taskId)?.cancelRequested).toContain("interrupted");
    expect((await session.wait(first.id)).status).toBe("cancelled");
    const request = await model.called(2);
    expect(userTexts(request)).toContain("never mind, do this instead");
    // The interrupted call is answered (a provider refuses one left open): it was running, and is safe to
    // call again, so an error that says so (an unsafe one would be unknown).
    expect(answers(request)).toEqual([{ call: "c1", outcome: "error" }]);
    expect(answerTo(request, "c1").output.error).toMatch(/cancelled while it ran .*safe to call again/);
    model.calls[1]?.answer({ text: "done instead" });
    expect((await session.wait(second.id)).status).toBe("succeeded");
    // What the interrupted turn committed stays: its model response is still in the conversation.
    const kinds = session.view().conversations[0]?.entries.map((e) => e.content.kind);
    expect(kinds?.filter((k) => k === "model").length).toBe(2);
  });

  it("interrupt: a Submission accepted already cancelled (given again after a rebuild) interrupts nothing and never runs", async () => {
    const model = new PuppetModel();
    const session = await open(memoryStorage(), model, "interrupt");
    const first = await say(session, "a", "first question");
    await model.called(1);
    const versionBefore = session.version;
    const given = { requestId: "b", conversationId: "main", input: "regretted offline" };
    const regretted = await session.submit(given, { cancelled: "sent by mistake" });
    // One commit: the Submission and its root task, both already ended; the running turn untouched.
    const { changes } = await session.readChanges(versionBefore);
    expect(changes).toHaveLength(1);
    expect(changes[0]?.submissions.map((s) => s.status)).toEqual(["cancelled"]);
    expect(changes[0]?.tasks.map((t) => [t.id, t.state.status])).toEqual([[regretted.taskId, "cancelled"]]);
    expect(session.task(first.taskId as string)?.cancelRequested).toBeUndefined();
    // Given again, it is returned as it is.
    expect((await session.submit(given)).status).toBe("cancelled");

    model.calls[0]?.answer({ text: "first answer" });
    expect((await session.wait(first.id)).status).toBe("succeeded");
    // The model was asked once, for the first turn only; the regretted message is in the conversation.
    expect(model.calls).toHaveLength(1);
    const texts = session.view().conversations[0]?.entries.map((e) => (e.content as { text?: string }).text);
    expect(texts).toContain("regretted offline");
    // Given again cancelled, one the session has unfinished is cancelled now.
    const third = await say(session, "c", "third question");
    // Its turn never started: no later context reads it.
    expect(userTexts(await model.called(2))).toEqual(["first question", "third question"]);
    const cancelled = await session.submit(
      { requestId: "c", conversationId: "main", input: "x" },
      { cancelled: "stop" },
    );
    expect(cancelled.id).toBe(third.id);
    expect((await session.wait(third.id)).status).toBe("cancelled");
  });

  it("interrupt: the interruption survives the process dying before the running turn winds down", async () => {
    const storage = memoryStorage();
    const model = new PuppetModel();
    const session = await open(storage, model, "interrupt");
    const first = await say(session, "a", "first");
    await model.called(1);
    const second = await say(session, "b", "second");
    await session.close(); // dies right after the interrupting commit
    const next = new PuppetModel();
    const reopened = await open(storage, next, "interrupt");
    expect((await reopened.wait(first.id)).status).toBe("cancelled");
    const request = await next.called(1);
    expect(userTexts(request)).toEqual(["first", "second"]);
    next.calls[0]?.answer({ text: "second answer" });
    expect((await reopened.wait(second.id)).status).toBe("succeeded");
    expect(next.calls.length).toBe(1); // the interrupted turn never asked again
  });

  it("interrupt: a second follow-up before the interrupted turn winds down withdraws the first and waits for the running turn", async () => {
    const storage = memoryStorage();
    const model = new PuppetModel();
    let release: () => void = () => undefined;
    const slow = defineTool({
      name: "lookup",
      description: "Look something up, and finish even when asked to stop",
      input: z.object({ q: z.string() }),
      replay: "safe",
      execute: ({ q }) => new Promise((resolve) => (release = () => resolve({ found: q }))),
    });
    const session = await open(storage, model, "interrupt", [slow]);
    const first = await say(session, "a", "look it up");
    await model.called(1);
    model.calls[0]?.answer({ toolCalls: [{ id: "c1", name: "lookup", args: JSON.stringify({ q: "x" }) }] });
    await until(session, toolRunning(session));
    const second = await say(session, "b", "no, this");
    const third = await say(session, "c", "no, rather this");
    // The queued one ended at once and its message is withdrawn; the newest waits for the running turn.
    expect((await session.wait(second.id)).status).toBe("cancelled");
    expect(session.task(third.taskId as string)?.state).toMatchObject({ keys: [`turn:${first.id}`] });
    expect(model.calls).toHaveLength(1);
    release();
    expect((await session.wait(first.id)).status).toBe("cancelled");
    const request = await model.called(2);
    expect(userTexts(request)).toEqual(["look it up", "no, rather this"]);
    model.calls[1]?.answer({ text: "did it" });
    expect((await session.wait(third.id)).status).toBe("succeeded");
    expect(model.calls).toHaveLength(2);
  });

  it("interrupt: after a restart, the interrupted turn's tool call starts already told to stop, and the follow-up runs", async () => {
    const storage = memoryStorage();
    const seen: boolean[] = []; // whether each run of the tool was told to stop when it started
    let stubborn = true; // the first process's run ignores its signal (a write it must finish)
    const lookup = defineTool({
      name: "lookup",
      description: "Look something up",
      input: z.object({ q: z.string() }),
      replay: "safe",
      execute: async (_input, { signal }) => {
        seen.push(signal.aborted);
        if (stubborn) await new Promise(() => undefined);
        if (signal.aborted) throw signal.reason;
        return await new Promise<never>((_, reject) => signal.addEventListener("abort", reject));
      },
    });
    const model = new PuppetModel();
    const session = await open(storage, model, "interrupt", [lookup]);
    const first = await say(session, "a", "look it up");
    await model.called(1);
    model.calls[0]?.answer({ toolCalls: [{ id: "c1", name: "lookup", args: JSON.stringify({ q: "x" }) }] });
    await until(session, toolRunning(session));
    const second = await say(session, "b", "stop, do this instead");
    await session.close(); // dies while the interrupted call still runs
    stubborn = false;
    const next = new PuppetModel();
    const reopened = await open(storage, next, "interrupt", [lookup]);
    const request = await next.called(1); // hangs without the fix: the re-run call never learns of its cancel
    expect(seen).toEqual([false, true]);
    expect(userTexts(request)).toEqual(["look it up", "stop, do this instead"]);
    next.calls[0]?.answer({ text: "done instead" });
    expect((await reopened.wait(second.id)).status).toBe("succeeded");
    expect((await reopened.wait(first.id)).status).toBe("cancelled");
  });

  it("a Submission the app starts no turn for takes no place in its conversation's line", async () => {
    const model = new PuppetModel();
    const agent = createAgent({ model, tools: [] });
    const session = await openSession({
      id: "notes",
      storage: memoryStorage(),
      ids: sequentialIds(),
      registry: createRegistry({
        ...agent,
        submissionTask: (s) => (s.input === "just a note" ? undefined : agent.submissionTask?.(s)),
      }),
    });
    await session.resume();
    const note = await say(session, "n", "just a note");
    expect(note.status).toBe("accepted"); // the app's to handle: it never ends on its own
    const asked = await say(session, "q", "hello");
    expect(userTexts(await model.called(1))).toEqual(["just a note", "hello"]);
    model.calls[0]?.answer({ text: "hi" });
    expect((await session.wait(asked.id)).status).toBe("succeeded");
  });

  it("steer: the running turn reads the message before its next round; the follow-up finds it answered", async () => {
    const storage = memoryStorage();
    const model = new PuppetModel();
    const { tool, open: openGate } = gatedTool();
    const session = await open(storage, model, "steer", [tool]);
    const first = await lookupRunning(session, model);
    const second = await say(session, "b", "and make it blue");
    await session.close(); // dies while the steering message waits; the next process goes on
    const next = new PuppetModel();
    const reopened = await open(storage, next, "steer", [tool]);
    openGate();
    const round2 = await next.called(1);
    expect(userTexts(round2)).toEqual(["find the colour", "and make it blue"]);
    // The steering message is stored between the call and its result; the result still follows the call.
    expect(answers(round2)).toEqual([{ call: "c1", outcome: "ok" }]);
    next.calls[0]?.answer({ text: "found it, and it is blue now" });
    const done = await reopened.wait(second.id);
    expect(done.status).toBe("succeeded");
    expect((done.result as { text: string }).text).toBe("found it, and it is blue now");
    expect((await reopened.wait(first.id)).status).toBe("succeeded");
    expect(next.calls.length).toBe(1); // answered once, by the running turn
  });

  it("steer: a message cancelled before the running turn read it is never read, by that turn or later ones", async () => {
    const model = new PuppetModel();
    const { tool, open: openGate } = gatedTool();
    const session = await open(memoryStorage(), model, "steer", [tool]);
    const first = await lookupRunning(session, model);
    const second = await say(session, "b", "and make it blue");
    expect((await session.cancelSubmission(second.id)).status).toBe("cancelled");
    openGate();
    expect(userTexts(await model.called(2))).toEqual(["find the colour"]);
    model.calls[1]?.answer({ text: "it is red" });
    expect((await session.wait(first.id)).status).toBe("succeeded");
    await say(session, "c", "thanks");
    expect(userTexts(await model.called(3))).toEqual(["find the colour", "thanks"]);
  });

  it("steer: a message the running turn read and acted on stays in later contexts though cancelled (its answer keeps its question)", async () => {
    const model = new PuppetModel();
    const lookup = gatedTool();
    const paint = defineTool({
      name: "paint",
      description: "Paint it",
      input: z.object({ colour: z.string() }),
      replay: "safe",
      execute: ({ colour }, { signal }) =>
        new Promise((resolve, reject) => {
          signal.addEventListener("abort", reject);
          if (colour === "red") resolve({ painted: colour });
        }),
    });
    const session = await open(memoryStorage(), model, "steer", [lookup.tool, paint]);
    const first = await lookupRunning(session, model);
    const second = await say(session, "b", "and make it blue");
    lookup.open();
    expect(userTexts(await model.called(2))).toEqual(["find the colour", "and make it blue"]);
    const paintBlue = { id: "c2", name: "paint", args: JSON.stringify({ colour: "blue" }) };
    model.calls[1]?.answer({ text: "painting it blue", toolCalls: [paintBlue] });
    await until(session, toolRunning(session));
    // The steering message is cancelled after the running turn read it: what answered it keeps it.
    await session.cancelSubmission(second.id, "regret");
    await session.cancelSubmission(first.id, "stop everything");
    expect((await session.wait(first.id)).status).toBe("cancelled");
    const third = await say(session, "c", "what colour is it?");
    const request = await model.called(3);
    expect(userTexts(request)).toEqual(["find the colour", "and make it blue", "what colour is it?"]);
    expect(answers(request)).toEqual([
      { call: "c1", outcome: "ok" },
      { call: "c2", outcome: "error" },
    ]);
    expect(answerTo(request, "c2").output.error).toMatch(/cancelled while it ran \(stop everything\)/);
    model.calls[2]?.answer({ text: "not painted yet" });
    expect((await session.wait(third.id)).status).toBe("succeeded");
  });

  it("steer: a follow-up the running turn read before it was cancelled mid-work runs its own turn (no half-done answer)", async () => {
    const model = new PuppetModel();
    const lookup = gatedTool();
    const session = await open(memoryStorage(), model, "steer", [lookup.tool]);
    const first = await lookupRunning(session, model);
    const second = await say(session, "b", "then look up its price");
    lookup.open();
    expect(userTexts(await model.called(2))).toEqual(["find the colour", "then look up its price"]);
    const price = { id: "c2", name: "lookup", args: JSON.stringify({ q: "price" }) };
    model.calls[1]?.answer({ text: "looking up the price", toolCalls: [price] });
    await until(session, toolRunning(session));
    await session.cancelSubmission(first.id, "stop that");
    expect((await session.wait(first.id)).status).toBe("cancelled");
    // Its own turn runs: the cancelled turn's promise ("looking up the price") is not its answer.
    const request = await model.called(3);
    expect(userTexts(request)).toEqual(["find the colour", "then look up its price"]);
    model.calls[2]?.answer({ text: "the price is 3" });
    const done = await session.wait(second.id);
    expect(done).toMatchObject({ status: "succeeded", result: { text: "the price is 3" } });
  });

  it("queue: however many queued turns are cancelled, none of their messages comes back", async () => {
    const model = new PuppetModel();
    const session = await open(memoryStorage(), model, "queue", []);
    const first = await say(session, "a", "first");
    await model.called(1);
    for (let i = 0; i < 80; i++)
      await session.cancelSubmission((await say(session, `q${i}`, `regretted ${i}`)).id);
    model.calls[0]?.answer({ text: "first answer" });
    await session.wait(first.id);
    await say(session, "z", "last");
    expect(userTexts(await model.called(2))).toEqual(["first", "last"]);
  });

  it("steer: a message that arrived after the turn's last request gets a turn of its own", async () => {
    const model = new PuppetModel();
    const session = await open(memoryStorage(), model, "steer");
    await say(session, "a", "first");
    await model.called(1);
    const second = await say(session, "b", "too late for that request");
    model.calls[0]?.answer({ text: "first answer" });
    const request = await model.called(2);
    expect(userTexts(request)).toEqual(["first", "too late for that request"]);
    model.calls[1]?.answer({ text: "second answer" });
    expect(((await session.wait(second.id)).result as { text: string }).text).toBe("second answer");
  });

  it("refuses outside signals for the kernel's turn keys", async () => {
    const model = new PuppetModel();
    const session = await open(memoryStorage(), model, "queue");
    const first = await say(session, "a", "first");
    await model.called(1);
    await say(session, "b", "second");
    await expect(session.signal(`turn:${first.id}`, {}, { requestId: "x" })).rejects.toMatchObject({
      code: "unknown-signal",
    });
  });
});
