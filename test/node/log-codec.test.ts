import { describe, expect, it } from "vitest";
import { RecordTooLargeError } from "../../src/errors.ts";
import type { CommitRecord } from "../../src/index.ts";
import { decodeCommit, encodeCommit, type WholeLookup, WholeRecords } from "../../src/storage/log-codec.ts";
import { logRowsOfGroup } from "../../src/storage/log-rows.ts";

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

  it("after a group the store refused, logs as changes only what the tail holds: not the refused group's records", () => {
    const task = (id: string, status: string) => ({ id, input: { pad: "x".repeat(40) }, state: { status } });
    const first = logRowsOfGroup([commitOf(1, task("t1", "running"))], 0, new WholeRecords());
    // Version 2 logs t2 whole, and is refused as too large: its link is dropped, the tail stays at version 1.
    expect(() =>
      logRowsOfGroup([commitOf(2, task("t2", "running"))], first.logEnd, first.wholes, 60),
    ).toThrow(RecordTooLargeError);
    // Version 2 again, another group: t1 (logged whole at version 1) as its changes; t2, which only the
    // refused group logged, and t3, which nothing logged, whole.
    const tasks = [task("t1", "succeeded"), task("t2", "succeeded"), task("t3", "running")];
    const commit = { ...commitOf(2, task("t1", "succeeded")), tasks } as unknown as CommitRecord;
    const { rows } = logRowsOfGroup([commit], first.logEnd, first.wholes);
    expect(rows.map((row) => (row.value as unknown as { tasks: unknown[] }).tasks)).toEqual([
      [{ "~": 1, id: "t1", state: { status: "succeeded" } }, task("t2", "succeeded"), task("t3", "running")],
    ]);
  });

  it("logs a record whole again in a new block of 64 versions", () => {
    const wholes = new WholeRecords();
    const at1 = commitOf(1, { id: "t1", state: { status: "running" } });
    wholes.add(at1, encodeCommit(at1, wholes.lookup()));
    const next = { id: "t1", state: { status: "succeeded" } };
    // Versions 1–64 are one block, 65 begins the next.
    expect(encodeCommit(commitOf(64, next), wholes.lookup()).tasks).toEqual([
      { "~": 1, id: "t1", state: { status: "succeeded" } },
    ]);
    expect(encodeCommit(commitOf(65, next), wholes.lookup()).tasks).toEqual([next]);
  });
});
