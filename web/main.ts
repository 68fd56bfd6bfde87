/** The demo page: talks to the session worker, renders every committed entry, survives reloads. */
import type { CampaignOutput } from "../examples/five-emails/app.ts";
import { isSettledElsewhere } from "../src/errors.ts";
import type { CommitRecord, Entry, PendingWait, Preview } from "../src/index.ts";
import { connectSessionWorker, requestPersistentStorage } from "../worker/index.ts";
import { toolArgs } from "./tool-args.ts";

// ?scenario=stream shows a slowly streamed answer (reload mid-stream); the default is the five emails.
// ?mailDelay=<ms> slows the mail provider down (more time to reload, or to watch in the devtools).
const params = new URLSearchParams(location.search);
const scenario = params.get("scenario") === "stream" ? "stream" : "emails";
const mailDelay = Number(params.get("mailDelay")) || undefined;
// The campaign waits for a person to approve its plan, unless ?approval=auto (an approved plan).
const approval = params.get("approval") === "auto" ? "auto" : "ask";
const worker = new Worker(new URL("./demo.worker.ts", import.meta.url), {
  type: "module",
  name: `${scenario}:${mailDelay ?? ""}:${approval}`,
});
const client = connectSessionWorker(worker);
if (scenario === "stream") {
  // The same page, another scenario: say what it is about.
  document.title = "durable-agent demo — an answer streamed across a reload";
  (document.querySelector("#title") as HTMLElement).textContent = "An answer streamed across a reload";
  (document.querySelector("#lead") as HTMLElement).textContent =
    "The model streams a long answer slowly. Reload the tab while it streams: the text shown live is a preview, the part checkpointed before the reload is kept as an interrupted record, and the next writer asks the model again.";
  (document.querySelector("#start") as HTMLElement).textContent = "Ask for the answer";
  (document.querySelector("#devtools") as HTMLAnchorElement).href =
    "./devtools/?local=durable-agent-demo&session=stream-demo";
}
const roleBadge = document.querySelector<HTMLSpanElement>("#role") as HTMLSpanElement;
const pendingBox = document.querySelector<HTMLElement>("#pending") as HTMLElement;
const log = document.querySelector<HTMLOListElement>("#log") as HTMLOListElement;
const status = document.querySelector<HTMLDivElement>("#status") as HTMLDivElement;
const start = document.querySelector<HTMLButtonElement>("#start") as HTMLButtonElement;
const reset = document.querySelector<HTMLButtonElement>("#reset") as HTMLButtonElement;
/** How each tool call's result was obtained (`via`) and how it ended, by tool call id. */
const results = new Map<string, { via: string; outcome: string }>();
/** Each tool call's arguments, by tool call id (a failed send has no receipt naming its recipient). */
const argsOf = new Map<string, { to?: string }>();
/** Tool results of each Submission that did not simply succeed (failed, cut off, or only partly done). */
const problems = new Map<string, number>();
/** The Submission under way, as the commits so far leave it. */
let currentRun: string | undefined;
/** Each tool call's Submission, by tool call id (from its task). */
const runOf = new Map<string, string>();

/** A tool result's output as the page reads it: the campaign's report, a send's receipt or its error. */
type ToolOutput = CampaignOutput & { to?: string; error?: string };

/** The tag a tool result gets: what recovery did for it, if anything, else how it ended — as it ended. */
function resultTag(callId: string, outcome: string, output: ToolOutput): { tag: string; text: string } {
  const how = results.get(callId);
  if (outcome === "error") return { tag: "error", text: `failed: ${output.error ?? "no reason given"}` };
  if (outcome === "interrupted") return { tag: "interrupted", text: "interrupted" };
  if (outcome !== "ok") return { tag: "error", text: outcome };
  // The campaign ran, and says what it did: nothing sent is not "ok", nor is a part of the mails.
  if (output.rejected !== undefined) return { tag: "declined", text: "rejected: nothing sent" };
  if (output.expired !== undefined) return { tag: "declined", text: "not approved in time: nothing sent" };
  const { delivered, total } = output;
  if (total !== undefined && delivered !== undefined && delivered < total)
    return { tag: "error", text: `${delivered} of ${total} delivered` };
  if (how?.via === "confirm")
    return { tag: "recovered", text: "recovered: confirmed by operation id, not sent again" };
  if (how?.via === "run-after-confirm")
    return {
      tag: "recovered",
      text: "recovered: confirm found nothing, sent once under the same operation id",
    };
  if (how?.via === "replay") return { tag: "recovered", text: "recovered: re-run (safe to repeat)" };
  return { tag: "ok", text: "ok" };
}

