import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  CallToolResultSchema,
  type JSONRPCMessage,
  LATEST_PROTOCOL_VERSION,
  type Progress,
} from "@modelcontextprotocol/sdk/types.js";
import { StreamTransport, type StreamTransportOptions } from "./stream_transport.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const PING = { jsonrpc: "2.0", id: 1, method: "ping" } as const;
const PING_LINE = JSON.stringify(PING) + "\n";

/** A started transport over a hand-made input stream and an output stream that records lines. */
async function harness(options: Partial<StreamTransportOptions> = {}) {
  let input!: ReadableStreamDefaultController<Uint8Array>;
  const readable = new ReadableStream<Uint8Array>({
    start(controller) {
      input = controller;
    },
  });
  const written: string[] = [];
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      written.push(decoder.decode(chunk));
    },
  });
  const transport = new StreamTransport(readable, writable, {
    maxMessageBytes: 1024,
    ...options,
  });
  const messages: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  let closes = 0;
  transport.onmessage = (message) => messages.push(message);
  transport.onerror = (error) => errors.push(error);
  transport.onclose = () => closes++;
  await transport.start();
  return {
    transport,
    messages,
    errors,
    written,
    get closes() {
      return closes;
    },
    /** Feeds chunks to the transport's input. */
    push(...chunks: (string | Uint8Array)[]) {
      for (const chunk of chunks) {
        input.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      }
    },
    /** Ends the input and waits until the transport has closed. */
    async end() {
      input.close();
      await transport.finished;
    },
    /** Every line written to the output, parsed. */
    output(): unknown[] {
      const text = written.join("");
      assert.ok(text === "" || text.endsWith("\n"), "output must end with a newline");
      return text.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line));
    },
  };
}

function rpcError(output: unknown): { id: unknown; error: { code: number; message: string } } {
  const frame = output as {
    jsonrpc: string;
    id: unknown;
    error: { code: number; message: string };
  };
  assert.equal(frame.jsonrpc, "2.0");
  return frame;
}

Deno.test("StreamTransport delivers each line to onmessage", async () => {
  const h = await harness();
  const notification = { jsonrpc: "2.0", method: "notifications/initialized" };
  h.push(PING_LINE, JSON.stringify(notification) + "\n");
  await h.end();
  assert.deepEqual(h.messages, [PING, notification]);
  assert.deepEqual(h.written, []);
});

Deno.test("StreamTransport reassembles a message split across chunks", async () => {
  const message = { jsonrpc: "2.0", id: "é-1", method: "tools/call", params: { name: "café" } };
  const bytes = encoder.encode(JSON.stringify(message) + "\n");
  const split = bytes.indexOf(0xc3) + 1; // inside the two bytes of the first "é"
  const h = await harness();
  h.push(bytes.slice(0, 5), bytes.slice(5, split), bytes.slice(split));
  await h.end();
  assert.deepEqual(h.messages, [message]);
});

Deno.test("StreamTransport delivers several messages that arrive in one chunk", async () => {
  const h = await harness();
  const second = { jsonrpc: "2.0", id: 2, result: {} };
  h.push(PING_LINE + JSON.stringify(second) + "\n" + PING_LINE);
  await h.end();
  assert.deepEqual(h.messages, [PING, second, PING]);
});

Deno.test("StreamTransport ignores blank lines and accepts CRLF line endings", async () => {
  const h = await harness();
  h.push("\n  \n" + JSON.stringify(PING) + "\r\n\r\n");
  await h.end();
  assert.deepEqual(h.messages, [PING]);
  assert.deepEqual(h.written, []);
});

Deno.test("StreamTransport answers a line that is not JSON with -32700 and keeps reading", async () => {
  const h = await harness();
  h.push("{not json\n", PING_LINE);
  await h.end();
  const [frame, ...rest] = h.output();
  assert.deepEqual(rest, []);
  const { id, error } = rpcError(frame);
  assert.equal(id, null);
  assert.equal(error.code, -32700);
  assert.match(error.message, /^Parse error/);
  assert.deepEqual(h.messages, [PING]);
});

