/**
 * Tenant isolation of upstream traffic, attacked with real processes: two tenants (JWTs) call one
 * stdio upstream (tests/fixtures/upstreams/sampling_server.ts) that logs and asks for sampling
 * during the call. Shared, the gateway cannot tell whose call a request belongs to and relays it
 * to no one; per tenant or per session, each caller gets exactly its own.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { SignJWT } from "jose";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { startGateway, type TestGateway } from "../support/gateway.ts";

const SECRET = "a-jwt-secret-of-at-least-thirty-two-bytes";
const ROOT = new URL("../../", import.meta.url).pathname;
const POLICY = `
tenants:
  "*":
    allow: ["*"]
connectors:
  sampling:
    tenants: ["*"]
    effects: [read, write, destructive]
`;

/** A fleet entry for the sampling fixture; `extra` is more YAML for the entry (4-space indent). */
function samplingServer(extra = ""): string {
  const command = [
    "deno",
    "run",
    "--config",
    `${ROOT}deno.json`,
    fixture("upstreams/sampling_server.ts"),
  ];
  return `proxy_servers:
  - id: sampling
    command: ${JSON.stringify(command)}
    sandbox: deno
    permissions: { env: [SAMPLING_SECRET], read: true }
${extra}`;
}

async function withGateway(
  fleetYaml: string,
  fn: (gateway: TestGateway) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  const fleet = await writeFleet(fleetYaml);
  const policyDir = await Deno.makeTempDir({ prefix: "agent33-policy-" });
  await Deno.writeTextFile(`${policyDir}/policy.yaml`, POLICY);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: policyDir,
    MCP_AUTH_JWT_SECRET: SECRET,
    ...env,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(policyDir, { recursive: true });
  }
}

function jwt(tenant: string, sub = `${tenant}-user`): Promise<string> {
  return new SignJWT({ tenant, scope: "mcp" })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(sub)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(new TextEncoder().encode(SECRET));
}

/** A tenant's client that answers sampling with its own name and records all it receives. */
interface Caller {
  client: Client;
  /** Every byte of upstream traffic this client received: sampling prompts and log lines. */
  received: string[];
  call(tool: string, args?: Record<string, unknown>): Promise<CallToolResult>;
}

async function caller(gateway: TestGateway, tenant: string): Promise<Caller> {
  const client = new Client({ name: `client-${tenant}`, version: "1" }, {
    capabilities: { sampling: {} },
  });
  const received: string[] = [];
  client.setRequestHandler(CreateMessageRequestSchema, (request) => {
    received.push(JSON.stringify(request.params));
    return {
      role: "assistant",
      model: "test",
      content: { type: "text", text: `sampled by ${tenant}` },
    };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    received.push(JSON.stringify(n.params));
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${await jwt(tenant)}` } },
    }),
  );
  return {
    client,
    received,
    call: (tool, args = {}) =>
      client.callTool({ name: `sampling__${tool}`, arguments: args }) as Promise<CallToolResult>,
  };
}

const text = (result: CallToolResult) =>
  result.content.map((c) => (c.type === "text" ? c.text : "")).join("");

Deno.test("A shared stdio upstream's sampling and logs reach neither of two tenants calling at once", async () => {
  await withGateway(samplingServer(), async (gateway) => {
    const a = await caller(gateway, "acme");
    const b = await caller(gateway, "globex");
    try {
      const [ra, rb] = await Promise.all([
        a.call("ask", { marker: "ALPHA", wait_for: 2 }),
        b.call("ask", { marker: "BRAVO", wait_for: 2 }),
      ]);
      // Each result is its own, with a clear refusal instead of the other tenant's answer.
      assert.equal(ra.isError, true);
      assert.equal(rb.isError, true);
      assert.match(text(ra), /^sampling failed: .*ambiguous.*scope: tenant or scope: session/);
      assert.match(text(rb), /^sampling failed: .*ambiguous/);
      assert.doesNotMatch(text(ra), /BRAVO|globex/);
      assert.doesNotMatch(text(rb), /ALPHA|acme/);
      // No byte of either tenant's traffic reached the other (nor, ambiguous, itself).
      assert.deepEqual(a.received.filter((r) => r.includes("BRAVO")), []);
      assert.deepEqual(b.received.filter((r) => r.includes("ALPHA")), []);
      assert.deepEqual([...a.received, ...b.received], []);
      // The log lines went to the operator log only.
      assert.ok(
        gateway.logs.some((l) => l.includes("upstream log not relayed") && l.includes("ALPHA")),
      );
    } finally {
      await a.client.close();
      await b.client.close();
    }
  });
});

Deno.test("A shared upstream relays sampling and logs exactly when one session has calls in flight", async () => {
  await withGateway(samplingServer(), async (gateway) => {
    const a = await caller(gateway, "acme");
    try {
      const result = await a.call("ask", { marker: "ALPHA" });
      assert.equal(text(result), "answer for ALPHA: sampled by acme");
      await eventually(() => a.received.length === 2, "the log line and the sampling request");
      assert.ok(a.received.some((r) => r.includes("private log of ALPHA")));
      assert.ok(a.received.some((r) => r.includes("prompt of ALPHA")));
    } finally {
      await a.client.close();
    }
  });
});
