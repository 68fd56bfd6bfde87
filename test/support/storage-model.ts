/**
 * A seeded model test of the stores: random commit groups (tasks created and changed, documents set, patched
 * and deleted, entries of several conversations, task trees removed by retention, parked waits, early
 * signals written and dropped), small tails and retention bounds so every materialization and pruning
 * boundary is crossed, random restarts, readers, followers and checkpoints. Every read must equal what the
 * commits the store confirmed leave.
 */
import { expect } from "vitest";
import {
  type CommitRecord,
  HistoryTruncatedError,
  ManualClock,
  openSession,
  type Session,
  type Storage,
  sequentialIds,
} from "../../src/index.ts";
import { isTerminal } from "../../src/records/schemas.ts";
import { commitAsKernel } from "../../src/session/kernel-access.ts";
import { contractRegistry, created, demoTask, durable, open } from "./storage-contract.ts";
import { rng } from "./task-simulation.ts";

/** Records the commits a store was given (and confirmed), by version. */
function recording(store: Storage, log: Map<number, CommitRecord>): Storage {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === "commit")
        return async (guard: unknown, commits: readonly CommitRecord[]) => {
          await target.commit(guard as never, commits);
          for (const commit of commits) log.set(commit.version, structuredClone(commit));
        };
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * A view without its finished trees: which of those stay in memory depends on the order they were removed in
 * (removed at random here, where retention removes the oldest); the model checks read them by id instead.
 */
const viewOf = (session: Session) => {
  const view = durable(session.view());
  // Waits are parked in storage; the writer holds one in memory until it lets it go (read by key below).
  const tasks = view.tasks.filter((t) => !t.id.startsWith("w") && (t.id.startsWith("t") || !isTerminal(t)));
  return json({ ...view, tasks, pending: [] });
};

let opens = 0;
/** A writer that parks every wait it can. */
const openWriter = (storage: Storage, id: string) =>
  openSession({
    id,
    storage,
    registry: contractRegistry,
    clock: new ManualClock(1_000),
    ids: sequentialIds(1_000_000 * ++opens),
    entryTail: 50,
    liveWaits: 0,
  });

/** A task's state awaiting `keys` (with a deadline at `at`, when given), as the kernel writes one. */
const awaiting = (keys: string[], at?: number) => ({
  status: "awaiting" as const,
  keys,
  mode: "any" as const,
  thenPhase: "start",
  since: 1_000,
  ...(at !== undefined && { deadline: { at, phase: "start" } }),
});

const json = (value: unknown) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

/**
 * One seeded run: `steps` rounds of a random commit group, then a random check (a restart, a checkpoint and
 * reopen, a reader's view, a follower's refresh, point reads against the model, a page of the change log).
 */
