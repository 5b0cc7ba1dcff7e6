/**
 * Approvers and operators are confined to their tenant, attacked over real HTTP with a real
 * upstream (server-memory from npm): an approver or operator of `acme` neither sees nor decides
 * `globex`'s approval requests (their arguments are globex's data, their decision globex's
 * risk), reads only acme's part of the event trail, and cannot read or restart what spans every
 * tenant. Scope `all_tenants` (or `admin`) is the explicit grant of the whole gateway.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { memoryServer } from "../support/fleet.ts";
import type { TestGateway } from "../support/gateway.ts";
import { policyJwt, withPolicyGateway } from "../support/policy_gateway.ts";

const POLICY = `
tenants:
  "*":
    effects:
      "memory__delete_*": destructive
    approval: [destructive]
connectors:
  memory:
    tenants: ["*"]
    effects: [read, write, destructive]
`;

async function withGateway(fn: (gateway: TestGateway) => Promise<void>): Promise<void> {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  try {
    await withPolicyGateway(`proxy_servers:${memoryServer(dataDir)}`, POLICY, fn);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}

const jwt = policyJwt;

/** A caller of `tenant` over Streamable HTTP. */
async function mcpCaller(gateway: TestGateway, tenant: string): Promise<Client> {
  const client = new Client({ name: `caller-${tenant}`, version: "1" });
  const token = await jwt(tenant, `${tenant}-agent`, "mcp");
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const deletion = { entityNames: ["nothing-to-delete"] };

/** Files a destructive call's approval request as `client`; its id. */
async function pendingRequest(client: Client): Promise<string> {
  const refused = await client.callTool({ name: "memory__delete_entities", arguments: deletion })
    .then(() => assert.fail("a destructive call must wait for approval"), (e: McpError) => e);
  assert.equal((refused.data as { code: string }).code, "approval_required");
  return (refused.data as { request: { id: string } }).request.id;
}

/** An API answer: its status and JSON body. */
async function api(
  gateway: TestGateway,
  token: string,
  path: string,
  method = "GET",
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}` },
  });
  return { status: response.status, body: await response.json() };
}

Deno.test("An approver of one tenant neither sees nor decides another tenant's approval requests", async () => {
  await withGateway(async (gateway) => {
    const globex = await mcpCaller(gateway, "globex");
    try {
      const id = await pendingRequest(globex);
      for (const scope of ["approver", "operator", "approver operator"]) {
        const acme = await jwt("acme", "mallory", scope);
        const listed = await api(gateway, acme, "/v1/approvals");
        assert.equal(listed.status, 200);
        assert.deepEqual(listed.body.approvals, [], `${scope} of acme lists none of globex's`);
        const read = await api(gateway, acme, `/v1/approvals/${id}`);
        assert.equal(read.status, 404, `${scope} of acme cannot read it`);
        assert.doesNotMatch(JSON.stringify(read.body), /nothing-to-delete/);
      }
      const mallory = await jwt("acme", "mallory", "approver");
      for (const action of ["approve", "deny"]) {
        const decided = await api(gateway, mallory, `/v1/approvals/${id}/${action}`, "POST");
        assert.equal(decided.status, 404, `an approver of acme cannot ${action} it`);
        assert.equal((decided.body.error as { code: string }).code, "not_found");
      }

      // globex's own approver sees it, arguments and all, and approves it.
      const carol = await jwt("globex", "carol", "approver");
      const listed = await api(gateway, carol, "/v1/approvals?status=pending");
      const [request] = listed.body.approvals as { id: string; arguments: unknown }[];
      assert.equal(request?.id, id);
      assert.deepEqual(request?.arguments, deletion);
      const approved = await api(gateway, carol, `/v1/approvals/${id}/approve`, "POST");
      assert.equal(approved.status, 200);
      const done = await globex.callTool({
        name: "memory__delete_entities",
        arguments: deletion,
        _meta: { [APPROVAL_TOKEN_META_KEY]: approved.body.token },
      });
      assert.notEqual(done.isError, true);
    } finally {
      await globex.close();
    }
  });
});

