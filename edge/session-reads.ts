/**
 * The session routes that only read: a Submission (by id or requestId, waiting for its end when asked), a
 * page of them, a task tree, the view (waiting for a version when asked), a page of entries, pending waits,
 * kept early signals, and the commit event stream. Each answers from the session the object has open.
 */
import { InvalidArgumentError, isSubmissionFinished, type Session, type Submission } from "../src/index.ts";
import { BUSY_RETRY_MS, type Gauge, tooManyRequests } from "./limits.ts";
import { problemResponse } from "./problem.ts";
import type { InternalRoute } from "./protocol.ts";
import { commitEventStream } from "./sse.ts";

/** The routes answered here. */
export const READ_OPS = [
  "request",
  "submissions",
  "tree",
  "submission",
  "view",
  "entries",
  "pending",
  "early-signals",
  "events",
] as const;

export type ReadRoute = Extract<InternalRoute, { op: (typeof READ_OPS)[number] }>;

export const isReadRoute = (route: InternalRoute): route is ReadRoute =>
  (READ_OPS as readonly string[]).includes(route.op);

/** Answers a read route from `session`; an event stream holds one of `streams` while it is open. */
export async function answerRead(session: Session, route: ReadRoute, streams: Gauge): Promise<Response> {
  switch (route.op) {
    case "request": {
      const submission = await session.readSubmissionForRequest(route.requestId);
      if (!submission)
        return problemResponse(404, "submission-not-found", `no submission for requestId ${route.requestId}`);
      return Response.json(submission);
    }
    case "submissions": {
      const page = await session.readSubmissions({
        limit: route.limit,
        ...(route.before !== undefined && { before: route.before }),
      });
      return Response.json(page);
    }
    case "tree": {
      return Response.json(await session.readTaskTree(route.root));
    }
    case "submission": {
      const submission = await session.readSubmission(route.submissionId);
      if (!submission) return unknownSubmission(route.submissionId);
      return Response.json(await waitForEnd(session, submission, route.waitMs));
    }
    case "view": {
      if (route.atLeast > session.version && route.waitMs > 0)
        await waitAtMost(route.waitMs, (signal) => session.waitForVersion(route.atLeast, { signal }));
      const trim = {
        ...(route.entries !== undefined && { entries: route.entries }),
        ...(route.submissions !== undefined && { submissions: route.submissions }),
        ...(route.tasks !== undefined && { tasks: route.tasks }),
        ...(route.documents !== undefined && { documents: route.documents }),
        ...(route.documentsAfter !== undefined && { documentsAfter: route.documentsAfter }),
      };
      // A weak validator: one version is one committed state, but the body also shows what memory holds
      // (a parked wait read back without a commit, waits parked while this object ran) and the trims asked.
      return Response.json(session.view(trim), { headers: { etag: `W/"v${session.version}"` } });
    }
    case "entries": {
      const conversation = session.conversation(route.conversationId);
      if (!conversation) {
        return problemResponse(
          404,
          "conversation-not-found",
          `conversation ${route.conversationId} does not exist`,
        );
      }
      const before = Math.min(route.before ?? conversation.entryCount, conversation.entryCount);
      const from = Math.max(0, before - route.limit);
      const entries = await session.readEntries(route.conversationId, from, before);
      return Response.json({ conversationId: route.conversationId, entries, next: from > 0 ? from : null });
    }
    case "pending": {
      // Waits in memory and parked ones in storage, newest first, a bounded page at a time (`next`).
      const page = {
        limit: route.limit,
        ...(route.before !== undefined && { before: route.before }),
        ...(route.prefix !== undefined && { prefix: route.prefix }),
      };
      const { waits, next, stored } = await session.readPending(page);
      return Response.json({
        version: session.version,
        pending: waits,
        parked: session.parkedInStorage,
        fromStorage: stored,
        next: next ?? null,
      });
    }
    case "early-signals": {
      const kept = session.earlySignals();
      const after = route.after ?? 0;
      const page = kept.filter((signal) => signal.version > after).slice(0, route.limit);
      const last = page.at(-1);
      const more = last !== undefined && kept.at(-1) !== last;
      return Response.json({
        version: session.version,
        count: kept.length,
        earlySignals: page,
        next: more ? last.version : null,
      });
    }
    case "events": {
      if (route.since > session.version) {
        throw new InvalidArgumentError(`since ${route.since} is ahead of the session (${session.version})`, [
          {
            path: route.sinceFromHeader ? "headers.last-event-id" : "query.since",
            message: `must be at most ${session.version}`,
          },
        ]);
      }
      const release = streams.acquire();
      if (!release) return tooManyRequests("too many open event streams on this session", BUSY_RETRY_MS);
      return commitEventStream(new Request("https://session.internal/events"), session, {
        since: route.since,
        maxStreamMs: route.maxStreamMs,
        onClose: release,
        previews: route.previews === true,
      });
    }
  }
}

export const untilAborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));

/**
 * Waits at most `ms` for `wait(signal)`; on time-out the signal aborts, so the wait releases what it holds
 * (a subscription) instead of lingering after the request has been answered. Undefined on time-out.
 */
export async function waitAtMost<T>(
  ms: number,
  wait: (signal: AbortSignal) => Promise<T>,
): Promise<T | undefined> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    return await wait(controller.signal);
  } catch (error) {
    if (controller.signal.aborted) return undefined;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** `submission` once it has ended, waiting at most `waitMs` for that; as it then stands if it has not. */
export async function waitForEnd(
  session: Session,
  submission: Submission,
  waitMs: number,
): Promise<Submission> {
  if (waitMs === 0 || isSubmissionFinished(submission)) return submission;
  const ended = await waitAtMost(waitMs, (signal) => session.wait(submission.id, { signal }));
  return ended ?? session.submission(submission.id) ?? submission;
}

/** 404 for a Submission id the session does not have. */
export function unknownSubmission(submissionId: string): Response {
  return problemResponse(404, "submission-not-found", `submission ${submissionId} does not exist`);
}