Deno.test("StreamTransport answers JSON that is not JSON-RPC with -32600 echoing its id", async () => {
  const h = await harness();
  h.push(
    `{"id":"abc","method":"ping"}\n`,
    `{"jsonrpc":"2.0","id":7,"method":42}\n`,
    `{"jsonrpc":"2.0","id":{"x":1},"method":5}\n`,
    `"just a string"\n`,
    PING_LINE,
  );
  await h.end();
  const frames = h.output().map(rpcError);
  assert.deepEqual(frames.map((f) => f.id), ["abc", 7, null, null]);
  for (const frame of frames) {
    assert.equal(frame.error.code, -32600);
    assert.match(frame.error.message, /^Invalid Request/);
  }
  assert.deepEqual(h.messages, [PING]);
});

Deno.test("StreamTransport answers a JSON array (a batch) with -32600", async () => {
  const h = await harness();
  h.push(`[${JSON.stringify(PING)}]\n`, PING_LINE);
  await h.end();
  const [frame, ...rest] = h.output();
  assert.deepEqual(rest, []);
  const { id, error } = rpcError(frame);
  assert.equal(id, null);
  assert.equal(error.code, -32600);
  assert.match(error.message, /batch/);
  assert.deepEqual(h.messages, [PING]);
});

Deno.test("StreamTransport answers invalid UTF-8 with -32700", async () => {
  const h = await harness();
  const invalid = new Uint8Array([...encoder.encode(`{"jsonrpc":"2.0","method":"`), 0xff, 0xfe]);
  h.push(new Uint8Array([...invalid, ...encoder.encode(`"}\n`)]), PING_LINE);
  await h.end();
  const [frame, ...rest] = h.output();
  assert.deepEqual(rest, []);
  const { id, error } = rpcError(frame);
  assert.equal(id, null);
  assert.equal(error.code, -32700);
  assert.match(error.message, /UTF-8/);
  assert.deepEqual(h.messages, [PING]);
});

Deno.test("StreamTransport answers a line longer than maxMessageBytes once with -32600 and keeps reading", async () => {
  const h = await harness({ maxMessageBytes: 64 });
  h.push("x".repeat(65) + "\n" + PING_LINE);
  await h.end();
  const [frame, ...rest] = h.output();
  assert.deepEqual(rest, []);
  const { id, error } = rpcError(frame);
  assert.equal(id, null);
  assert.equal(error.code, -32600);
  assert.match(error.message, /exceeds 64 bytes/);
  assert.deepEqual(h.messages, [PING]);
});

Deno.test("StreamTransport answers an oversized line that arrives across several chunks once", async () => {
  const chunkings = [
    // the excess shows while the line is still arriving
    ["x".repeat(30), "x".repeat(30), "x".repeat(30), "x".repeat(30), "\n" + PING_LINE],
    // the excess shows only in the chunk that ends the line
    ["x".repeat(40), "x".repeat(40) + "\n", PING_LINE],
  ];
  for (const chunks of chunkings) {
    const h = await harness({ maxMessageBytes: 64 });
    h.push(...chunks);
    await h.end();
    const frames = h.output().map(rpcError);
    assert.equal(frames.length, 1, `chunks ${chunks.map((c) => c.length)}`);
    assert.equal(frames[0]!.error.code, -32600);
    assert.match(frames[0]!.error.message, /exceeds 64 bytes/);
    assert.deepEqual(h.messages, [PING]);
  }
});

Deno.test("StreamTransport accepts a line of exactly maxMessageBytes", async () => {
  const h = await harness({ maxMessageBytes: encoder.encode(JSON.stringify(PING)).length });
  h.push(PING_LINE);
  await h.end();
  assert.deepEqual(h.messages, [PING]);
  assert.deepEqual(h.written, []);
});

