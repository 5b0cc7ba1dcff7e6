/**
 * Bounded sessions and queues, with real processes: past MCP_MAX_SESSIONS or
 * MCP_MAX_SESSIONS_PER_TENANT a new Streamable HTTP or SSE session gets HTTP 503 with JSON-RPC
 * error -32000 naming the limit; one tenant's sessions never count against another's; a legacy
 * SSE client that POSTs but never reads its stream is cut off with a log line, memory bounded.
 */
import assert from "node:assert/strict";
import { toHex } from "../../core/auth/digest.ts";
import { sha256 } from "../../core/auth/digest.ts";
import { spawnHttpChild } from "../support/child_gateway.ts";
import { eventually, faultServer, writeFleet } from "../support/fleet.ts";
import {
  initializeRequest,
  mcpHeaders,
  startGateway,
  type TestGateway,
} from "../support/gateway.ts";

/** POSTs an initialize without a session: the response, its session id, and its body. */
async function initialize(gateway: TestGateway, token = gateway.token) {
  const response = await fetch(`${gateway.url}/mcp`, {
    method: "POST",
    headers: mcpHeaders(token),
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
  const session = response.headers.get("mcp-session-id");
  const type = response.headers.get("content-type") ?? "";
  const body = type.includes("application/json") ? await response.json() : await response.text();
  return {
    status: response.status,
    session,
    body,
    retryAfter: response.headers.get("retry-after"),
  };
}

async function closeSession(gateway: TestGateway, session: string, token = gateway.token) {
  const response = await fetch(`${gateway.url}/mcp`, {
    method: "DELETE",
    headers: mcpHeaders(token, { "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25" }),
  });
  await response.body?.cancel();
}

Deno.test("Past MCP_MAX_SESSIONS a new Streamable HTTP or SSE session gets 503 with -32000 naming the limit; a closed one frees its place", async () => {
  const gateway = await startGateway({ MCP_MAX_SESSIONS: "2" });
  try {
    const first = await initialize(gateway);
    const second = await initialize(gateway);
    assert.ok(first.session && second.session, "two sessions fit");
    const refused = await initialize(gateway);
    assert.equal(refused.status, 503);
    assert.equal(refused.session, null);
    assert.equal(refused.retryAfter, "5");
    assert.equal(refused.body.jsonrpc, "2.0");
    assert.equal(refused.body.error.code, -32000);
    assert.match(refused.body.error.message, /Too many sessions.*raise MCP_MAX_SESSIONS/);
    assert.equal(refused.body.error.data.code, "session_limit");

    const sse = await fetch(`${gateway.url}/sse`, {
      headers: { Authorization: `Bearer ${gateway.token}` },
    });
    assert.equal(sse.status, 503, "legacy SSE is admitted in the same place");
    const body = await sse.json();
    assert.equal(body.error.code, -32000);
    assert.match(body.error.message, /MCP_MAX_SESSIONS/);

    await closeSession(gateway, first.session!);
    const again = await initialize(gateway);
    assert.equal(again.status, 200, "a closed session's place is free again");
    assert.ok(again.session);
  } finally {
    await gateway.stop();
  }
});

Deno.test("Past MCP_MAX_SESSIONS_PER_TENANT a tenant is refused while another tenant still opens sessions", async () => {
  const dir = await Deno.makeTempDir({ prefix: "agent33-sessions-" });
  const tokens = {
    acme: "acme-token-for-the-limit-test",
    globex: "globex-token-for-the-limit-test",
  };
  await Deno.writeTextFile(
    `${dir}/tokens.yaml`,
    `tokens:\n${
      Object.entries(tokens).map(([tenant, token]) =>
        `  - sha256: ${
          toHex(sha256(token))
        }\n    tenant: ${tenant}\n    scopes: [mcp]\n    subject: ${tenant}-user\n`
      ).join("")
    }`,
  );
  const gateway = await startGateway({
    MCP_AUTH_TOKENS_FILE: `${dir}/tokens.yaml`,
    MCP_MAX_SESSIONS_PER_TENANT: "2",
  });
  try {
    for (let i = 0; i < 2; i++) assert.equal((await initialize(gateway, tokens.acme)).status, 200);
    const refused = await initialize(gateway, tokens.acme);
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error.code, -32000);
    assert.match(refused.body.error.message, /tenant "acme".*raise MCP_MAX_SESSIONS_PER_TENANT/);
    for (let i = 0; i < 2; i++) {
      assert.equal((await initialize(gateway, tokens.globex)).status, 200, "globex is unaffected");
    }
    const sse = await fetch(`${gateway.url}/sse`, {
      headers: { Authorization: `Bearer ${tokens.acme}` },
    });
    assert.equal(sse.status, 503);
    await sse.body?.cancel();
  } finally {
    await gateway.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

/** VmRSS of a process, in bytes (Linux). */
async function rss(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

Deno.test("A legacy SSE client that POSTs but never reads its stream is cut off with a log line, its session ended and the gateway's memory bounded", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("f")}`);
  const token = "sse-slow-reader-token";
  const QUEUE_BYTES = 2 * 1024 * 1024;
  const gateway = await spawnHttpChild({
    MCP_SERVER_AUTH_TOKEN: token,
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_SSE_MAX_QUEUE_BYTES: String(QUEUE_BYTES),
  });
  const { port } = new URL(gateway.url);
  const socket = await Deno.connect({ hostname: "127.0.0.1", port: Number(port) });
  try {
    await socket.write(
      new TextEncoder().encode(
        `GET /sse HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\n` +
          "Accept: text/event-stream\r\n\r\n",
      ),
    );
    // Read only as far as the endpoint event; from then on the client never reads again.
    let head = "";
    const buffer = new Uint8Array(4096);
    while (!/sessionId=[\w-]+/.test(head)) {
      const n = await socket.read(buffer);
      if (n === null) throw new Error(`the /sse stream ended: ${head}`);
      head += new TextDecoder().decode(buffer.subarray(0, n));
    }
    const messages = `${gateway.url}${/data: (\/messages\?sessionId=[\w-]+)/.exec(head)![1]}`;
    const post = async (message: unknown) => {
      const response = await fetch(messages, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify(message),
      });
      await response.body?.cancel();
      return response.status;
    };
    assert.equal(await post(initializeRequest("2024-11-05")), 202);
    assert.equal(await post({ jsonrpc: "2.0", method: "notifications/initialized" }), 202);
    const before = await rss(gateway.pid);

    // 512 KiB answers, paced so the upstream keeps up; unbounded, 150 MiB would pile up.
    const ANSWER = 512 * 1024;
    let sent = 0;
    let status = 202;
    for (let id = 2; status === 202 && sent < 300; id++) {
      status = await post({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name: "f__huge", arguments: { bytes: ANSWER } },
      });
      if (status === 202) sent++;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(status, 404, `the session ended (after ${sent} unread answers of 512 KiB)`);
    await eventually(
      () => /does not read its \/sse stream/.test(gateway.log()),
      "the log line naming the slow reader",
    );
    assert.match(gateway.log(), /MCP_SSE_MAX_QUEUE_BYTES/);
    const grown = (await rss(gateway.pid)) - before;
    assert.ok(
      grown < 100 * 1024 * 1024,
      `RSS grew ${Math.round(grown / 1048576)} MiB for ${sent} unread answers`,
    );
    // The connection is cut, not left hanging: the rest of what the kernel buffered, then the end.
    for (;;) {
      const n = await socket.read(buffer).catch(() => null);
      if (n === null) break;
    }
  } finally {
    socket.close();
    await gateway.close();
    await fleet.remove();
  }
});
