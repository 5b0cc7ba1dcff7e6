import assert from "node:assert/strict";
import { heldFetch, OpenStreams, type ResponseHold } from "./held_fetch.ts";

const encoder = new TextEncoder();

/** A hold whose credit the test opens and closes, recording what it cut. */
function testHold(maxBytes = 64) {
  const cuts: { reason: string; id: string | number | undefined }[] = [];
  let gate: { promise: Promise<void>; open: () => void } | undefined;
  const hold: ResponseHold = {
    whenOpen: () => gate?.promise,
    maxBytes,
    cut: (reason, id) => void cuts.push({ reason, id }),
    streams: new OpenStreams(),
  };
  return {
    hold,
    cuts,
    close() {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => open = resolve);
      gate = { promise, open };
    },
    open() {
      gate?.open();
      gate = undefined;
    },
  };
}

/** A fetch answering with `chunks` as the body, counting how many the reader pulled. */
function upstream(chunks: string[], type: string, status = 200) {
  const state = { pulled: 0 };
  const fetch: typeof globalThis.fetch = () =>
    Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            if (state.pulled === chunks.length) return controller.close();
            controller.enqueue(encoder.encode(chunks[state.pulled++]));
          },
        }, { highWaterMark: 0 }),
        { status, headers: { "content-type": type, "x-kept": "yes" } },
      ),
    );
  return { fetch, state };
}

const POST = {
  method: "POST",
  body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call" }),
};
const EVENT = 'data: {"jsonrpc":"2.0","method":"notifications/message"}\n\n';

Deno.test("An event stream is read on only while the relay holds credit", async () => {
  const test = testHold(1024);
  const base = upstream([EVENT, EVENT, EVENT], "text/event-stream");
  const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", { method: "GET" });
  const reader = response.body!.getReader();
  await reader.read();
  test.close();
  const next = reader.read();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(base.state.pulled, 1, "nothing more is read from the upstream while closed");
  test.open();
  assert.equal(new TextDecoder().decode((await next).value), EVENT);
  assert.equal(base.state.pulled, 2);
  await reader.cancel();
});

Deno.test("An event past the bound ends a POST's stream and fails the request it answered", async () => {
  const test = testHold(64);
  const base = upstream(
    [EVENT, "data: " + "a".repeat(40), "a".repeat(40), EVENT],
    "text/event-stream",
  );
  const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", POST);
  const text = await response.text();
  // The SDK drops the cut event's start, as it drops any event a stream ends inside.
  assert.equal(text, EVENT + "data: " + "a".repeat(40), "nothing after the bound is read");
  assert.deepEqual(test.cuts, [{ reason: "an event of more than 64 bytes", id: 7 }]);
  assert.equal(base.state.pulled, 3);
});

Deno.test("An event past the bound errors a stream no request owns, naming the bound", async () => {
  const test = testHold(64);
  const base = upstream(["data: " + "a".repeat(100) + "\n\n"], "text/event-stream");
  const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", { method: "GET" });
  await assert.rejects(response.text(), /the upstream sent an event of more than 64 bytes/);
  assert.deepEqual(test.cuts, [{ reason: "an event of more than 64 bytes", id: undefined }]);
});

Deno.test("Events within the bound pass however many arrive in one chunk, whatever their line ends", async () => {
  const test = testHold(64);
  const crlf = EVENT.replaceAll("\n", "\r\n");
  const base = upstream([EVENT.repeat(5) + crlf.repeat(5)], "text/event-stream");
  const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", POST);
  assert.equal(await response.text(), EVENT.repeat(5) + crlf.repeat(5));
  assert.deepEqual(test.cuts, []);
});

Deno.test("A body past the bound is cut unread, its request failed, and the SDK sees it accepted", async () => {
  const test = testHold(64);
  const base = upstream([
    '{"jsonrpc":"2.0","id":7,"result":"',
    "a".repeat(40),
    "a".repeat(40),
    '"}',
  ], "application/json");
  const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", POST);
  assert.equal(response.status, 202);
  assert.equal(response.body, null);
  assert.deepEqual(test.cuts, [{ reason: "a body of more than 64 bytes", id: 7 }]);
  assert.equal(base.state.pulled, 2, "nothing past the bound is read");
});

Deno.test("A body within the bound passes whole, its status and headers kept", async () => {
  const test = testHold(64);
  const base = upstream(['{"error":', '"nope"}'], "application/json", 400);
  const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", POST);
  assert.equal(response.status, 400);
  assert.equal(response.headers.get("x-kept"), "yes");
  assert.equal(await response.text(), '{"error":"nope"}');
  assert.deepEqual(test.cuts, []);
});

