/** Stored histories for the long-life benchmarks and tests, made without running the agent loop. */
import type { CommitRecord, Entry, Submission, Task } from "../src/index.ts";

/** The commits of `count` settled one-task Submissions in one conversation, as a live session makes them. */
export function settledHistory(count: number, from = 0): CommitRecord[] {
  return Array.from({ length: count }, (_, i) => {
    const n = from + i;
    const version = n + 1;
    const at = 1_000 + n;
    const submission: Submission = {
      id: `sub_${n}`,
      requestId: `r${n}`,
      conversationId: "main",
      status: "succeeded",
      input: `message ${n}`,
      entrySeq: n * 2,
      taskId: `task_${n}`,
      result: { echoed: `message ${n}` },
      acceptedVersion: version,
      acceptedAt: at,
      updatedAt: at,
    };
    const task: Task = {
      id: `task_${n}`,
      kind: "echo",
      kindVersion: 1,
      input: { text: `message ${n}` },
      submissionId: submission.id,
      conversationId: "main",
      state: { status: "succeeded", result: { echoed: `message ${n}` } },
      checkpoint: { phase: "run", data: null },
      attempts: 1,
      restarts: 0,
      createdVersion: version,
      createdAt: at,
      updatedAt: at,
    };
    const entries: Entry[] = [
      {
        conversationId: "main",
        seq: n * 2,
        version,
        at,
        submissionId: submission.id,
        content: { kind: "user", text: `message ${n}` },
      },
      {
        conversationId: "main",
        seq: n * 2 + 1,
        version,
        at,
        taskId: task.id,
        content: { kind: "note", text: `echo ${n}` },
      },
    ];
    return {
      version,
      epoch: 1,
      at,
      deferred: false,
      conversations: [{ id: "main", createdAt: 1_000, entryCount: n * 2 + 2 }],
      entries,
      documents: [],
      tasks: [task],
      submissions: [submission],
    };
  });
}
