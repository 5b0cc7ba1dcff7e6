import assert from "node:assert/strict";
import { SignJWT } from "jose";
import {
  initializeRequest,
  mcpHeaders,
  startGateway,
  type TestGateway,
} from "../support/gateway.ts";

const SECRET = "a-secret-of-at-least-thirty-two-bytes!!";

/** Starts a gateway whose bridge fails the test if any request reaches it. */
async function guardedGateway(env: Record<string, string> = {}) {
  const gateway = await startGateway({ MCP_AUTH_JWT_SECRET: SECRET, ...env });
  const reached: string[] = [];
  gateway.kernel.bridge.serve = (_transport, session) => {
    reached.push(session.transport);
    throw new Error("the bridge must not be reached by a refused request");
  };
  return { gateway, reached };
}

function jwt(claims: Record<string, unknown>, secret = SECRET, exp: string | number = "5m") {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt()
    .setExpirationTime(exp)
    .sign(new TextEncoder().encode(secret));
}

function initialize(gateway: TestGateway, headers: Record<string, string>) {
  return fetch(`${gateway.url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify(initializeRequest("2025-11-25")),
  });
}

/** Sends a raw HTTP/1.1 request so the Host header can be anything. */
async function rawRequest(url: string, host: string, token: string): Promise<string> {
  const { port } = new URL(url);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(port) });
  try {
    const body = JSON.stringify(initializeRequest("2025-11-25"));
    const request = [
      "POST /mcp HTTP/1.1",
      `Host: ${host}`,
      `Authorization: Bearer ${token}`,
      "Content-Type: application/json",
      "Accept: application/json, text/event-stream",
      `Content-Length: ${body.length}`,
      "Connection: close",
      "",
      body,
    ].join("\r\n");
    await conn.write(new TextEncoder().encode(request));
    const chunks: Uint8Array[] = [];
    const buffer = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      chunks.push(buffer.slice(0, n));
      if (new TextDecoder().decode(chunks.at(-1)).includes("\r\n\r\n")) break;
    }
    return new TextDecoder().decode(chunks[0]);
  } finally {
    conn.close();
  }
}

const refusals: [string, (g: TestGateway) => Promise<Response>, number, RegExp][] = [
  [
    "no token",
    (g) => {
      const { Authorization: _, ...headers } = mcpHeaders("");
      return initialize(g, headers);
    },
    401,
    /missing/i,
  ],
  ["a wrong token", (g) => initialize(g, mcpHeaders("wrong-token")), 401, /unknown token/i],
  [
    "a non-Bearer scheme",
    (g) => initialize(g, { ...mcpHeaders(""), Authorization: "Basic dTpw" }),
    401,
    /bearer/i,
  ],
  [
    "a forged JWT",
    async (g) =>
      initialize(
        g,
        mcpHeaders(await jwt({ tenant: "acme" }, "another-secret-that-is-long-enough!!")),
      ),
    401,
    /signature|verif/i,
  ],
  [
    "an expired JWT",
    async (g) =>
      initialize(
        g,
        mcpHeaders(await jwt({ tenant: "acme" }, SECRET, Math.floor(Date.now() / 1000) - 60)),
      ),
    401,
    /expired/i,
  ],
  [
    "a wrong Origin",
    (g) => initialize(g, mcpHeaders(g.token, { Origin: "https://evil.example" })),
    403,
    /origin/i,
  ],
];

for (const [what, send, status, message] of refusals) {
  Deno.test(`HTTP auth refuses ${what} before the bridge`, async () => {
    const { gateway, reached } = await guardedGateway();
    try {
      const response = await send(gateway);
      assert.equal(response.status, status);
      const body = await response.json();
      assert.match(body.error.message, message);
      if (status === 401) {
        assert.match(response.headers.get("www-authenticate") ?? "", /^Bearer realm="agent33"/);
      }
      assert.deepEqual(reached, []);
    } finally {
      await gateway.stop();
    }
  });
}

Deno.test("HTTP auth refuses a wrong Host header before the bridge (DNS rebinding)", async () => {
  const { gateway, reached } = await guardedGateway();
  try {
    const head = await rawRequest(gateway.url, "evil.example", gateway.token);
    assert.match(head, /^HTTP\/1\.1 403/);
    assert.deepEqual(reached, []);
    const good = await rawRequest(gateway.url, `localhost:${new URL(gateway.url).port}`, "wrong");
    assert.match(good, /^HTTP\/1\.1 401/, "a localhost Host passes the Host check");
  } finally {
    await gateway.stop();
  }
});

Deno.test("HTTP auth resolves a valid JWT to its tenant, scopes and subject", async () => {
  const gateway = await startGateway({ MCP_AUTH_JWT_SECRET: SECRET });
  try {
    const seen: unknown[] = [];
    gateway.kernel.tools.register({
      name: "whoami",
      description: "Echoes the caller",
      inputSchema: { type: "object" },
      handler: (_args, ctx) => {
        seen.push(ctx.auth);
        return Promise.resolve({ content: [] });
      },
    });
    const token = await jwt({ tenant: "acme", scope: "mcp operator", sub: "ci-bot" });
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js"
    );
    const client = new Client({ name: "jwt", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    await client.callTool({ name: "whoami", arguments: {} });
    await client.close();
    assert.deepEqual(seen, [{ tenant: "acme", scopes: ["mcp", "operator"], subject: "ci-bot" }]);
  } finally {
    await gateway.stop();
  }
});

Deno.test("A Streamable HTTP session cannot be used with another caller's credentials", async () => {
  const gateway = await startGateway({
    MCP_AUTH_JWT_SECRET: SECRET,
    MCP_HTTP_RESPONSE_MODE: "json",
  });
  try {
    const alice = await jwt({ tenant: "acme", sub: "alice", scope: "mcp" });
    const mallory = await jwt({ tenant: "acme", sub: "mallory", scope: "mcp" });
    const opened = await initialize(gateway, mcpHeaders(alice));
    const session = opened.headers.get("mcp-session-id")!;
    await opened.body?.cancel();
    const hijack = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers: mcpHeaders(mallory, {
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-11-25",
      }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(hijack.status, 403);
    assert.match((await hijack.json()).error.message, /another caller/);
  } finally {
    await gateway.stop();
  }
});
