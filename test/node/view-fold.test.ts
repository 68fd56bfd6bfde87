/**
 * Folding the change log into views (what SSE clients and the devtools do): the fold of every committed
 * change equals the live session's view, scrubbing through checkpoints equals a plain fold, and a gap or a
 * repeated change is refused.
 */
import { describe, expect, it } from "vitest";
import { benchRegistry, commitStep } from "../../bench/workload.ts";
import {
  applyChangeToView,
  type CommitRecord,
  emptyView,
  InvalidArgumentError,
  memoryStorage,
  openSession,
  type SessionView,
  sequentialIds,
} from "../../src/index.ts";
import { SessionHistory } from "../../web/devtools/history.ts";

async function recordedSession(steps: number) {
  const session = await openSession({
    id: "fold",
    storage: memoryStorage(),
    registry: benchRegistry,
    ids: sequentialIds(),
  });
  await session.submit({ requestId: "r1", conversationId: "main", input: "hello" });
  for (let i = 0; i < steps; i++) await commitStep(session, i);
  const changes: CommitRecord[] = [];
  for (let after = 0; ; ) {
    const page = (await session.readChanges(after, 100)).changes;
    if (page.length === 0) break;
    changes.push(...page);
    after = page.at(-1)?.version ?? after;
  }
  return { session, changes };
}

describe("folding changes into views", () => {
  it("folds the whole change log into exactly the session's view", async () => {
    const { session, changes } = await recordedSession(150);
    const folded = changes.reduce(applyChangeToView, emptyView("fold"));
    expect(folded).toEqual(session.view());
  });

  it("scrubs to any version through checkpoints with the same result as a plain fold", async () => {
    const { changes } = await recordedSession(300);
    const history = new SessionHistory(emptyView("fold"));
    history.append(changes.slice(0, 120));
    history.append(changes.slice(100)); // overlapping delivery: repeats are skipped
    expect(history.latest.version).toBe(changes.length);
    let plain: SessionView = emptyView("fold");
    const expected = new Map<number, SessionView>([[0, plain]]);
    for (const change of changes) {
      plain = applyChangeToView(plain, change);
      expected.set(change.version, plain);
    }
    for (const version of [0, 1, 2, 63, 64, 65, 127, 128, 200, changes.length - 1, changes.length])
      expect(history.viewAt(version)).toEqual(expected.get(version));
    const progress = history.documentVersions("progress");
    expect(progress).toHaveLength(300);
    expect(history.viewAt(progress[10]?.version ?? 0).documents[0]?.value).toMatchObject({ step: 10 });
  });

  it("refuses a gap and a repeated change", async () => {
    const { changes } = await recordedSession(3);
    const [first, second, third] = changes as [CommitRecord, CommitRecord, CommitRecord];
    const view = applyChangeToView(emptyView("fold"), first);
    expect(() => applyChangeToView(view, third)).toThrow(InvalidArgumentError);
    expect(() => applyChangeToView(applyChangeToView(view, second), second)).toThrow(/does not follow/);
  });
});

describe("views trimmed for display", () => {
  it("keeps the latest entries and Submissions and only unfinished tasks; refuses a negative count", async () => {
    const { session } = await recordedSession(4);
    await session.submit({ requestId: "r2", conversationId: "main", input: "again" });
    const full = session.view();
    const main = full.conversations.find((c) => c.id === "main");
    const trimmed = session.view({ entries: 2, submissions: 1, tasks: "active" });
    expect(trimmed.conversations.find((c) => c.id === "main")?.entries).toEqual(main?.entries.slice(-2));
    expect(trimmed.submissions.map((s) => s.requestId)).toEqual(["r2"]);
    expect(trimmed.documents).toEqual(full.documents);
    expect(
      session.view({ entries: 0, submissions: 0 }).conversations.every((c) => c.entries.length === 0),
    ).toBe(true);
    expect(() => session.view({ entries: -1 })).toThrow(InvalidArgumentError);
    expect(() => session.view({ submissions: 1.5 })).toThrow(/submissions must be a non-negative integer/);
  });

  it("pages a session's documents: pages in id order that together are exactly the full list", async () => {
    const session = await openSession({ id: "docs", storage: memoryStorage(), ids: sequentialIds() });
    for (let i = 0; i < 1_000; i += 100)
      await session.commit((d) => {
        for (let j = i; j < i + 100; j++)
          d.setDocument(`customer-${String(j).padStart(4, "0")}`, "note", { n: j });
      });
    const full = session.view().documents;
    expect(full.length).toBe(1_000);
    const pages: (typeof full)[] = [];
    for (let after: string | undefined; ; ) {
      const page = session.view({
        documents: 128,
        ...(after !== undefined && { documentsAfter: after }),
      }).documents;
      if (page.length === 0) break;
      pages.push(page);
      after = page.at(-1)?.id;
    }
    expect(pages.map((p) => p.length)).toEqual([128, 128, 128, 128, 128, 128, 128, 104]);
    expect(pages.flat()).toEqual(full);
    expect(() => session.view({ documents: -1 })).toThrow(/documents must be a non-negative integer/);
  });
});
