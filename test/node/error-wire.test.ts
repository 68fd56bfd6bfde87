/** Errors between a session worker and its page, and between tabs: the class thrown arrives, with its fields. */
import { describe, expect, it } from "vitest";
import {
  InvalidArgumentError,
  KernelError,
  RecordTooLargeError,
  SignalRefusedError,
  StaleOwnerError,
  serializeError,
} from "../../src/index.ts";
import { fromWireError, toWireError } from "../../worker/error-wire.ts";

/** Through a structured clone, as postMessage carries it. */
const across = (error: unknown) => fromWireError(structuredClone(toWireError(error)));

describe("error wire", () => {
  it("rebuilds the kernel's classes with their fields", () => {
    const refused = across(new SignalRefusedError("signal-conflict", "approval:1", "already answered"));
    expect(refused).toBeInstanceOf(SignalRefusedError);
    expect(refused).toMatchObject({
      code: "signal-conflict",
      key: "approval:1",
      message: "already answered",
    });
    const tooLarge = across(new RecordTooLargeError("too large", "entries/main/7", 3_000_000, 2_000_000, 9));
    expect(tooLarge).toBeInstanceOf(RecordTooLargeError);
    expect(tooLarge).toMatchObject({
      record: "entries/main/7",
      bytes: 3_000_000,
      limit: 2_000_000,
      version: 9,
    });
    const details = { expectedEpoch: 1, storedEpoch: 2, expectedVersion: 5, storedVersion: 6 };
    expect(across(new StaleOwnerError("stale", details))).toMatchObject({ name: "StaleOwnerError", details });
    const issues = [{ path: "requestId", message: "required" }];
    expect(across(new InvalidArgumentError("bad", issues))).toMatchObject({ issues });
  });

  it("keeps an app's own error as a KernelError with its name, and reads a sender that sends no fields", () => {
    const app = across(new TypeError("boom"));
    expect(app).toBeInstanceOf(KernelError);
    expect(app).toMatchObject({ name: "TypeError", code: "internal", message: "boom" });
    const older = fromWireError(
      serializeError(new InvalidArgumentError("bad", [{ path: "x", message: "y" }])),
    );
    expect(older).toBeInstanceOf(InvalidArgumentError);
    expect((older as InvalidArgumentError).issues).toEqual([]);
  });
});
