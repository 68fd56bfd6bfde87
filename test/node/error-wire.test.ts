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

describe("error wire: every class", () => {
  it("knows every error class the kernel exports: each one arrives as itself", async () => {
    const kernel = await import("../../src/index.ts");
    const classes = Object.entries(kernel).filter(
      ([, value]) =>
        typeof value === "function" && value.prototype instanceof KernelError && value !== KernelError,
    );
    expect(classes.length).toBeGreaterThan(15);
    for (const [name, Class] of classes) {
      // Made with placeholder arguments (a code first where the class takes one): its class, name and code
      // are what must survive.
      const special: Record<string, unknown[]> = {
        StorageError: ["storage-failed", `a ${name}`],
        SignalRefusedError: ["signal-conflict", "key", `a ${name}`],
        ModelError: [`a ${name}`, { retryable: false }],
      };
      const args = special[name] ?? [`a ${name}`];
      const error = Reflect.construct(Class as new (...args: unknown[]) => KernelError, args);
      const back = across(error);
      expect(back.code, name).toBe(error.code);
      expect(back, name).toBeInstanceOf(Class as new () => unknown);
      expect(back.name, name).toBe(name);
    }
  });
});
