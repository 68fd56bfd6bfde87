/**
 * The edge's commit stream as Hono's SSE helper writes it, read with `eventsource-parser` as a client
 * would: `retry` first, one `commit` event per commit with its version as the id;
 * a client that reads gets every event however much is sent, and one that stops reading is cut off once
 * more than MAX_QUEUED_BYTES wait for it (the stream then ends after what was queued, with no gap in it).
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { describe, expect, it } from "vitest";
import { commitEventStream, MAX_QUEUED_BYTES } from "../../edge/sse.ts";
import {
  createRegistry,
  memoryStorage,
  openSession,
  type Session,
  StorageError,
  type StoredChanges,
} from "../../src/index.ts";
import { ForwardingStorage } from "../support/storage-wrappers.ts";

async function freshSession(): Promise<Session> {
  const session = await openSession({ id: "sse", storage: memoryStorage(), registry: createRegistry({}) });
  await session.resume();
  return session;
}

const note = (session: Session, text: string) =>
  session.commit((draft) => draft.appendEntry("log", { kind: "note", text }));

/** Reads a stream's events as they come; `until` resolves once an event satisfies the test. */
function readEvents(body: ReadableStream<Uint8Array>) {
  const events: EventSourceMessage[] = [];
  const retries: number[] = [];
  let bytes = 0;
  const parser = createParser({
    onEvent: (event) => events.push(event),
    onRetry: (ms) => retries.push(ms),
  });
  const decoder = new TextDecoder();
  const done = (async () => {
    const reader = body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      bytes += value.byteLength;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  })();
  return { events, retries, done, bytes: () => bytes };
}

const request = () => new Request("https://session.internal/events");

describe("the edge's SSE writer (hono/streaming)", () => {
  it("sends retry, then each commit with its version as id; onClose once at the end", async () => {
    const session = await freshSession();
    const base = session.version;
    let closed = 0;
    const response = await commitEventStream(request(), session, {
      since: base,
      maxStreamMs: 60_000,
      onClose: () => closed++,
    });
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    expect(response.headers.get("cache-control")).toBe("no-cache, no-transform");
    const read = readEvents(response.body as ReadableStream<Uint8Array>);
    for (let i = 0; i < 5; i++) await note(session, `note ${i}`);
    await session.close(); // ends the subscription: the stream ends after what it queued
    await read.done;
    expect(read.retries).toEqual([1000]);
    expect(read.events.map((e) => [e.event, e.id])).toEqual(
      [1, 2, 3, 4, 5].map((n) => ["commit", String(base + n)]),
    );
    expect(JSON.parse(read.events[4]?.data ?? "{}").entries[0].content.text).toBe("note 4");
    expect(closed).toBe(1);
  });

  it("a client that reads gets every event, however much is sent", async () => {
    const session = await freshSession();
    const response = await commitEventStream(request(), session, {
      since: session.version,
      maxStreamMs: 60_000,
    });
    const read = readEvents(response.body as ReadableStream<Uint8Array>);
    const big = "x".repeat(100_000);
    const commits = Math.ceil((2 * MAX_QUEUED_BYTES) / big.length);
    for (let i = 0; i < commits; i++) {
      await note(session, big);
      // The client keeps up: it has this commit before the next is made.
      while (read.events.length < i + 1) await new Promise((resolve) => setImmediate(resolve));
    }
    await session.close();
    await read.done;
    expect(read.events).toHaveLength(commits);
    expect(read.bytes()).toBeGreaterThan(2 * MAX_QUEUED_BYTES);
  });

  it("a client that stops reading is cut off past the bound: the stream ends after what was queued, with no gap", async () => {
    const session = await freshSession();
    const base = session.version;
    let closed = 0;
    const response = await commitEventStream(request(), session, {
      since: base,
      maxStreamMs: 60_000,
      onClose: () => closed++,
    });
    const big = "x".repeat(100_000);
    const commits = Math.ceil((2 * MAX_QUEUED_BYTES) / big.length);
    for (let i = 0; i < commits; i++) await note(session, big); // nobody reads meanwhile
    expect(closed).toBe(1); // cut off while the client was not reading
    const read = readEvents(response.body as ReadableStream<Uint8Array>);
    await read.done; // the stream ends by itself: it is not kept open for the rest
    const ids = read.events.map((e) => Number(e.id));
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.length).toBeLessThan(commits);
    expect(ids).toEqual(ids.map((_, i) => base + 1 + i)); // from the first, in order, nothing skipped
    expect(read.bytes()).toBeLessThanOrEqual(MAX_QUEUED_BYTES + 64 * 1024);
    await session.close();
  });

  it("an error event says what a problem response would: a storage failure's own text stays in the log", async () => {
    const stored = memoryStorage();
    const writer = await openSession({ id: "sse", storage: stored, registry: createRegistry({}) });
    for (let i = 0; i < 3; i++) await note(writer, `note ${i}`);
    await writer.close();
    // A new process, whose store fails to read its change log with a message that names its internals: the
    // changes a stream from 0 needs are read from storage.
    const failing = new ForwardingStorage(stored.reopen());
    const session = await openSession({ id: "sse", storage: failing, registry: createRegistry({}) });
    failing.readChanges = async (): Promise<StoredChanges> => {
      throw new StorageError("storage-failed", "SQLITE_IOERR: disk I/O error in /var/lib/do/session.sqlite");
    };
    const logged: Error[] = [];
    const original = console.error;
    console.error = (_prefix: unknown, error: Error) => logged.push(error);
    try {
      const response = await commitEventStream(request(), session, { since: 0, maxStreamMs: 60_000 });
      const read = readEvents(response.body as ReadableStream<Uint8Array>);
      await read.done;
      const errors = read.events.filter((e) => e.event === "error");
      expect(errors).toHaveLength(1);
      const shown = JSON.parse(errors[0]?.data ?? "{}");
      expect(shown).toEqual({
        name: "StorageError",
        code: "storage-failed",
        message: "the session's storage failed; retry later",
      });
      expect(errors[0]?.data).not.toMatch(/SQLITE|\/var\//);
      expect(logged.map((e) => e.message)).toContain(
        "SQLITE_IOERR: disk I/O error in /var/lib/do/session.sqlite",
      );
    } finally {
      console.error = original;
      await session.close();
    }
  });
});
