/**
 * `auth: passthrough` forwards only a verified OAuth/JWT access token issued for the upstream:
 * a static or tokens-file gateway token, or one holding admin/operator/approver, never leaves the
 * gateway. Attacked with a real gateway on 127.0.0.1, SDK clients and a real HTTP upstream
 * (tests/fixtures/upstreams/header_echo_server.ts) that records every Authorization header.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, McpError } from "@modelcontextprotocol/sdk/types.js";
import { writeFleet } from "../support/fleet.ts";
import { startGateway, type TestGateway } from "../support/gateway.ts";
import {
  type HeaderEchoServer,
  startHeaderEchoServer,
} from "../fixtures/upstreams/header_echo_server.ts";
import { JWT_SECRET, policyJwt } from "../support/policy_gateway.ts";

async function withPassthrough(
  extra: string,
  fn: (gateway: TestGateway, echo: HeaderEchoServer) => Promise<void>,
): Promise<void> {
  const echo = startHeaderEchoServer();
  const fleet = await writeFleet(`proxy_servers:
  - id: echo
    url: ${echo.url}
    scope: session
    auth: passthrough
${extra}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_AUTH_JWT_SECRET: JWT_SECRET,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, echo);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await echo.close();
  }
}

function jwt(audience: string[], scope = "mcp"): Promise<string> {
  return policyJwt("acme", "acme-user", scope, audience);
}

/** Calls echo__headers with `token`: its result, or the McpError a refusal throws. */
async function callWith(gateway: TestGateway, token: string): Promise<CallToolResult | McpError> {
  const client = new Client({ name: "passthrough-e2e", version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  try {
    return await client.callTool({ name: "echo__headers", arguments: {} }) as CallToolResult;
  } catch (error) {
    if (error instanceof McpError) return error;
    throw error;
  } finally {
    await client.close();
  }
}

const text = (result: CallToolResult | McpError) =>
  result instanceof McpError
    ? result.message
    : result.content.map((c) => (c.type === "text" ? c.text : "")).join("");

/** The refusal: not_allowed, naming the server and the reason, and the token nowhere. */
function assertRefused(result: CallToolResult | McpError, why: RegExp, token: string): void {
  assert.ok(result instanceof McpError, `expected a refusal, got ${text(result)}`);
  assert.equal((result.data as { code?: string }).code, "not_allowed");
  assert.match(result.message, /Upstream "echo" forwards its caller's bearer token/);
  assert.match(result.message, why);
  assert.ok(!result.message.includes(token));
}

Deno.test("A static admin token is never forwarded to a passthrough upstream", async () => {
  await withPassthrough("", async (gateway, echo) => {
    for (const token of [gateway.adminToken, gateway.token]) {
      assertRefused(await callWith(gateway, token), /gateway static token/, token);
    }
    assert.ok(
      echo.authorizations.every((h) => h === null || !h.includes(gateway.adminToken)),
      "the upstream never saw the admin token",
    );
    assert.ok(echo.authorizations.every((h) => h === null || !h.includes(gateway.token)));
    assert.ok(!gateway.logs.some((line) => line.includes(gateway.adminToken)));
  });
});

Deno.test("A tokens-file token is never forwarded to a passthrough upstream", async () => {
  const dir = await Deno.makeTempDir({ prefix: "agent33-tokens-" });
  const token = "a-tokens-file-token-for-acme";
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)),
  );
  const hex = [...hash].map((b) => b.toString(16).padStart(2, "0")).join("");
  await Deno.writeTextFile(
    `${dir}/tokens.yaml`,
    `tokens:\n  - sha256: ${hex}\n    tenant: acme\n    scopes: [mcp]\n`,
  );
  const echo = startHeaderEchoServer();
  const fleet = await writeFleet(
    `proxy_servers:\n  - id: echo\n    url: ${echo.url}\n    scope: session\n    auth: passthrough\n`,
  );
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_AUTH_TOKENS_FILE: `${dir}/tokens.yaml`,
  });
  try {
    await gateway.kernel.fleetStarted;
    assertRefused(await callWith(gateway, token), /tokens-file token/, token);
    assert.ok(echo.authorizations.every((h) => h === null || !h.includes(token)));
  } finally {
    await gateway.stop();
    await fleet.remove();
    await echo.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A JWT holding a gateway scope beyond mcp is never forwarded", async () => {
  await withPassthrough("", async (gateway, echo) => {
    for (const scope of ["mcp admin", "mcp operator", "mcp approver"]) {
      const token = await jwt([echo.url], scope);
      assertRefused(await callWith(gateway, token), /holds the gateway scope/, token);
      assert.ok(echo.authorizations.every((h) => h === null || !h.includes(token)));
    }
  });
});

Deno.test("A JWT whose audience does not name the upstream is not forwarded", async () => {
  await withPassthrough("", async (gateway, echo) => {
    const token = await jwt(["https://gateway.example/mcp"]);
    assertRefused(await callWith(gateway, token), /its aud claim names none of/, token);
    assert.ok(echo.authorizations.every((h) => h === null || !h.includes(token)));
  });
});

Deno.test("A JWT whose audience names the upstream's URL is forwarded", async () => {
  await withPassthrough("", async (gateway, echo) => {
    const token = await jwt(["https://gateway.example/mcp", echo.url]);
    const result = await callWith(gateway, token);
    assert.ok(!(result instanceof McpError), text(result));
    assert.equal(JSON.parse(text(result)).authorization, `Bearer ${token}`);
    assert.ok(echo.authorizations.includes(`Bearer ${token}`));
  });
});

Deno.test("A JWT whose audience names the entry's passthrough_audience is forwarded", async () => {
  await withPassthrough("    passthrough_audience: [api://upstream]\n", async (gateway, echo) => {
    const token = await jwt(["api://upstream"]);
    const result = await callWith(gateway, token);
    assert.equal(JSON.parse(text(result)).authorization, `Bearer ${token}`);
    // The URL no longer suffices once the operator named the audience.
    const byUrl = await jwt([echo.url]);
    assertRefused(await callWith(gateway, byUrl), /"api:\/\/upstream"/, byUrl);
  });
});
