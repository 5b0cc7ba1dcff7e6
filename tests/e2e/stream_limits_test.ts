/**
 * Bounded Streamable HTTP output and requests in flight, with real processes: a client that
 * never reads its POST response stream while an upstream floods notifications is cut off at
 * MCP_SSE_MAX_QUEUE_MESSAGES with a log line, its requests cancelled upstream, the gateway's
 * memory bounded and other sessions served; a session's request past
 * MCP_MAX_IN_FLIGHT_PER_SESSION is refused with too_many_requests over every transport while the
 * first ones complete.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import {
  FrameReader,
  readyz,
  spawnHttpChild,
  spawnStdioGateway,
} from "../support/child_gateway.ts";
import { eventually, faultServer, writeFleet } from "../support/fleet.ts";
import {
  connectHttp,
  connectSse,
  initializeRequest,
  mcpHeaders,
  startGateway,
} from "../support/gateway.ts";

const encoder = new TextEncoder();

/** VmRSS of a process, in bytes (Linux). */
async function rss(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Opens a Streamable HTTP session with fetch; the headers for its requests. */
async function session(url: string, token: string): Promise<Record<string, string>> {
  const opened = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: mcpHeaders(token),
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
  const id = opened.headers.get("mcp-session-id");
  await opened.text();
  assert.ok(id, `initialize answered ${opened.status}`);
  const headers = mcpHeaders(token, { "Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-11-25" });
  const initialized = await fetch(`${url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await initialized.body?.cancel();
  return headers;
}

/** One request over fetch, its answer read whole (the last SSE event, or the JSON body). */
async function call(url: string, headers: Record<string, string>, body: unknown) {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
  });
  const text = await response.text();
  const data = text.includes("data: ")
    ? text.split("\n").filter((l) => l.startsWith("data: ")).at(-1)!.slice(6)
    : text;
  return JSON.parse(data);
}

/** POSTs `body` on a raw socket that is never read from again: the stream's client stops reading. */
async function postAndNeverRead(url: string, headers: Record<string, string>, body: unknown) {
  const { port } = new URL(url);
  const socket = await Deno.connect({ hostname: "127.0.0.1", port: Number(port) });
  const payload = JSON.stringify(body);
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  await socket.write(
    encoder.encode(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${head}` +
        `Content-Length: ${encoder.encode(payload).length}\r\n\r\n${payload}`,
    ),
  );
  return socket;
}

const tool = (id: number | string, name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args, _meta: { progressToken: `p-${id}` } },
});