function render(entry: Entry): void {
  const item = document.createElement("li");
  const c = entry.content;
  const kind = `<span class="kind">v${entry.version} ${c.kind}</span>`;
  let text = "";
  let tag = "";
  let tagText = "";
  switch (c.kind) {
    case "user":
    case "note":
      text = c.text;
      break;
    case "model":
      text = c.text || `calls ${c.toolCalls.map((t) => t.name).join(", ")}`;
      break;
    case "tool-result": {
      const output = (c.output ?? {}) as ToolOutput;
      const to = output.to ?? argsOf.get(c.toolCallId)?.to;
      text = `${c.toolName}${to ? ` → ${to}` : ""}`;
      const shown = resultTag(c.toolCallId, c.outcome, output);
      tag = shown.tag;
      tagText = shown.text;
      // A tool result's entry names no Submission: its task does. Counted once per call that did not end
      // ok (a campaign's "0 of 5 delivered" is a summary of its sends' problems, not one more).
      const run = entry.submissionId ?? runOf.get(c.toolCallId) ?? currentRun;
      if (run && c.outcome !== "ok") problems.set(run, (problems.get(run) ?? 0) + 1);
      break;
    }
    case "interrupted":
      text = `interrupted: ${JSON.stringify(c.partialText)}`;
      tag = "interrupted";
      tagText = "interrupted";
      break;
    case "summary":
      text = c.text;
      break;
  }
  item.innerHTML = `${kind}<span class="text"></span>${tag ? `<span class="tag ${tag}"></span>` : ""}`;
  (item.querySelector(".text") as HTMLSpanElement).textContent = text;
  const tagged = item.querySelector(".tag");
  if (tagged) tagged.textContent = tagText || tag;
  item.dataset.kind = c.kind;
  log.append(item);
}

/** The waits the session has on a person, each with its Approve / Reject buttons. */
let rendering = 0;
async function renderPending(): Promise<void> {
  const mine = ++rendering;
  const view = await client.view({ entries: 0, submissions: 0, tasks: "active" });
  if (mine !== rendering) return; // a newer change is being rendered
  const pending = view?.pending ?? [];
  pendingBox.hidden = pending.length === 0;
  pendingBox.replaceChildren(...pending.map(pendingCard));
}

function pendingCard(wait: PendingWait): HTMLElement {
  const card = document.createElement("section");
  card.className = "approval";
  card.dataset.key = wait.key;
  const about = (wait.about ?? {}) as { recipients?: string[]; body?: string; tool?: string };
  const title = document.createElement("h2");
  title.textContent = about.recipients
    ? "Approve the plan before anything is sent"
    : `Approve ${about.tool ?? wait.key}`;
  const detail = document.createElement("p");
  detail.textContent = about.recipients
    ? `“${about.body ?? ""}” to ${about.recipients.join(", ")}`
    : JSON.stringify(wait.about);
  const since = document.createElement("p");
  since.className = "kind";
  since.textContent = `waiting since ${new Date(wait.since).toLocaleTimeString()}${wait.until ? `, until ${new Date(wait.until).toLocaleTimeString()}` : ""}`;
  const decide = (approved: boolean) => async () => {
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    try {
      await client.signal(
        wait.key,
        approved ? { approved } : { approved, reason: "rejected on the demo page" },
        {
          requestId: `${wait.key}:${approved ? "approve" : "reject"}`,
        },
      );
    } catch (error) {
      since.textContent = `not delivered: ${(error as Error).message}`;
      // Decided elsewhere first: the card goes with the wait. Anything else may be asked again.
      if (!isSettledElsewhere(error))
        for (const button of card.querySelectorAll("button")) button.disabled = false;
    }
  };
  const approve = document.createElement("button");
  approve.type = "button";
  approve.className = "approve";
  approve.textContent = "Approve";
  approve.onclick = decide(true);
  const reject = document.createElement("button");
  reject.type = "button";
  reject.className = "reject";
  reject.textContent = "Reject";
  reject.onclick = decide(false);
  card.append(title, detail, since, approve, reject);
  return card;
}

/** Where a new writer took over work in flight: what is above was committed before and is reused, not redone. */
function renderTakeover(change: CommitRecord, gapMs: number): void {
  const item = document.createElement("li");
  item.className = "takeover";
  item.dataset.kind = "takeover";
  item.textContent = `A new writer took over work in flight (epoch ${change.epoch}, ${Math.round(gapMs / 100) / 10} s after the last commit): everything above was committed before and is reused, not redone.`;
  log.append(item);
}

let last: { epoch: number; at: number } | undefined;
let running = false;
/**
 * Tasks at work as the commits so far leave them: running, about to run, or ending. Not a parent waiting on
 * its children (it is at work only through a child that is), nor a task waiting for a person.
 */
const atWork = new Set<string>();

/** The model's text as it streams (a preview: not committed yet), shown last until its entry commits. */
let streaming: { key: string; text: string; item: HTMLLIElement } | undefined;

function onPreview(preview: Preview): void {
  const key = `${preview.taskId}:${preview.round}:${preview.attempt}`;
  if (streaming?.key !== key) {
    streaming?.item.remove();
    const item = document.createElement("li");
    item.className = "streaming";
    item.dataset.kind = "streaming";
    streaming = { key, text: "", item };
  }
  streaming.text = streaming.text.slice(0, preview.offset) + preview.text;
  streaming.item.textContent = `streaming, not committed yet: ${streaming.text}`;
  log.append(streaming.item);
}

