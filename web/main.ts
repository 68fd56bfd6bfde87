/** The demo page: talks to the session worker, renders every committed entry, survives reloads. */
import type { CommitRecord, Entry, PendingWait } from "../src/index.ts";
import { connectSessionWorker, requestPersistentStorage } from "../worker/index.ts";

// ?scenario=stream shows a slowly streamed answer (reload mid-stream); the default is the five emails.
// ?mailDelay=<ms> slows the mail provider down (more time to reload, or to watch in the devtools).
const params = new URLSearchParams(location.search);
const scenario = params.get("scenario") === "stream" ? "stream" : "emails";
const mailDelay = Number(params.get("mailDelay")) || undefined;
// The campaign waits for a person to approve its plan, unless ?approval=auto (an approved plan).
const approval = params.get("approval") === "auto" ? "auto" : "ask";
const client = connectSessionWorker(
  new Worker(new URL("./demo.worker.ts", import.meta.url), {
    type: "module",
    name: `${scenario}:${mailDelay ?? ""}:${approval}`,
  }),
);
const roleBadge = document.querySelector<HTMLSpanElement>("#role") as HTMLSpanElement;
const pendingBox = document.querySelector<HTMLElement>("#pending") as HTMLElement;
const log = document.querySelector<HTMLOListElement>("#log") as HTMLOListElement;
const status = document.querySelector<HTMLDivElement>("#status") as HTMLDivElement;
const start = document.querySelector<HTMLButtonElement>("#start") as HTMLButtonElement;
/** Tool calls whose result was confirmed by operation id after a crash (not run again). */
const recoveredRuns = new Set<string>();

function render(entry: Entry): void {
  const item = document.createElement("li");
  const c = entry.content;
  const kind = `<span class="kind">v${entry.version} ${c.kind}</span>`;
  let text = "";
  let tag = "";
  switch (c.kind) {
    case "user":
    case "note":
      text = c.text;
      break;
    case "model":
      text = c.text || `calls ${c.toolCalls.map((t) => t.name).join(", ")}`;
      break;
    case "tool-result": {
      const output = c.output as { to?: string; error?: string };
      text = `${c.toolName}${output.to ? ` → ${output.to}` : ""}`;
      tag =
        c.outcome === "interrupted"
          ? "interrupted"
          : recoveredRuns.has(c.toolCallId)
            ? "recovered"
            : c.outcome === "ok"
              ? "ok"
              : "error";
      break;
    }
    case "interrupted":
      text = `interrupted: ${JSON.stringify(c.partialText)}`;
      tag = "interrupted";
      break;
    case "summary":
      text = c.text;
      break;
  }
  item.innerHTML = `${kind}<span class="text"></span>${tag ? `<span class="tag ${tag}">${tag === "recovered" ? "recovered (confirmed by operation id)" : tag}</span>` : ""}`;
  (item.querySelector(".text") as HTMLSpanElement).textContent = text;
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

function onChange(change: CommitRecord): void {
  // A wait begins or ends as an ordinary task change.
  if (change.tasks.length > 0) void renderPending();
  // A tool call's task ends with how its result was obtained, in the commit that holds its result entry.
  for (const task of change.tasks) {
    const result = task.state.status === "succeeded" ? (task.state.result as { via?: unknown }) : undefined;
    const callId = (task.input as { toolCallId?: unknown } | null)?.toolCallId;
    if (result?.via === "confirm" && typeof callId === "string") recoveredRuns.add(callId);
  }
  for (const entry of change.entries) render(entry);
  for (const submission of change.submissions) {
    status.textContent = `submission ${submission.status}${submission.status === "succeeded" ? `: ${(submission.result as { text?: string }).text ?? ""}` : ""}`;
    status.dataset.status = submission.status;
    start.disabled = submission.status === "running" || submission.status === "accepted";
  }
}

async function main(): Promise<void> {
  void requestPersistentStorage();
  await client.subscribe(0, onChange); // replays everything committed so far, then live changes
  start.addEventListener("click", async () => {
    start.disabled = true;
    const sub = await client.submit(
      scenario === "stream"
        ? { requestId: "stream-1", conversationId: "main", input: "Explain durable execution" }
        : {
            requestId: "notice-1",
            conversationId: "main",
            input: "Send the approved notice to five customers and summarise",
          },
    );
    status.textContent = `submission ${sub.status}`;
  });
  // A follower tab works too (its input goes through the durable inbox); show the role until this tab leads.
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