Deno.test("A Streamable HTTP client that never reads its POST stream is cut off at the bound with a log line, its requests cancelled upstream, memory bounded and other sessions served", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("f")}`);
  const token = "http-slow-reader-token";
  const gateway = await spawnHttpChild({
    MCP_SERVER_AUTH_TOKEN: token,
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_SSE_MAX_QUEUE_MESSAGES: "2000",
  });
  const sockets: Deno.Conn[] = [];
  try {
    const slow = await session(gateway.url, token);
    const other = await session(gateway.url, token);
    const before = await rss(gateway.pid);

    // The direct path (one request per POST): a flood of progress and log notifications.
    sockets.push(
      await postAndNeverRead(gateway.url, slow, tool(2, "f__flood", { count: 200_000 })),
    );
    await eventually(
      () =>
        /response stream whose client does not read it and cancelled its request\(s\) 2:/.test(
          gateway.log(),
        ),
      "the log line naming the cut-off stream",
      60_000,
    );
    const line = gateway.log().split("\n").find((l) => l.includes("cancelled its request(s) 2:"))!;
    assert.match(line, /MCP_SSE_MAX_QUEUE_MESSAGES/);
    assert.match(line, /tenant=default/);
    assert.match(line, new RegExp(`session=${slow["Mcp-Session-Id"]}`));
    const grown = (await rss(gateway.pid)) - before;
    assert.ok(grown < 64 * 1024 * 1024, `RSS grew ${Math.round(grown / 1048576)} MiB`);

    // The SDK's path (a batch): a hang and a flood share one stream; both are cancelled upstream.
    sockets.push(
      await postAndNeverRead(gateway.url, slow, [
        tool(3, "f__hang"),
        tool(4, "f__flood", { count: 200_000 }),
      ]),
    );
    await eventually(
      () => /cancelled its request\(s\) 3, 4:/.test(gateway.log()),
      "the batch's stream cut off",
      60_000,
    );
    await eventually(async () => {
      const answer = await call(gateway.url, other, tool(5, "f__inflight"));
      return answer.result?.content?.[0]?.text === "0";
    }, "the hang call cancelled upstream");

    // The slow session itself still works once it reads again, and so does the other one.
    const again = await call(gateway.url, slow, tool(6, "f__ok"));
    assert.equal(again.result.content[0].text, "ok");
    const served = await call(gateway.url, other, tool(7, "f__ok"));
    assert.equal(served.result.content[0].text, "ok");
  } finally {
    for (const socket of sockets) socket.close();
    await gateway.close();
    await fleet.remove();
  }
});

Deno.test("A GET /mcp stream whose client does not read it is closed at the bound with a log line; the client may open a new one", async () => {
  const gateway = await startGateway({ MCP_SSE_MAX_QUEUE_MESSAGES: "50" });
  try {
    const headers = await session(gateway.url, gateway.token);
    const get = await fetch(`${gateway.url}/mcp`, {
      headers: { ...headers, Accept: "text/event-stream" },
    });
    assert.equal(get.status, 200);
    // Server-initiated messages with no request go to the GET stream: list changes, unread.
    // Enough to fill the socket's buffers first; then they wait in the gateway, counted.
    for (let i = 0; i < 2000 && !gateway.logs.some((l) => l.includes("GET /mcp stream")); i++) {
      for (let j = 0; j < 500; j++) gateway.kernel.bridge.notifyToolsChanged();
      await new Promise((r) => setTimeout(r, 0));
    }
    const line = gateway.logs.find((l) => l.includes("closed the GET /mcp stream"));
    assert.ok(line, "the log line naming the GET stream");
    assert.match(line, /MCP_SSE_MAX_QUEUE_MESSAGES/);
    // What the sockets held still arrives; then the connection is cut, not left hanging.
    const reader = get.body!.getReader();
    for (;;) {
      const read = await reader.read().catch(() => null);
      if (read === null || read.done) break;
    }
    const reopened = await fetch(`${gateway.url}/mcp`, {
      headers: { ...headers, Accept: "text/event-stream" },
    });
    assert.equal(reopened.status, 200, "a new GET stream is accepted");
    await reopened.body?.cancel();
  } finally {
    await gateway.stop();
  }
});

/** Three slow calls, then a fourth past the bound; the fourth's error and the others' texts. */
async function overTheBound(client: Client): Promise<{ refused: McpError; texts: string[] }> {
  const slow = [1, 2, 3].map((i) =>
    client.callTool({ name: "f__slow", arguments: { ms: 400 + i } })
  );
  // Sent after the three, on the same session.
  await new Promise((r) => setTimeout(r, 100));
  const refused = await client.callTool({ name: "f__ok", arguments: {} }).then(
    () => assert.fail("the fourth request was served"),
    (error) => error as McpError,
  );
  const texts = (await Promise.all(slow)).map((r) => (r.content as { text: string }[])[0]!.text);
  return { refused, texts };
}

function assertRefusal(refused: McpError): void {
  assert.ok(refused instanceof McpError, String(refused));
  assert.equal(refused.code, -32000);
  assert.match(
    refused.message,
    /Too many requests in flight on this session: 3 .*MCP_MAX_IN_FLIGHT_PER_SESSION/,
  );
  assert.deepEqual(refused.data, {
    code: "too_many_requests",
    limit: "MCP_MAX_IN_FLIGHT_PER_SESSION",
    max: 3,
  });
}

Deno.test("Past MCP_MAX_IN_FLIGHT_PER_SESSION a Streamable HTTP or legacy SSE session's next request is refused with too_many_requests while the first ones complete", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("f")}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_MAX_IN_FLIGHT_PER_SESSION: "3",
  });
  try {
    await eventually(async () => (await readyz(gateway.url)).status === 200, "f to be ready");
    for (const connect of [connectHttp, connectSse]) {
      const client = await connect(gateway);
      const { refused, texts } = await overTheBound(client);
      assertRefusal(refused);
      assert.deepEqual(texts, ["slept 401", "slept 402", "slept 403"]);
      // Answered, the slots are free again.
      const after = await client.callTool({ name: "f__ok", arguments: {} });
      assert.equal((after.content as { text: string }[])[0]!.text, "ok");
      await client.close();
    }
    assert.ok(
      gateway.logs.some((l) => /refused a request past MCP_MAX_IN_FLIGHT_PER_SESSION/.test(l)),
    );
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("Past MCP_MAX_IN_FLIGHT_PER_SESSION a stdio request is refused the same way", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("f")}`);
  const child = spawnStdioGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_MAX_IN_FLIGHT_PER_SESSION: "3",
  });
  const writer = child.stdin.getWriter();
  const frames = new FrameReader(child.stdout);
  const send = (message: unknown) => writer.write(encoder.encode(JSON.stringify(message) + "\n"));
  try {
    await send(initializeRequest("2025-11-25", 0));
    assert.equal((await frames.next()).id, 0);
    await send({ jsonrpc: "2.0", method: "notifications/initialized" });
    let listed = 0;
    await eventually(async () => {
      const id = `list-${++listed}`;
      await send({ jsonrpc: "2.0", id, method: "tools/list" });
      let frame = await frames.next();
      while (frame.id !== id) frame = await frames.next(); // list_changed notifications
      const tools = (frame.result as { tools: { name: string }[] }).tools;
      return tools.some((t) => t.name === "f__slow");
    }, "the fault server's tools");
    for (const id of [1, 2, 3]) {
      await send({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name: "f__slow", arguments: { ms: 2000 } },
      });
    }
    await send({ jsonrpc: "2.0", id: 4, method: "ping" });
    let first = await frames.next();
    while (first.id === undefined) first = await frames.next();
    assert.equal(first.id, 4, "the fourth is answered at once, before the slow ones");
    const error = first.error as { code: number; message: string; data: { code: string } };
    assert.equal(error.code, -32000);
    assert.equal(error.data.code, "too_many_requests");
    assert.match(error.message, /MCP_MAX_IN_FLIGHT_PER_SESSION/);
    const rest = [];
    while (rest.length < 3) {
      const frame = await frames.next();
      if (frame.id !== undefined) rest.push(frame);
    }
    assert.deepEqual(rest.map((f) => f.id).sort(), [1, 2, 3]);
    for (const frame of rest) assert.ok(frame.result, JSON.stringify(frame));
  } finally {
    await frames.cancel();
    writer.releaseLock();
    await child.close();
    await fleet.remove();
  }
});

