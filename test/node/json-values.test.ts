/**
 * JSON fields of records are validated once: a value the kernel checked and copied (frozen) is not walked
 * and copied again when a later record holds it (a task's input at each of its writes). What passed stays
 * valid only as deep as it was checked, and anything else is checked as before.
 */
import { describe, expect, it } from "vitest";
import { JsonSchema, MAX_JSON_DEPTH, nestedJsonSchema } from "../../src/records/json.ts";

/** `levels` objects nested one in another: `{ a: { a: … { a: 1 } } }`. */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = { a: 1 };
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

describe("JSON values validated once", () => {
  it("keeps a checked value as it is, and copies anything else", () => {
    const input = { city: "Lisbon", days: [1, 2] };
    const checked = JsonSchema.parse(input);
    expect(checked).not.toBe(input);
    expect(checked).toEqual(input);
    expect(Object.isFrozen(checked)).toBe(true);
    // Held again by a later record: the same frozen value, not a fresh copy.
    expect(JsonSchema.parse(checked)).toBe(checked);
    // An equal value the kernel did not check is still copied.
    const lookalike = { city: "Lisbon", days: [1, 2] };
    expect(JsonSchema.parse(lookalike)).not.toBe(lookalike);
  });

  it("checks a value again where it would sit deeper than it was checked", () => {
    const deepest = JsonSchema.parse(nested(MAX_JSON_DEPTH + 1));
    // Valid at the top of a field, one level too deep inside a field one level down.
    const below = nestedJsonSchema(1).safeParse(deepest);
    expect(below.success).toBe(false);
    expect(below.error?.issues[0]?.message).toMatch(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    // Checked one level down, it may sit at the top: not walked again there.
    const shallow = nestedJsonSchema(1).parse(nested(MAX_JSON_DEPTH));
    expect(JsonSchema.parse(shallow)).toBe(shallow);
  });

  it("still refuses what is not JSON, inside a checked value's copy too", () => {
    const bad = JsonSchema.safeParse({ ok: { when: new Date(0) } });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toBe("ok.when: not a JSON value");
    const checked = JsonSchema.parse({ text: "a" });
    // A new object holding a checked one is walked: its own fields are new.
    const lone = JsonSchema.safeParse({ checked, text: "\uD800" });
    expect(lone.success).toBe(false);
    expect(lone.error?.issues[0]?.message).toMatch("text: not well-formed Unicode");
  });

  it("keeps an own __proto__ key as a key, never as the copy's prototype", () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
    const checked = JsonSchema.parse(parsed) as Record<string, unknown>;
    expect(Object.getPrototypeOf(checked)).toBe(Object.prototype);
    expect(Object.keys(checked)).toEqual(["__proto__", "a"]);
    expect((checked as { polluted?: boolean }).polluted).toBeUndefined();
    expect(JSON.stringify(checked)).toBe('{"__proto__":{"polluted":true},"a":1}');
  });
});
