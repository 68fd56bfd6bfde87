/**
 * The linked-session page: one session held by this tab and by its edge host. Shows who leads, this tab's
 * copy of the campaign (what its IndexedDB holds), and lets the user hand the session to the edge or take
 * it back. State is also on `data-status` attributes, which the end-to-end test reads.
 */
import { type CommitRecord, HistoryTruncatedError, type Submission } from "../../src/index.ts";
import { connectSessionWorker } from "../../worker/index.ts";
import { toolArgs } from "../tool-args.ts";
import type { LinkedConfig } from "./linked.worker.ts";

const params = new URLSearchParams(location.search);
const holder =
  localStorage.getItem("durable-agent-linked-holder") ?? `browser-${crypto.randomUUID().slice(0, 8)}`;
localStorage.setItem("durable-agent-linked-holder", holder);
const config: LinkedConfig = {
  type: "linked-config",
  edge: params.get("edge") ?? "http://127.0.0.1:8787",
  token: params.get("token") ?? "dev-token",
  sessionId: params.get("session") ?? "linked-demo",
  holder: params.get("holder") ?? holder,
  takeBack: params.get("takeBack") === "when-asked" ? "when-asked" : "at-once",
};
const REQUEST_KEY = `durable-agent-linked-request:${config.sessionId}`;

const status = document.querySelector("#status") as HTMLElement;
const result = document.querySelector("#result") as HTMLElement;
const log = document.querySelector("#log") as HTMLElement;
const show = (state: string, text: string) => {
  status.dataset.status = state;
  status.textContent = text;
};

/** Shows the campaign, once the client is connected. */
let rendered: (() => Promise<void>) | undefined;
const worker = new Worker(new URL("./linked.worker.ts", import.meta.url), { type: "module" });
const ready = new Promise<void>((resolve) => {
  worker.addEventListener(
    "message",
    (event: MessageEvent<{ type: string; status?: string; error?: string }>) => {
      const message = event.data;
      if (message.type === "linked-ready") resolve();
      if (message.type !== "link-status" || !message.status) return;
      const texts: Record<string, string> = {
        leading: "this tab leads the session; the edge follows",
        fenced:
          "the edge took the session over (this tab was away past its lease); this tab follows its run live",
        released: "handed to the edge; this tab follows its run live",
        following: "the edge leads; this tab follows its run live (Take back to lead here)",
        closed: "closed",
        refused: `could not lead: ${message.error ?? "refused"}`,
      };
      show(message.status, texts[message.status] ?? message.status);
      void rendered?.();
    },
  );
});
worker.postMessage(config);
await ready;
const client = connectSessionWorker(worker);

/** The Submission accepted last (a view lists them in no particular order). */
const latest = (submissions: readonly Submission[]) =>
  submissions.reduce<Submission | undefined>(
    (last, s) => (last === undefined || (s.acceptedVersion ?? 0) > (last.acceptedVersion ?? 0) ? s : last),
    undefined,
  );

async function render(): Promise<void> {
  // The run this page started, else (a session first opened in this browser) the session's latest one.
  const requestId = localStorage.getItem(REQUEST_KEY);
  const submission = requestId
    ? await client.submissionForRequest(requestId)
    : latest((await client.view())?.submissions ?? []);
  if (!submission) return;
  result.dataset.status = submission.status;
  const text = (submission.result as { text?: string } | undefined)?.text;
  result.textContent = `${requestId ? "campaign" : "latest run"} ${submission.status}${text ? `: ${text}` : ""}`;
}

const onChange = (change: CommitRecord) => {
  for (const task of change.tasks) {
    if (task.state.status !== "succeeded" || (task.input as { name?: string }).name !== "send_email")
      continue;
    const outcome = task.state.result as {
      outcome?: string;
      via?: string;
      output?: { to?: string; error?: string };
    };
    // A send that failed ends its task too: listed as it ended, its recipient from its arguments.
    const to = outcome.output?.to ?? toolArgs(task.input)?.to ?? "?";
    const how =
      outcome.outcome === "ok"
        ? (outcome.via ?? "run")
        : `${outcome.outcome}: ${outcome.output?.error ?? "no reason given"}`;
    const li = document.createElement("li");
    li.textContent = `send_email → ${to} (${how})`;
    li.dataset.outcome = outcome.outcome ?? "ok";
    log.append(li);
  }
  void render();
};
// Every change from the first; a copy made from the edge's snapshot (a session first opened in this browser
// long after it began) keeps none before the snapshot, so it is listened to from there.
const listen = (from: number): Promise<unknown> =>
  client.subscribe(from, onChange, (error) => {
    if (error instanceof HistoryTruncatedError) void listen(error.oldestRetained - 1);
  });
await listen(0);
rendered = render;
void render();

document.querySelector("#start")?.addEventListener("click", async () => {
  const requestId = crypto.randomUUID();
  localStorage.setItem(REQUEST_KEY, requestId);
  await client.submit({
    requestId,
    conversationId: "main",
    input: "Send the approved notice to five customers",
  });
  void render();
});
document.querySelector("#handoff")?.addEventListener("click", () => void client.handOff());
document.querySelector("#takeback")?.addEventListener("click", () => void client.takeBack());
