/** The writer line: who drives a session's open work, and whether any waits for a writer. */
import { isSubmissionFinished, isTerminal, type SessionView } from "../../src/index.ts";
import { formatTime } from "./derive.ts";
import type { WriterState } from "./session-source.ts";
import { counted } from "./words.ts";

/**
 * The session's open work at its latest version: unfinished tasks, open Submissions, parked waits in
 * storage — as words ("2 unfinished tasks, 1 open submission"), or undefined when there is none.
 */
export function openWork(latest: SessionView, parked: number): string | undefined {
  const tasks = latest.tasks.filter((t) => !isTerminal(t)).length;
  const submissions = latest.submissions.filter((s) => !isSubmissionFinished(s)).length;
  const parts = [
    tasks > 0 ? counted(tasks, "unfinished task") : undefined,
    submissions > 0 ? counted(submissions, "open submission") : undefined,
    parked > 0 ? counted(parked, "parked wait") : undefined,
  ].filter((part) => part !== undefined);
  return parts.length > 0 ? parts.join(", ") : undefined;
}

/**
 * What the writer line says: who drives the session's open work, and since or until when. With no tab
 * leading, it says open work waits only when there is some (`open`).
 */
export function writerText(writer: WriterState, since: number, open: string | undefined): string {
  const clock = (at: number) => formatTime(at).slice(11, 19);
  switch (writer.state) {
    case "leading":
      return "a tab leads this session";
    case "none":
      return open
        ? `no tab leads this session since ${clock(since)}: its open work (${open}) waits until one does`
        : `no tab leads this session since ${clock(since)}; nothing in it is unfinished, so nothing waits for one`;
    case "edge":
      return "its Durable Object writes this session: the alarm wakes open work with no request";
    case "tab":
      return `a linked tab leads this session; its lease runs until ${clock(writer.leaseUntil)}`;
    case "lapsed":
      return `the linked tab's lease ran out at ${clock(writer.leaseUntil)}: the edge takes over on its alarm`;
  }
}