Deno.test("A POST's event stream is ended by its request's id, and forgotten once it ends", async () => {
  const test = testHold(1024);
  const state = { cancelled: false };
  const base: typeof fetch = () =>
    Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(encoder.encode(EVENT));
          },
          // Then nothing more, ever: a server keeping the stream open after its answer.
          cancel: () => void (state.cancelled = true),
        }),
        { headers: { "content-type": "text/event-stream" } },
      ),
    );
  const response = await heldFetch(test.hold, base)("http://u/mcp", POST);
  const reader = response.body!.getReader();
  assert.equal(new TextDecoder().decode((await reader.read()).value), EVENT);
  assert.equal(test.hold.streams.size, 1);
  const next = reader.read();
  test.hold.streams.end(7);
  assert.equal((await next).done, true, "the stream ends for its reader");
  assert.ok(state.cancelled, "and the upstream's side is cancelled");
  assert.equal(test.hold.streams.size, 0);
  test.hold.streams.end(7);
});

Deno.test("A JSON answer still being read is let go by its request's id: the SDK sees it accepted, nothing is cut", async () => {
  const test = testHold(1024);
  const trickle: typeof fetch = () =>
    Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({
          start: (controller) => controller.enqueue(encoder.encode('{"jsonrpc":"2.0","id":7,')),
        }),
        { headers: { "content-type": "application/json" } },
      ),
    );
  const answered = heldFetch(test.hold, trickle)("http://u/mcp", POST);
  await new Promise((resolve) => setTimeout(resolve, 10));
  test.hold.streams.end(7);
  const response = await answered;
  assert.equal(response.status, 202);
  assert.deepEqual(test.cuts, []);
  assert.equal(test.hold.streams.size, 0);
});

Deno.test("A body the SDK only cancels (a 202, an answer to no request) is passed on unread", async () => {
  const test = testHold(64);
  for (const [status, init] of [[202, POST], [200, { method: "POST", body: "{}" }]] as const) {
    const base = upstream(["x".repeat(100)], "text/plain", status);
    const response = await heldFetch(test.hold, base.fetch)("http://u/mcp", init);
    assert.equal(base.state.pulled, 0, `${status}: nothing read`);
    await response.body?.cancel();
  }
  assert.deepEqual(test.cuts, []);
});

Deno.test("A GET resuming a POST stream that was let go is refused (405) without reaching the upstream; others are sent", async () => {
  const test = testHold(1024);
  const sent: string[] = [];
  const base: typeof fetch = (_input, init) => {
    sent.push(init?.method ?? "GET");
    return Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({
          start: (c) => c.enqueue(encoder.encode("retry: 10\nid: primed-7\ndata:\n\n")),
        }),
        { headers: { "content-type": "text/event-stream" } },
      ),
    );
  };
  const held = heldFetch(test.hold, base);
  const response = await held("http://u/mcp", POST);
  const reader = response.body!.getReader();
  await reader.read();
  // What the relay hears from the SDK as it reads the priming event (its onresumptiontoken).
  test.hold.streams.resumableAt(7, "primed-7");
  test.hold.streams.end(7);
  await reader.read();
  const resume = (id: string) =>
    held("http://u/mcp", { method: "GET", headers: new Headers({ "last-event-id": id }) });
  assert.equal((await resume("primed-7")).status, 405);
  assert.deepEqual(sent, ["POST"], "the refused resumption reached no upstream");
  const other = await resume("elsewhere-3");
  assert.equal(other.status, 200);
  await other.body?.cancel();
  assert.deepEqual(sent, ["POST", "GET"]);
});

Deno.test("A let-go stream's event id is remembered by its length and head when long: its resumption is still refused", async () => {
  const test = testHold(1024);
  const long = "x".repeat(100_000);
  const base: typeof fetch = () =>
    Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(encoder.encode(EVENT)) }),
        {
          headers: { "content-type": "text/event-stream" },
        },
      ),
    );
  const held = heldFetch(test.hold, base);
  const response = await held("http://u/mcp", POST);
  const reader = response.body!.getReader();
  await reader.read();
  test.hold.streams.resumableAt(7, long);
  test.hold.streams.end(7);
  await reader.read();
  assert.equal(test.hold.streams.resumesLetGo(`${long}y`), false, "another id is not refused");
  assert.equal(test.hold.streams.resumesLetGo(long), true);
});
