/**
 * The record schemas run zod's ahead-of-time compiled parser in front of its runtime parser (`compiled` in
 * records/schemas.ts). A compiled parser that accepted what the runtime refuses, or returned a different
 * value, would let a bad record into storage or change what is stored: every outcome must equal the runtime
 * parser's (`schema.clone()` is the same schema without the compiled parser). Checked on the records a real
 * run writes and on seeded mutations of them.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { approvedPlan, campaignRegistry } from "../../examples/five-emails/app.ts";
import { MailService } from "../../examples/five-emails/mail-service.ts";
import {
  type CommitRecord,
  type Json,
  ManualClock,
  ManualTimers,
  memoryStorage,
  openSession,
  sequentialIds,
} from "../../src/index.ts";
import {
  CommitRecordSchema,
  ConversationSchema,
  DocumentHeadSchema,
  DocumentRowSchema,
  EntrySchema,
  headAfter,
  SessionMetaSchema,
  SubmissionSchema,
  TaskSchema,
} from "../../src/records/schemas.ts";
import { SubmitInputSchema } from "../../src/session/submit.ts";
import { rng } from "../support/task-simulation.ts";

/** Every change the five-email scenario commits, from a run to the end. */
async function scenarioChanges(): Promise<CommitRecord[]> {
  const clock = new ManualClock(1_700_000_000_000);
  const session = await openSession({
    id: "campaign",
    storage: memoryStorage(),
    registry: campaignRegistry(new MailService()),
    clock,
    timers: new ManualTimers(clock),
    ids: sequentialIds(),
  });
  await session.commit((d) => d.setDocument("plan", "email-plan", approvedPlan() as unknown as Json));
  const submission = await session.submit({ requestId: "r1", conversationId: "main", input: "Send it" });
  await session.resume();
  await session.wait(submission.id);
  const { changes } = await session.readChanges(0, 10_000);
  await session.close();
  return changes;
}

/** A deep copy with one to three random edits: a field removed, retyped, emptied, added or made non-JSON. */
function mutate(value: unknown, random: ReturnType<typeof rng>): unknown {
  const copy = structuredClone(value) as Record<string, unknown>;
  const replacements: unknown[] = [
    undefined,
    null,
    "",
    "x".repeat(300),
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    0,
    true,
    [],
    {},
    [1, "a"],
    { nested: { deep: [null] } },
    new Date(0),
    () => 1,
  ];
  for (let edits = 1 + random.int(3); edits > 0; edits--) {
    // Walk down to a random container, then edit one of its slots.
    let target: Record<string, unknown> = copy;
    for (let depth = random.int(5); depth > 0; depth--) {
      const children = Object.values(target).filter((v) => typeof v === "object" && v !== null);
      if (children.length === 0) break;
      target = children[random.int(children.length)] as Record<string, unknown>;
    }
    const keys = Object.keys(target);
    const key =
      random.chance(0.15) || keys.length === 0 ? `extra${random.int(3)}` : keys[random.int(keys.length)];
    if (random.chance(0.2)) delete target[key as string];
    else target[key as string] = replacements[random.int(replacements.length)];
  }
  return copy;
}

function expectSameOutcome(schema: z.ZodType, value: unknown, label: string): boolean {
  const compiled = schema.safeParse(value);
  const runtime = schema.clone().safeParse(value);
  expect(compiled.success, label).toBe(runtime.success);
  if (compiled.success) expect(compiled.data, label).toStrictEqual(runtime.data);
  else expect(compiled.error?.issues, label).toStrictEqual(runtime.error?.issues);
  return runtime.success;
}

describe("compiled record schemas", () => {
  it("accept, refuse and return exactly what zod's runtime parser does, on real records and 4,000 mutations", async () => {
    const changes = await scenarioChanges();
    const samples: [string, z.ZodType, unknown][] = [];
    for (const change of changes) {
      samples.push([`commit ${change.version}`, CommitRecordSchema, change]);
      for (const c of change.conversations) samples.push(["conversation", ConversationSchema, c]);
      for (const e of change.entries) samples.push([`entry ${e.content.kind}`, EntrySchema, e]);
      for (const t of change.tasks) samples.push([`task ${t.state.status}`, TaskSchema, t]);
      for (const s of change.submissions) samples.push([`submission ${s.status}`, SubmissionSchema, s]);
      for (const d of change.documents) {
        samples.push(["document head", DocumentHeadSchema, headAfter(d, change.at)]);
        const row =
          d.baseline !== undefined
            ? { version: d.version, baseline: d.baseline }
            : { version: d.version, patch: d.patch };
        samples.push(["document row", DocumentRowSchema, row]);
      }
    }
    samples.push([
      "session",
      SessionMetaSchema,
      { id: "s", format: 1, version: 3, epoch: 2, createdAt: 1, updatedAt: 2 },
    ]);
    samples.push(["submit input", SubmitInputSchema, { requestId: "r", conversationId: "c", input: "hi" }]);
    // The run exercises what the comparison needs: every record kind, tasks in several states.
    const kinds = new Set(samples.map(([label]) => label.replace(/ \d+$/, "")));
    expect([...kinds]).toEqual(
      expect.arrayContaining([
        "entry user",
        "entry model",
        "entry tool-result",
        "task waiting",
        "task succeeded",
      ]),
    );

    for (const [label, schema, value] of samples) {
      // The premise: Node allows code generation, so each record schema but the change log's carries zod's
      // compiled parser.
      const compiledParser = (schema as unknown as { _zod: { bag: { validator?: unknown } } })._zod.bag
        .validator;
      expect(typeof compiledParser, label).toBe(schema === CommitRecordSchema ? "undefined" : "function");
      expect(expectSameOutcome(schema, value, label), `${label} is valid`).toBe(true);
    }
    const random = rng(20261130);
    let refused = 0;
    for (let i = 0; i < 4000; i++) {
      const [label, schema, value] = samples[random.int(samples.length)] as [string, z.ZodType, unknown];
      if (!expectSameOutcome(schema, mutate(value, random), `${label}, mutation ${i}`)) refused++;
    }
    // Both sides of the comparison are exercised: most mutations break a record, some leave it valid.
    expect(refused).toBeGreaterThan(1000);
    expect(refused).toBeLessThan(4000);
  });

  it("work, unchanged, where code generation is refused (a page whose CSP forbids eval)", () => {
    const script = fileURLToPath(new URL("../support/locked-down-realm.ts", import.meta.url));
    const output = execFileSync(
      process.execPath,
      ["--disallow-code-generation-from-strings", "--import", "tsx", script],
      { encoding: "utf8" },
    );
    const seen = JSON.parse(output.trim().split("\n").at(-1) as string);
    expect(seen).toEqual({
      version: 1,
      refused: "invalid documents/p: n: Invalid input: expected int, received number",
      compiledHere: "undefined",
    });
  });
});