/** POSTs 64 KiB chunked (no Content-Length) on a raw socket; the response's status and text. */
async function postChunked(url: string, headers: Record<string, string>) {
  const target = new URL(url);
  const socket = await Deno.connect({ hostname: "127.0.0.1", port: Number(target.port) });
  try {
    const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
    await socket.write(encoder.encode(
      `POST ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n${head}` +
        "Transfer-Encoding: chunked\r\n\r\n",
    ));
    const chunk = " ".repeat(8 * 1024);
    for (let i = 0; i < 8; i++) {
      await socket.write(encoder.encode(`${chunk.length.toString(16)}\r\n${chunk}\r\n`));
    }
    let text = "";
    const buffer = new Uint8Array(8192);
    while (!/\r\n\r\n[\s\S]*\}/.test(text)) {
      const n = await socket.read(buffer);
      if (n === null) break;
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
    return { status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1]), text };
  } finally {
    socket.close();
  }
}

Deno.test("A body over MCP_MAX_MESSAGE_BYTES gets 413 naming the limit on every inbound HTTP path, declared or chunked", async () => {
  // A child process: a refused chunked body is left unread on the gateway's side of the socket.
  const token = "body-limit-token";
  const gateway = await spawnHttpChild({
    MCP_SERVER_AUTH_TOKEN: token,
    MCP_MAX_MESSAGE_BYTES: "4096",
  });
  try {
    const headers = await session(gateway.url, token);
    const sse = await fetch(`${gateway.url}/sse`, {
      headers: { Authorization: `Bearer ${token}`, Accept: "text/event-stream" },
    });
    const reader = sse.body!.pipeThrough(new TextDecoderStream()).getReader();
    let head = "";
    while (!/sessionId=[\w-]+/.test(head)) head += (await reader.read()).value ?? "";
    const messages = `${gateway.url}${/data: (\/messages\?sessionId=[\w-]+)/.exec(head)![1]}`;
    const big = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "ping",
      params: { pad: "x".repeat(8192) },
    });
    const paths: [string, string, Record<string, string>][] = [
      ["POST /mcp (initialize)", `${gateway.url}/mcp`, mcpHeaders(token)],
      ["POST /mcp (in a session)", `${gateway.url}/mcp`, headers],
      ["POST /messages", messages, mcpHeaders(token)],
    ];
    const limit = /exceeds the 4096-byte limit \(MCP_MAX_MESSAGE_BYTES\)/;
    for (const [what, url, h] of paths) {
      const declared = await fetch(url, { method: "POST", headers: h, body: big });
      assert.equal(declared.status, 413, what);
      assert.match((await declared.json()).error.message, limit, what);
      const streamed = await postChunked(url, h);
      assert.equal(streamed.status, 413, `${what}, chunked`);
      assert.match(streamed.text, limit, `${what}, chunked`);
    }
    await reader.cancel();
  } finally {
    await gateway.close();
  }
});