export async function runStoreModel(
  seed: number,
  makeStore: (options: Record<string, number>) => Storage,
  steps = 500,
) {
  const random = rng(seed);
  const options = {
    tailCommits: 1 + random.int(80),
    retainChanges: 1 + random.int(400),
    retainChangeBytes: random.chance(0.5) ? 4_000 + random.int(200_000) : 64 * 1024 * 1024,
  };
  const id = `model-${seed}`;
  const log = new Map<number, CommitRecord>();
  let store = recording(makeStore(options), log);
  let session = await openWriter(store, id);
  let tasks = 0;
  const roots: { id: string; kids: number; done?: boolean }[] = [];
  const waits: number[] = [];
  const followerStore = makeStore(options);
  let follower = await open(followerStore, id, "read");
  const docs = ["a", "b", "c"];
  for (let step = 0; step < steps; step++) {
    const group = 1 + (random.chance(0.2) ? random.int(6) : 0);
    const work: Promise<unknown>[] = [];
    for (let g = 0; g < group; g++) {
      const kind = random.int(11);
      if (kind === 8) {
        // A wait on one or two keys (with a deadline at times), parked as nothing else of its tree is open.
        const n = tasks++;
        const keys = [`k:${n}`, ...(random.chance(0.3) ? [`k:${n}b`] : [])];
        const at = random.chance(0.4) ? 5_000 + random.int(1_000) : undefined;
        work.push(
          commitAsKernel(session, (d) => {
            d.writeTask(created(d, { ...demoTask(`w${n}`), state: awaiting(keys, at) }));
          }),
        );
        waits.push(n);
        continue;
      }
      if (kind === 9 && waits.length > 0) {
        // A wait moves on (running), ends, or waits again on a new key.
        const n = waits[random.int(waits.length)] as number;
        const next = random.int(3);
        work.push(
          commitAsKernel(session, (d) => {
            const t = d.task(`w${n}`);
            if (!t || isTerminal(t)) return;
            const state =
              next === 0
                ? { status: "running" as const }
                : next === 1
                  ? { status: "succeeded" as const, result: step }
                  : awaiting([`k:${n}:${step}`], random.chance(0.5) ? 6_000 + step : undefined);
            d.writeTask({ ...t, state });
          }),
        );
        continue;
      }
      if (kind === 10) {
        // Early signals: written, dropped.
        const key = `k:e${random.int(6)}`;
        work.push(
          commitAsKernel(session, (d) => {
            const there = d.signal(key);
            if (there && there.consumedBy === undefined && random.chance(0.5))
              d.signalWrites.drop(key, there.version);
            else if (!there)
              d.signalWrites.write({
                key,
                requestId: `s${step}`,
                payload: { n: step },
                receivedAt: 1_000,
                version: d.version,
              });
          }),
        );
        continue;
      }
      if (kind === 6) {
        // A tree: a root and children, created together or later; finished some time after.
        const root = `r${tasks++}`;
        const kids = random.int(4);
        work.push(
          commitAsKernel(session, (d) => {
            d.writeTask(created(d, demoTask(root)));
            for (let i = 0; i < kids; i++)
              d.writeTask(created(d, { ...demoTask(`${root}.${i}`), parentId: root, childIndex: i }));
          }),
        );
        roots.push({ id: root, kids });
      } else if (kind === 7 && roots.length > 0) {
        const at = random.int(roots.length);
        const tree = roots[at] as { id: string; kids: number; done?: boolean };
        if (!tree.done) {
          tree.done = true;
          work.push(
            commitAsKernel(session, (d) => {
              const ids = [tree.id, ...Array.from({ length: tree.kids }, (_, i) => `${tree.id}.${i}`)];
              for (const tid of ids) {
                const t = d.task(tid);
                if (t) d.writeTask({ ...t, state: { status: "succeeded", result: step } });
              }
            }),
          );
        } else if (random.chance(0.5)) {
          roots.splice(at, 1);
          work.push(
            commitAsKernel(session, async (d) => {
              const root = d.task(tree.id);
              if (!root?.createdVersion) return;
              d.removeSettled({
                version: root.createdVersion,
                id: tree.id,
                root: tree.id,
                tasks: [
                  { id: tree.id },
                  ...Array.from({ length: tree.kids }, (_, i) => ({
                    id: `${tree.id}.${i}`,
                    parentId: tree.id,
                    childIndex: i,
                  })),
                ],
              });
            }),
          );
        }
      } else if (kind === 0) {
        const n = tasks++;
        work.push(commitAsKernel(session, (d) => d.writeTask(created(d, demoTask(`t${n}`)))));
      } else if (kind === 1 && tasks > 0) {
        const n = random.int(tasks);
        work.push(
          commitAsKernel(session, (d) => {
            const t = d.task(`t${n}`);
            if (t)
              d.writeTask({ ...t, attempts: t.attempts + 1, checkpoint: { phase: `p${step}`, data: null } });
          }),
        );
      } else if (kind === 2) {
        const doc = docs[random.int(docs.length)] as string;
        const big = random.chance(0.05) ? "x".repeat(20_000 + random.int(40_000)) : `${step}`;
        work.push(commitAsKernel(session, (d) => d.setDocument(doc, "note-bag", { step, big })));
      } else if (kind === 3) {
        const doc = docs[random.int(docs.length)] as string;
        work.push(
          commitAsKernel(session, (d) => {
            if (d.document(doc)) d.patchDocument(doc, [{ op: "add", path: `/k${step}`, value: step }]);
            else if (random.chance(0.5)) d.setDocument(doc, "note-bag", {});
          }),
        );
      } else if (kind === 4) {
        const doc = docs[random.int(docs.length)] as string;
        work.push(commitAsKernel(session, (d) => (d.document(doc) ? d.deleteDocument(doc) : undefined)));
      } else {
        const conversation = random.chance(0.7) ? "main" : "side";
        const count = 1 + random.int(3);
        const text = random.chance(0.03) ? "y".repeat(30_000) : `e${step}`;
        work.push(
          commitAsKernel(session, (d) => {
            for (let i = 0; i < count; i++)
              d.appendEntry(conversation, { kind: "note", text: `${text}${i}` });
          }),
        );
      }
    }
    await Promise.all(work);
    const action = random.int(40);
    if (action === 0) {
      // A restart: a new handle, a new writer.
      const before = viewOf(session);
      store = recording(makeStore(options), log);
      session = await openWriter(store, id);
      expect({ step, view: viewOf(session) }).toEqual({ step, view: before });
    } else if (action === 1) {
      const reader = await open(makeStore(options), id, "read");
      expect({ step, view: viewOf(reader) }).toEqual({ step, view: viewOf(session) });
    } else if (action === 2) {
      // A writer closing writes its tail; the next opens on it.
      const before = viewOf(session);
      await session.close();
      store = recording(makeStore(options), log);
      session = await openWriter(store, id);
      expect({ step, view: viewOf(session) }).toEqual({ step, view: before });
    } else if (action < 12) {
      await follower.refresh().catch(async (error: unknown) => {
        if (!(error instanceof HistoryTruncatedError)) throw error;
        follower = await open(followerStore, id, "read");
      });
      expect({ step, view: viewOf(follower) }).toEqual({ step, view: viewOf(session) });
    } else if (action < 18) {
      const model = modelOf(log);
      const reads = random.chance(0.5) ? followerStore : makeStore(options);
      for (let i = 0; i < 5; i++) {
        const tid = random.chance(0.5) ? `t${random.int(tasks + 1)}` : `r${random.int(tasks + 1)}`;
        const read = await reads.readTask(id, tid);
        expect({ step, tid, task: json(read?.value) }).toEqual({
          step,
          tid,
          task: json(model.tasks.get(tid)),
        });
      }
      const keys = [...model.parked.values()].flatMap((w) => w.keys);
      const asked = [...keys.slice(-4), "k:none"];
      const waiting = await reads.readWaiting(id, asked);
      expect({
        step,
        waiting: waiting.map((rows) => rows.map((r) => (r.value as { id: string }).id)),
      }).toEqual({
        step,
        waiting: asked.map((key) => {
          const wait = [...model.parked.values()].find((w) => w.keys.includes(key));
          return wait ? [wait.id] : [];
        }),
      });
      const page = await reads.readParked(id, undefined, 1_000);
      expect({ step, parked: page.map((i) => i.id).sort() }).toEqual({
        step,
        parked: [...model.parked.keys()].sort(),
      });
      const deadlines = await reads.readDeadlines(id, 1_000);
      expect({ step, deadlines: deadlines.map((r) => r.key) }).toEqual({
        step,
        deadlines: [...model.parked.values()]
          .filter((w) => w.at !== undefined)
          .sort((a, b) => (a.at as number) - (b.at as number) || (a.id < b.id ? -1 : 1))
          .map((w) => `deadlines/${w.at}/${w.id}`),
      });
      const signalKeys = Array.from({ length: 6 }, (_, i) => `k:e${i}`);
      const signalRows = await reads.readSignals(id, signalKeys);
      expect({ step, signals: json(signalRows.map((r) => r?.value)) }).toEqual({
        step,
        signals: json(signalKeys.map((key) => model.signals.get(key))),
      });
      for (const tree of roots.slice(-3)) {
        const read = await reads.readTaskTree(id, tree.id);
        const ids = read.map((row) => (row.value as { id: string }).id);
        expect({ step, ids }).toEqual({
          step,
          ids: [tree.id, ...Array.from({ length: tree.kids }, (_, i) => `${tree.id}.${i}`)],
        });
      }
      for (const conversation of ["main", "side"]) {
        const all = model.entries.get(conversation) ?? [];
        const from = random.int(all.length + 1);
        const to = from + random.int(40);
        const read = await reads.readEntries(id, conversation, from, to);
        expect({ step, conversation, from, to, entries: json(read.map((r) => r.value)) }).toEqual({
          step,
          conversation,
          from,
          to,
          entries: json(all.slice(from, to)),
        });
      }
    } else if (action < 22) {
      const other = makeStore(options);
      const version = session.version;
      const after = random.int(version + 1);
      const limit = 1 + random.int(300);
      const page = await other.readChanges(id, after, limit);
      const from = Math.max(after + 1, page.oldestRetained);
      const expected: unknown[] = [];
      for (let v = from; v <= version && expected.length < limit; v++) expected.push(json(log.get(v)));
      expect({ step, after, limit, changes: json(page.changes.map((c) => c.value)) }).toEqual({
        step,
        after,
        limit,
        changes: expected,
      });
    }
  }
}

/** What the committed records leave: each task's last record (none once removed), each conversation's entries. */
function modelOf(log: ReadonlyMap<number, CommitRecord>) {
  const tasks = new Map<string, unknown>();
  const entries = new Map<string, unknown[]>();
  const parked = new Map<string, { version: number; id: string; keys: string[]; at?: number }>();
  const signals = new Map<string, unknown>();
  for (const version of [...log.keys()].sort((a, b) => a - b)) {
    const commit = log.get(version) as CommitRecord;
    for (const task of commit.tasks) tasks.set(task.id, task);
    for (const entry of commit.entries) {
      const list = entries.get(entry.conversationId) ?? [];
      list[entry.seq] = entry;
      entries.set(entry.conversationId, list);
    }
    for (const item of commit.removed ?? []) for (const task of item.tasks) tasks.delete(task.id);
    for (const wait of commit.unparked ?? []) parked.delete(wait.id);
    for (const wait of commit.parked ?? []) parked.set(wait.id, wait as never);
    for (const dropped of commit.droppedSignals ?? []) signals.delete(dropped.key);
    for (const signal of commit.signals ?? []) signals.set(signal.key, signal);
  }
  return { tasks, entries, parked, signals };
}
