import { describe, expect, it } from "vitest";
import type { CommitRecord } from "../../src/index.ts";
import { decodeCommit, encodeCommit, type WholeLookup } from "../../src/storage/log-codec.ts";

/** A commit of one task, as the log codec reads it (the other lists empty). */
function commitOf(version: number, task: Record<string, unknown>): CommitRecord {
  return {
    version,
    epoch: 1,
    at: version,
    deferred: false,
    conversations: [],
    entries: [],
    documents: [],
    tasks: [task],
    submissions: [],
  } as unknown as CommitRecord;
}

describe("change log codec", () => {
  const logged = { id: "t1", input: { to: ["ana@example.com"], body: "hi" }, state: { status: "running" } };
  const whole: WholeLookup = (list, id) =>
    list === "tasks" && id === "t1" ? { version: 1, record: logged } : undefined;

  it("logs a record as the fields whose JSON changed, even when validation made copies of the others", () => {
    // Sealing copies JSON values: the input is a new object, equal to the one logged whole at version 1.
    const next = { id: "t1", input: structuredClone(logged.input), state: { status: "succeeded" } };
    const encoded = encodeCommit(commitOf(2, next), whole);
    expect(encoded.tasks).toEqual([{ "~": 1, id: "t1", state: { status: "succeeded" } }]);
    expect((decodeCommit(encoded, whole) as CommitRecord).tasks).toEqual([next]);
  });

  it("logs a field changed deep inside it, and a field removed", () => {
    const next = { id: "t1", input: { to: ["bo@example.com"], body: "hi" } };
    const encoded = encodeCommit(commitOf(2, next), whole);
    expect(encoded.tasks).toEqual([{ "~": 1, id: "t1", input: next.input, "~x": ["state"] }]);
    expect((decodeCommit(encoded, whole) as CommitRecord).tasks).toEqual([next]);
  });
});
