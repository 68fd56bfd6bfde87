/**
 * A local HTTP server speaking the OpenAI chat-completions wire format (SSE chunks, tool-call deltas), with
 * scripted misbehaviour: a connection cut mid-stream, 429 with retry-after, 500. Loopback only.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type FixtureReply =
  | { kind: "text"; chunks: string[]; crlf?: boolean }
  /**
   * Tool calls, each streamed in pieces with its `index` (OpenAI's way); `whole`: all in one delta, complete
   * and without `index` (Gemini's OpenAI-compatible endpoint). A call without `id` is sent without one.
   */
  | { kind: "tools"; calls: { id?: string; name: string; args: string[] }[]; whole?: boolean }
  | { kind: "cut"; chunks: string[] }
  | { kind: "status"; status: number; retryAfter?: number };

export interface Fixture {
  readonly url: string;
  readonly requests: { headers: IncomingMessage["headers"]; body: Record<string, unknown> }[];
  close(): Promise<void>;
}

/** Serves `replies` in order, one per request (the last one repeats). */
export async function startOpenAiFixture(replies: FixtureReply[]): Promise<Fixture> {
  const requests: Fixture["requests"] = [];
  const server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    requests.push({ headers: req.headers, body: JSON.parse(raw) as Record<string, unknown> });
    const reply = replies[Math.min(requests.length - 1, replies.length - 1)] as FixtureReply;
    serve(reply, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function serve(reply: FixtureReply, res: ServerResponse): void {
  if (reply.kind === "status") {
    res.writeHead(reply.status, {
      "content-type": "application/json",
      ...(reply.retryAfter !== undefined && { "retry-after": String(reply.retryAfter) }),
    });
    res.end(JSON.stringify({ error: { message: `fixture status ${reply.status}` } }));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  // Some servers and proxies end lines with CRLF and send comment lines as keep-alives.
  const nl = reply.kind === "text" && reply.crlf ? "\r\n" : "\n";
  if (nl === "\r\n") res.write(`: keep-alive${nl}${nl}`);
  const send = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}${nl}${nl}`);
  const base = { id: "chatcmpl-fixture", object: "chat.completion.chunk", model: "fixture" };
  send({ ...base, choices: [{ index: 0, delta: { role: "assistant" }, finish_reason: null }] });
  if (reply.kind === "text" || reply.kind === "cut") {
    for (const content of reply.chunks)
      send({ ...base, choices: [{ index: 0, delta: { content }, finish_reason: null }] });
    if (reply.kind === "cut") {
      // The connection drops mid-stream, once what was written has reached the client.
      setTimeout(() => res.socket?.destroy(), 30);
      return;
    }
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
  } else if (reply.whole) {
    const calls = reply.calls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.args.join("") },
    }));
    send({ ...base, choices: [{ index: 0, delta: { tool_calls: calls }, finish_reason: "tool_calls" }] });
  } else {
    for (const [index, call] of reply.calls.entries()) {
      send({
        ...base,
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                { index, id: call.id, type: "function", function: { name: call.name, arguments: "" } },
              ],
            },
            finish_reason: null,
          },
        ],
      });
      for (const part of call.args) {
        send({
          ...base,
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index, function: { arguments: part } }] },
              finish_reason: null,
            },
          ],
        });
      }
    }
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] });
  }
  send({ ...base, choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
  res.write(`data: [DONE]${nl}${nl}`);
  res.end();
}