function onChange(change: CommitRecord): void {
  // A takeover is told only where work was in flight: not where the last writer had finished, or waited
  // on a person (a reload then interrupts nothing).
  if (last && change.epoch !== last.epoch && atWork.size > 0) renderTakeover(change, change.at - last.at);
  last = { epoch: change.epoch, at: change.at };
  for (const task of change.tasks) {
    const status = task.state.status;
    if (status === "running" || status === "pending" || status === "completing") atWork.add(task.id);
    else atWork.delete(task.id);
    const input = task.input as { toolCallId?: unknown; args?: unknown } | null;
    if (typeof input?.toolCallId !== "string") continue;
    const args = toolArgs(task.input);
    if (args) argsOf.set(input.toolCallId, args);
    if (task.submissionId !== undefined) runOf.set(input.toolCallId, task.submissionId);
  }
  // A wait begins or ends as an ordinary task change.
  if (change.tasks.length > 0) void renderPending();
  // A tool call's task ends with how its result was obtained, in the commit that holds its result entry.
  for (const task of change.tasks) {
    const result =
      task.state.status === "succeeded"
        ? (task.state.result as { via?: unknown; outcome?: unknown })
        : undefined;
    const callId = (task.input as { toolCallId?: unknown } | null)?.toolCallId;
    if (typeof result?.via === "string" && typeof callId === "string")
      results.set(callId, { via: result.via, outcome: String(result.outcome) });
  }
  for (const entry of change.entries) render(entry);
  // The streamed text is committed now (as the answer, or as the interrupted part): its preview goes.
  if (change.entries.some((e) => e.content.kind === "model" || e.content.kind === "interrupted")) {
    streaming?.item.remove();
    streaming = undefined;
  } else if (streaming) log.append(streaming.item);
  for (const submission of change.submissions) {
    // A run whose tool calls failed, were cut off or did part of their work succeeded with problems.
    const count = problems.get(submission.id) ?? 0;
    const problemsNote = count > 0 ? ` with ${count} problem${count === 1 ? "" : "s"}` : "";
    const said =
      submission.status === "succeeded" ? `: ${(submission.result as { text?: string }).text ?? ""}` : "";
    status.textContent = `submission ${submission.status}${submission.status === "succeeded" ? problemsNote : ""}${said}`;
    status.dataset.status = submission.status;
    running = submission.status === "running" || submission.status === "accepted";
    if (running) currentRun = submission.id;
    // Ended without committing the text it streamed (cancelled, failed): its preview goes too.
    else if (streaming) {
      streaming.item.remove();
      streaming = undefined;
    }
    start.disabled = running;
  }
}

/** The input of one run. Each click is a new run with its own requestId (a retry of one click is not). */
function runInput() {
  const requestId = `${scenario}-${crypto.randomUUID()}`;
  return scenario === "stream"
    ? { requestId, conversationId: "main", input: "Explain durable execution" }
    : {
        requestId,
        conversationId: "main",
        input: "Send the approved notice to five customers and summarise",
      };
}

async function main(): Promise<void> {
  void requestPersistentStorage();
  // Clicks are taken from the start: one made while the page is still connecting runs once it is ready.
  let ready: () => void = () => undefined;
  const connected = new Promise<void>((resolve) => {
    ready = resolve;
  });
  start.addEventListener("click", async () => {
    if (running) return;
    start.disabled = true;
    running = true;
    try {
      await connected;
      const sub = await client.submit(runInput());
      status.textContent = `submission ${sub.status}`;
    } catch (error) {
      status.textContent = `not started: ${(error as Error).message}`;
      running = false;
      start.disabled = false;
    }
  });
  reset.addEventListener("click", async () => {
    if (
      !confirm("Delete this demo's session and mail log, and start over? Close the demo's other tabs first.")
    )
      return;
    reset.disabled = true;
    await client.close().catch(() => undefined);
    worker.terminate(); // its connections to both databases close with it
    const deleted = await Promise.all(
      ["durable-agent-demo", "durable-agent-demo-mail"].map(
        (name) =>
          new Promise<boolean>((resolve) => {
            const request = indexedDB.deleteDatabase(name);
            // Blocked by another tab: the deletion stays queued and happens once that tab closes.
            request.onsuccess = () => resolve(true);
            request.onerror = () => resolve(false);
            request.onblocked = () => resolve(false);
          }),
      ),
    );
    if (deleted.every(Boolean)) location.reload();
    else
      status.textContent =
        "resetting once the demo's other tabs close (they still hold it open); this tab stopped — reload it then";
  });
  // Replays everything committed so far, then live changes (and the model's text as it streams).
  await client.subscribe(0, onChange, undefined, onPreview);
  ready();
  // A follower tab works too (its input goes through the durable inbox); the role badge stays up to date.
  for (;;) {
    const role = await client.role();
    roleBadge.textContent = `this tab is the ${role}`;
    roleBadge.dataset.role = role;
    if (!status.dataset.status) status.textContent = `this tab is the ${role}`;
    if (role === "leader") break;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

void main();