Deno.test("An approver with all_tenants (or admin) decides every tenant's requests", async () => {
  await withGateway(async (gateway) => {
    const acme = await mcpCaller(gateway, "acme");
    try {
      const first = await pendingRequest(acme);
      const onCall = await jwt("ops", "on-call", "approver all_tenants");
      const listed = await api(gateway, onCall, "/v1/approvals?status=pending");
      assert.deepEqual((listed.body.approvals as { id: string }[]).map((r) => r.id), [first]);
      assert.equal((await api(gateway, onCall, `/v1/approvals/${first}/deny`, "POST")).status, 200);
      const second = await pendingRequest(acme);
      const admin = await api(gateway, gateway.adminToken, `/v1/approvals/${second}/deny`, "POST");
      assert.equal(admin.status, 200);
      const alone = await jwt("ops", "bystander", "all_tenants");
      const refused = await api(gateway, alone, "/v1/approvals");
      assert.equal(refused.status, 403, "all_tenants alone grants nothing");
    } finally {
      await acme.close();
    }
  });
});

Deno.test("An operator of one tenant cannot read or restart what spans every tenant", async () => {
  await withGateway(async (gateway) => {
    const acme = await jwt("acme", "olga", "operator");
    const whole = await jwt("ops", "olga", "operator all_tenants");
    for (
      const [method, path] of [
        ["GET", "/metrics"],
        ["GET", "/v1/operator/status"],
        ["GET", "/v1/mcp/config"],
        ["GET", "/v1/mcp/proxy/servers"],
        ["GET", "/v1/scanner/findings"],
        ["POST", "/v1/mcp/proxy/servers/memory/restart"],
      ] as const
    ) {
      const refused = await fetch(`${gateway.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${acme}` },
      });
      assert.equal(refused.status, 403, `${method} ${path}`);
      assert.match(refused.headers.get("www-authenticate") ?? "", /scope="operator all_tenants"/);
      assert.match(
        (await refused.json()).error.message,
        /operator of tenant "acme" only.*scope all_tenants/,
      );
      if (method === "GET") {
        const read = await fetch(`${gateway.url}${path}`, {
          headers: { Authorization: `Bearer ${whole}` },
        });
        assert.equal(read.status, 200, `${path} with all_tenants`);
        await read.body?.cancel();
      }
    }
    assert.equal(gateway.kernel.proxy.get("memory")?.state, "READY", "nothing was restarted");
  });
});

Deno.test("An operator of one tenant reads only its tenant's events on /v1/events", async () => {
  await withGateway(async (gateway) => {
    const response = await fetch(`${gateway.url}/v1/events`, {
      headers: { Authorization: `Bearer ${await jwt("acme", "olga", "operator")}` },
    });
    assert.equal(response.status, 200);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const until = async (pattern: RegExp) => {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) assert.fail(`the stream ended before ${pattern}: ${text}`);
        text += value;
      }
    };
    await until(/event: stream\.open/);
    // globex calls first: were its events forwarded, they would come before acme's.
    const globex = await mcpCaller(gateway, "globex");
    const acme = await mcpCaller(gateway, "acme");
    try {
      await pendingRequest(globex);
      await pendingRequest(acme);
      await until(/event: approval\.requested\ndata: [^\n]*"tenant":"acme"/);
    } finally {
      await globex.close();
      await acme.close();
      await reader.cancel();
    }
    assert.match(text, /event: session\.opened\ndata: [^\n]*"tenant":"acme"/);
    assert.match(text, /event: governance\.decision\ndata: [^\n]*"tenant":"acme"/);
    assert.doesNotMatch(text, /globex/, "nothing of globex's");
    assert.doesNotMatch(text, /event: proxy\./, "nor the whole fleet's");
  });
});
