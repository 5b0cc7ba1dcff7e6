import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { createLogger } from "../support/logger.ts";
import { hasControlCharacter } from "../support/control_characters.ts";
import { decodeSegment, HttpListener, readBody } from "./http_listener.ts";

function listener(maxBodyBytes = 1024, clock = new ManualClock()) {
  const seen: string[] = [];
  const http = new HttpListener({
    host: "127.0.0.1",
    port: 0,
    authenticator: null,
    hostGuard: () => () => ({ ok: true }),
    logger: createLogger({ sink: () => {} }),
    maxBodyBytes,
    bodyTimeoutMs: 200,
    readiness: () => ({ ready: true, detail: { sessions: 0 } }),
    clock,
  });
  http.mount({
    path: "/echo",
    methods: ["POST", "GET"],
    handle: async (request) => {
      seen.push(request.url);
      return new Response(request.method === "POST" ? await request.text() : "ok");
    },
  });
  return { http, seen, clock };
}

/** Whether `promise` has settled once pending reactions ran (the clock is manual). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(() => done = true, () => done = true);
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return done;
}

/** A body stream that sends `parts`, then stays open (a client trickling its body). */
function trickle(parts: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(encoder.encode(part));
    },
  });
}

Deno.test("readBody returns the whole body, refuses one over the limit, and gives up on one that never ends", async () => {
  const post = (body: BodyInit) =>
    new Request("http://h/x", { method: "POST", body, duplex: "half" } as RequestInit);
  assert.equal(
    new TextDecoder().decode((await readBody(post("hello"), 10, 1000)) as Uint8Array),
    "hello",
  );
  assert.equal(await readBody(post(trickle(["12345", "67890", "x"])), 10, 1000), "too_large");
  const clock = new ManualClock();
  const trickled = readBody(post(trickle(["{"])), 10, 100, clock);
  clock.advance(99);
  assert.equal(await settled(trickled), false, "still waiting before the timeout");
  clock.advance(1);
  assert.equal(await trickled, "timeout");
  assert.equal(clock.pendingTimers, 0);
  assert.equal(await readBody(new Request("http://h/x"), 10, 100), null);
});

Deno.test("Bodies reach the route already read; a trickled one gets 408 and a chunked one over the limit 413", async () => {
  const { http, clock } = listener(8);
  const send = (body: BodyInit) =>
    http.handle(
      new Request("http://h/echo", { method: "POST", body, duplex: "half" } as RequestInit),
    );
  assert.equal(await (await send("fine")).text(), "fine");
  const sending = send(trickle(["{"]));
  // The body timer is set once the listener starts reading.
  for (let i = 0; i < 1000 && clock.pendingTimers === 0; i++) await Promise.resolve();
  clock.advance(200);
  const slow = await sending;
  assert.equal(slow.status, 408);
  assert.equal((await slow.json()).error.code, "request_timeout");
  const big = await send(trickle(["0123456789"]));
  assert.equal(big.status, 413);
  assert.equal((await big.json()).error.code, "payload_too_large");
});

Deno.test("A path with encoded slashes, control characters or bad encoding is a 400 before any route", async () => {
  // Dot segments too, but `new Request()` resolves them first; the e2e attack test sends them raw.
  const { http, seen } = listener();
  for (
    const path of ["/echo/%E0%A4%A", "/echo/a%2Fb", "/echo/%0A"]
  ) {
    const answer = await http.handle(new Request(`http://h${path}`));
    assert.equal(answer.status, 400, path);
    assert.equal((await answer.json()).error.code, "invalid_path");
  }
  assert.deepEqual(seen, [], "no route saw them");
  assert.deepEqual(decodeSegment("caf%C3%A9"), { ok: true, segment: "café" });
  assert.equal(hasControlCharacter("a\tb"), true);
  assert.equal(hasControlCharacter("plain ünïcode"), false);
});

Deno.test("While stopping, /readyz says stopping and every request but /healthz gets 503 with Connection: close", async () => {
  const { http, seen } = listener();
  http.beginStopping();
  const ready = await http.handle(new Request("http://h/readyz"));
  assert.equal(ready.status, 503);
  assert.equal((await ready.json()).status, "stopping");
  assert.equal((await http.handle(new Request("http://h/healthz"))).status, 200);
  const refused = await http.handle(new Request("http://h/echo"));
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get("connection"), "close");
  assert.equal(refused.headers.get("retry-after"), "5");
  assert.equal((await refused.json()).error.code, "shutting_down");
  assert.deepEqual(seen, []);
});