Deno.test("StreamTransport with answerMalformed false writes nothing for bad frames", async () => {
  const h = await harness({ maxMessageBytes: 64, answerMalformed: false });
  h.push("{not json\n", "[1]\n", `{"id":1}\n`, "x".repeat(100) + "\n", PING_LINE);
  await h.end();
  assert.deepEqual(h.written, []);
  assert.equal(h.errors.length, 4);
  assert.deepEqual(h.messages, [PING]);
});

Deno.test("StreamTransport reports a throwing onmessage to onerror and keeps reading", async () => {
  const h = await harness();
  const seen: JSONRPCMessage[] = [];
  h.transport.onmessage = (message) => {
    seen.push(message);
    if (seen.length === 1) throw new Error("handler failed");
  };
  h.push(PING_LINE, PING_LINE);
  await h.end();
  assert.equal(seen.length, 2);
  assert.deepEqual(h.errors.map((e) => e.message), ["handler failed"]);
});

Deno.test("StreamTransport closes once and resolves finished when the input ends", async () => {
  const h = await harness();
  h.push(PING_LINE);
  await h.end();
  assert.equal(h.closes, 1);
  await h.transport.close();
  assert.equal(h.closes, 1);
  await assert.rejects(() => h.transport.send(PING), /closed/);
});

Deno.test("StreamTransport.send writes one line per message", async () => {
  const h = await harness();
  const response = { jsonrpc: "2.0", id: 1, result: { text: "two\nlines" } } as const;
  await h.transport.send(response);
  await h.transport.send(PING);
  await h.end();
  assert.deepEqual(h.written, [JSON.stringify(response) + "\n", PING_LINE]);
  assert.deepEqual(h.output(), [response, PING]);
});

Deno.test("StreamTransport.close is idempotent and ends reading", async () => {
  const h = await harness();
  await Promise.all([h.transport.close(), h.transport.close()]);
  await h.transport.close();
  await h.transport.finished;
  assert.equal(h.closes, 1);
  await assert.rejects(() => h.transport.send(PING), /closed/);
});

Deno.test("StreamTransport.start refuses to start twice", async () => {
  const h = await harness();
  assert.throws(() => h.transport.start(), /already started/);
  await h.end();
});

Deno.test("An SDK client over StreamTransport gets a call's last progress when the result arrives in the same chunk", async () => {
  // A scripted server: it answers initialize, then answers the call with its progress
  // notification and its result in ONE chunk, as a pipe delivers them to a busy reader.
  let input!: ReadableStreamDefaultController<Uint8Array>;
  const readable = new ReadableStream<Uint8Array>({ start: (c) => void (input = c) });
  const line = (m: unknown) => JSON.stringify(m) + "\n";
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      for (const text of decoder.decode(chunk).split("\n").filter(Boolean)) {
        const m = JSON.parse(text) as {
          id?: number;
          method?: string;
          params?: { _meta: { progressToken: string } };
        };
        if (m.method === "initialize") {
          input.enqueue(encoder.encode(line({
            jsonrpc: "2.0",
            id: m.id,
            result: {
              protocolVersion: LATEST_PROTOCOL_VERSION,
              capabilities: { tools: {} },
              serverInfo: { name: "scripted", version: "1" },
            },
          })));
        } else if (m.method === "tools/call") {
          const progressToken = m.params!._meta.progressToken;
          input.enqueue(encoder.encode(
            line({
              jsonrpc: "2.0",
              method: "notifications/progress",
              params: { progressToken, progress: 5, total: 5 },
            }) + line({ jsonrpc: "2.0", id: m.id, result: { content: [] } }),
          ));
        }
      }
    },
  });
  const client = new Client({ name: "t", version: "1" });
  await client.connect(new StreamTransport(readable, writable, { maxMessageBytes: 1 << 20 }));
  const seen: Progress[] = [];
  await client.request(
    { method: "tools/call", params: { name: "x", arguments: {} } },
    CallToolResultSchema,
    { onprogress: (progress) => seen.push(progress) },
  );
  assert.deepEqual(seen, [{ progress: 5, total: 5 }]);
  input.close();
  await client.close();
});
