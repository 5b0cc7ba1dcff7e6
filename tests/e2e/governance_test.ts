/**
 * Governance through the gateway with a real upstream (server-memory from npm): approvals by API
 * and in-band, single-use tokens, per-tenant listings, the connector boundary, hot reload.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, type McpError } from "@modelcontextprotocol/sdk/types.js";
import { SignJWT } from "jose";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { eventually, memoryServer } from "../support/fleet.ts";
import { connectHttp, type TestGateway } from "../support/gateway.ts";
import { JWT_SECRET, policyJwt, withPolicyGateway } from "../support/policy_gateway.ts";

const POLICY = `
tenants:
  "*":
    effects:
      "memory__delete_*": destructive
      memory__read_graph: read
    approval: [destructive]
  acme:
    allow: ["memory__*", "system_status"]
    effects:
      "memory__delete_*": destructive
    approval: [destructive]
  globex:
    deny: ["memory__*"]
connectors:
  memory:
    tenants: ["*"]
    effects: [read, write, destructive]
`;

interface Env {
  gateway: TestGateway;
  policyDir: string;
  events: GatewayEvent[];
}

async function withGovernedGateway(
  policy: string,
  fn: (env: Env) => Promise<void>,
  extraEnv: Record<string, string> = {},
): Promise<void> {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  try {
    await withPolicyGateway(
      `proxy_servers:${memoryServer(dataDir)}`,
      policy,
      async (gateway, policyDir) => {
        const events: GatewayEvent[] = [];
        gateway.kernel.bus.subscribe((e) => events.push(e));
        assert.equal(gateway.kernel.proxy.get("memory")?.state, "READY");
        await fn({ gateway, policyDir, events });
      },
      extraEnv,
    );
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}

function jwt(tenant: string, sub: string, scope = "mcp") {
  return policyJwt(tenant, sub, scope);
}

async function clientFor(
  gateway: TestGateway,
  token: string,
  elicitation?: (message: string) => unknown,
) {
  const client = new Client(
    { name: "governance-e2e", version: "1" },
    elicitation ? { capabilities: { elicitation: {} } } : {},
  );
  if (elicitation) {
    client.setRequestHandler(
      ElicitRequestSchema,
      (request) => elicitation(request.params.message) as never,
    );
  }
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const entity = { entities: [{ name: "probe", entityType: "thing", observations: ["x"] }] };
const deletion = { entityNames: ["probe"] };

Deno.test("A destructive call needs approval: approve via the API, retry with the token, and the token works once", async () => {
  await withGovernedGateway(POLICY, async ({ gateway, events }) => {
    const client = await connectHttp(gateway); // static token: tenant default, scope admin
    try {
      await client.callTool({ name: "memory__create_entities", arguments: entity });
      const refused = await client.callTool({
        name: "memory__delete_entities",
        arguments: deletion,
      })
        .then(
          () => assert.fail("a destructive call must not pass without approval"),
          (e: McpError) => e,
        );
      assert.equal((refused.data as { code: string }).code, "approval_required");
      const request =
        (refused.data as { request: { id: string; tool: string; effect: string } }).request;
      assert.deepEqual([request.tool, request.effect], ["memory__delete_entities", "destructive"]);
      assert.ok(events.some((e) => e.type === "approval.requested"));

      const listed = await (await fetch(`${gateway.url}/v1/approvals?status=pending`, {
        headers: { Authorization: `Bearer ${gateway.token}` },
      })).json();
      assert.deepEqual(listed.approvals.map((a: { id: string }) => a.id), [request.id]);

      // Another identity decides: the requester's own token may not (see auth_test.ts).
      const approved = await fetch(`${gateway.url}/v1/approvals/${request.id}/approve`, {
        method: "POST",
        headers: { Authorization: `Bearer ${gateway.adminToken}` },
      });
      assert.equal(approved.status, 200);
      const { token } = await approved.json();

      const call = {
        name: "memory__delete_entities",
        arguments: deletion,
        _meta: { [APPROVAL_TOKEN_META_KEY]: token },
      };
      const done = await client.callTool(call);
      assert.notEqual(done.isError, true);
      const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
      assert.doesNotMatch(JSON.stringify(graph.content), /probe/);

      await assert.rejects(
        client.callTool(call),
        (e: McpError) => (e.data as { code: string }).code === "approval_replayed",
      );
      await assert.rejects(
        client.callTool({ ...call, arguments: { entityNames: ["other"] } }),
        (e: McpError) =>
          ["approval_mismatch", "approval_replayed"].includes((e.data as { code: string }).code),
      );
    } finally {
      await client.close();
    }
  });
});

Deno.test("The caller that asked can fetch its token once an approver approves", async () => {
  await withGovernedGateway(POLICY, async ({ gateway }) => {
    const bob = await jwt("acme", "bob");
    const client = await clientFor(gateway, bob);
    try {
      const refused = await client.callTool({
        name: "memory__delete_entities",
        arguments: deletion,
      })
        .catch((e: McpError) => e) as McpError;
      const { id } = (refused.data as { request: { id: string } }).request;
      const pending = await (await fetch(`${gateway.url}/v1/approvals/${id}`, {
        headers: { Authorization: `Bearer ${bob}` },
      })).json();
      assert.equal(pending.status, "pending");
      const decide = await fetch(`${gateway.url}/v1/approvals/${id}/approve`, {
        method: "POST",
        headers: { Authorization: `Bearer ${bob}` },
      });
      assert.equal(decide.status, 403, "a caller without approver scope cannot approve");
      await decide.body?.cancel();
      const operator = await jwt("ops", "carol", "approver all_tenants");
      const approved = await fetch(`${gateway.url}/v1/approvals/${id}/approve`, {
        method: "POST",
        headers: { Authorization: `Bearer ${operator}` },
      });
      assert.equal(approved.status, 200);
      await approved.body?.cancel();
      const mine = await (await fetch(`${gateway.url}/v1/approvals/${id}`, {
        headers: { Authorization: `Bearer ${bob}` },
      })).json();
      assert.equal(mine.status, "approved");
      const done = await client.callTool({
        name: "memory__delete_entities",
        arguments: deletion,
        _meta: { [APPROVAL_TOKEN_META_KEY]: mine.token },
      });
      assert.notEqual(done.isError, true);
    } finally {
      await client.close();
    }
  });
});

Deno.test("Two callers whose JWTs carry no sub are two identities: one cannot read or take the other's approval token", async () => {
  await withGovernedGateway(POLICY, async ({ gateway }) => {
    const subless = (jti: string) =>
      new SignJWT({ tenant: "acme", scope: "mcp", jti })
        .setProtectedHeader({ alg: "HS256" })
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode(JWT_SECRET));
    const [asker, other] = [await subless("a"), await subless("b")];
    const client = await clientFor(gateway, asker);
    try {
      const refused = await client.callTool({
        name: "memory__delete_entities",
        arguments: deletion,
      })
        .catch((e: McpError) => e) as McpError;
      const { id } = (refused.data as { request: { id: string } }).request;
      const approved = await fetch(`${gateway.url}/v1/approvals/${id}/approve`, {
        method: "POST",
        headers: { Authorization: `Bearer ${await jwt("ops", "carol", "approver all_tenants")}` },
      });
      assert.equal(approved.status, 200);
      await approved.body?.cancel();
      const stolen = await fetch(`${gateway.url}/v1/approvals/${id}`, {
        headers: { Authorization: `Bearer ${other}` },
      });
      assert.equal(stolen.status, 404, "another sub-less caller of the same tenant sees nothing");
      assert.doesNotMatch(await stolen.text(), /"token"/);
      const mine = await (await fetch(`${gateway.url}/v1/approvals/${id}`, {
        headers: { Authorization: `Bearer ${asker}` },
      })).json();
      assert.equal(mine.status, "approved");
      assert.equal(typeof mine.token, "string");
    } finally {
      await client.close();
    }
  });
});

Deno.test("Over HTTP a caller cannot approve its own call in-band by default: the request waits for an operator", async () => {
  await withGovernedGateway(POLICY, async ({ gateway }) => {
    const asked: string[] = [];
    const client = await clientFor(gateway, gateway.token, (message) => {
      asked.push(message);
      return { action: "accept", content: { approve: true } };
    });
    try {
      await client.callTool({ name: "memory__create_entities", arguments: entity });
      const refused = await client.callTool({
        name: "memory__delete_entities",
        arguments: deletion,
      })
        .then(
          () => assert.fail("the caller approved its own destructive call"),
          (e: McpError) => e,
        );
      assert.equal((refused.data as { code: string }).code, "approval_required");
      assert.deepEqual(asked, [], "the client was never asked");
      const id = (refused.data as { request: { id: string } }).request.id;
      assert.equal(gateway.kernel.approvals.get(id)?.status, "pending", "queued for an operator");
    } finally {
      await client.close();
    }
  });
});

Deno.test("A tenant whose policy says approval: in_band approves in-band over HTTP; declining refuses with approval_denied", async () => {
  const policy = POLICY.replace(
    "      memory__read_graph: read\n    approval: [destructive]",
    "      memory__read_graph: read\n    approval: { effects: [destructive], by: in_band }",
  );
  assert.match(policy, /by: in_band/);
  await withGovernedGateway(policy, async ({ gateway }) => {
    const asked: string[] = [];
    let answer = true;
    const client = await clientFor(gateway, gateway.token, (message) => {
      asked.push(message);
      return { action: "accept", content: { approve: answer } };
    });
    try {
      await client.callTool({ name: "memory__create_entities", arguments: entity });
      const done = await client.callTool({ name: "memory__delete_entities", arguments: deletion });
      assert.notEqual(done.isError, true);
      assert.equal(asked.length, 1);
      assert.match(asked[0]!, /memory__delete_entities/);
      answer = false;
      await assert.rejects(
        client.callTool({ name: "memory__delete_entities", arguments: deletion }),
        (e: McpError) => (e.data as { code: string }).code === "approval_denied",
      );
    } finally {
      await client.close();
    }
  });
});

Deno.test("tools/list shows each tenant only what it may call", async () => {
  await withGovernedGateway(POLICY, async ({ gateway }) => {
    const acme = await clientFor(gateway, await jwt("acme", "a"));
    const globex = await clientFor(gateway, await jwt("globex", "g"));
    try {
      const acmeTools = (await acme.listTools()).tools.map((t) => t.name);
      const globexTools = (await globex.listTools()).tools.map((t) => t.name);
      assert.ok(acmeTools.includes("memory__read_graph"));
      assert.ok(acmeTools.includes("system_status"));
      assert.ok(!globexTools.some((n) => n.startsWith("memory__")));
      assert.ok(globexTools.includes("system_status"));
      await assert.rejects(
        globex.callTool({ name: "memory__read_graph", arguments: {} }),
        (e: McpError) => (e.data as { code: string }).code === "tool_denied",
      );
    } finally {
      await acme.close();
      await globex.close();
    }
  });
});

Deno.test("The connector boundary refuses a tenant the destination does not admit", async () => {
  const policy = POLICY.replace('tenants: ["*"]', "tenants: [acme]");
  await withGovernedGateway(policy, async ({ gateway }) => {
    const client = await connectHttp(gateway); // tenant default
    try {
      await assert.rejects(
        client.callTool({ name: "memory__read_graph", arguments: {} }),
        (e: McpError) =>
          (e.data as { code: string }).code === "connector_denied" && /memory/.test(e.message),
      );
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(!names.some((n) => n.startsWith("memory__")), "unreachable tools are not listed");
    } finally {
      await client.close();
    }
  });
});

Deno.test("A broken policy edit keeps the old policy in force and is reported; a valid edit applies", async () => {
  await withGovernedGateway(POLICY, async ({ gateway, policyDir, events }) => {
    const client = await connectHttp(gateway);
    try {
      await Deno.writeTextFile(`${policyDir}/policy.yaml`, "tenants:\n  acme:\n    alow: [x]\n");
      await eventually(
        () => events.some((e) => e.type === "policy.reload_failed"),
        "the reload failure",
      );
      const failure = events.find((e) => e.type === "policy.reload_failed") as { reason: string };
      assert.match(failure.reason, /policy\.yaml:3/);
      assert.match(failure.reason, /did you mean "allow"/);
      const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
      assert.notEqual(graph.isError, true, "the old policy still allows reads");

      await Deno.writeTextFile(
        `${policyDir}/policy.yaml`,
        POLICY.replace('"*":', '"*":\n    deny: ["memory__read_graph"]'),
      );
      await eventually(() => events.some((e) => e.type === "policy.reloaded"), "the reload");
      await assert.rejects(
        client.callTool({ name: "memory__read_graph", arguments: {} }),
        (e: McpError) => (e.data as { code: string }).code === "tool_denied",
      );
    } finally {
      await client.close();
    }
  });
});

Deno.test("Every decision is audited to the file with the arguments' hash, never the raw arguments", async () => {
  const auditDir = await Deno.makeTempDir({ prefix: "agent33-audit-" });
  try {
    await withGovernedGateway(POLICY, async ({ gateway }) => {
      const client = await connectHttp(gateway);
      try {
        await client.callTool({ name: "memory__read_graph", arguments: {} });
        await client.callTool({
          name: "memory__delete_entities",
          arguments: { entityNames: ["secret-name"] },
        })
          .catch(() => {});
      } finally {
        await client.close();
      }
      await gateway.kernel.audit.flush();
      const lines = (await Deno.readTextFile(`${auditDir}/audit.jsonl`)).trim().split("\n").map((
        l,
      ) => JSON.parse(l));
      assert.deepEqual(lines.map((l) => [l.tool, l.verdict]), [
        ["memory__read_graph", "allow"],
        ["memory__delete_entities", "approval_required"],
      ]);
      for (const line of lines) {
        assert.match(line.argumentsHash, /^[0-9a-f]{64}$/);
        assert.equal(line.tenant, "default");
      }
      assert.doesNotMatch(JSON.stringify(lines), /secret-name/);
    }, { MCP_AUDIT_LOG: `${auditDir}/audit.jsonl` });
  } finally {
    await Deno.remove(auditDir, { recursive: true });
  }
});
