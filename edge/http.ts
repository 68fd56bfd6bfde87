/** Request helpers of the router: zod-checked parts, JSON bodies, and the request id on every answer. */
import type { z } from "zod";
import { invalidInput, problemResponse } from "./problem.ts";

/** The parsed value, or a 400 problem naming `part` and each bad field. */
export function parse<T extends z.ZodType>(part: string, schema: T, value: unknown): z.output<T> | Response {
  const result = schema.safeParse(value);
  return result.success ? result.data : invalidInput(part, result.error);
}

/**
 * A segment of the request's path, counted from its end (`/sessions/:id/signals/:key`: 1 is `:key`, so a
 * router mounted under a prefix reads the same), percent-decoded strictly and checked with `schema`, or a
 * 400 problem naming `part`. Hono's own `param()` keeps a malformed escape (`%FF`) as its text, so such a
 * key would be taken literally.
 */
export function strictParam<T extends z.ZodType>(
  request: Request,
  fromEnd: number,
  part: string,
  schema: T,
): z.output<T> | Response {
  const raw = new URL(request.url).pathname.split("/").at(-fromEnd) ?? "";
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    return problemResponse(400, "invalid-argument", `invalid ${part}: malformed percent-encoding`, [
      { path: part, message: "malformed percent-encoding (not UTF-8)" },
    ]);
  }
  return parse(part, schema, decoded);
}

/** The response with `x-request-id`, and a problem's body with its `requestId`. */
export async function withRequestId(response: Response, requestId: string): Promise<Response> {
  const headers = new Headers(response.headers);
  headers.set("x-request-id", requestId);
  if (!headers.get("content-type")?.startsWith("application/problem+json"))
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  const problem = (await response.json()) as Record<string, unknown>;
  return new Response(JSON.stringify({ ...problem, requestId }), { status: response.status, headers });
}

/** The JSON body; `optional` allows an empty one (undefined). Bad JSON or a non-JSON type → a problem. */
export async function readJson(request: Request, optional: boolean): Promise<unknown> {
  const read = await readJsonText(request, optional);
  return read instanceof Response ? read : read.value;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** Like {@link readJson}, with the body's text as received (a callback's requestId is its digest). */
export async function readJsonText(
  request: Request,
  optional: boolean,
): Promise<{ value: unknown; text: string } | Response> {
  const type = request.headers.get("content-type");
  if (type !== null && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(type))
    return problemResponse(415, "unsupported-media-type", "expected an application/json body");
  // Decoded strictly: bytes that are not UTF-8 are refused, never replaced by U+FFFD (two requests whose
  // requestIds differ only in such bytes would read as one).
  let text: string;
  try {
    text = UTF8.decode(await request.arrayBuffer());
  } catch {
    return problemResponse(400, "invalid-argument", "the body is not valid UTF-8", [
      { path: "body", message: "not valid UTF-8" },
    ]);
  }
  if (text.trim() === "") {
    return optional
      ? { value: undefined, text }
      : problemResponse(400, "invalid-argument", "the body is empty; expected a JSON object", [
          { path: "body", message: "required" },
        ]);
  }
  try {
    return { value: JSON.parse(text) as unknown, text };
  } catch {
    // The parser's own message quotes the input back: not echoed.
    return problemResponse(400, "invalid-argument", "the body is not valid JSON", [
      { path: "body", message: "malformed JSON" },
    ]);
  }
}
