/**
 * Governance state shared by replicas (docs/scale-out.md, "Governance state"), on a real cluster:
 * three replicas on a 3-node NATS JetStream cluster, each reached at its own URL (its own MCP
 * session), so every step names the replica it goes through.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { serializesCompareAndSet } from "../../plugins/bus-nats/nats_shared_state.ts";
import { NEEDS_CLUSTER, startCluster, type TestCluster } from "../support/cluster.ts";
import { eventually, fixtureCommand } from "../support/fleet.ts";

const PER_MINUTE = 6;
const POLICY = `tenants:
  "*":
    approval: [destructive]
    rate_limits:
      mutable__count: { per_minute: ${PER_MINUTE} }
`;

async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: "governance-cluster", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

function codeOf(error: unknown): string | undefined {
  return ((error as McpError).data as { code?: string } | undefined)?.code;
}

async function api(url: string, token: string, path: string, init: RequestInit = {}) {
  const response = await fetch(`${url}${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
  });
  return { status: response.status, body: await response.json() };
}

/** The quarantined tools of server `mutable` on one replica. */
async function quarantinedOn(url: string, cluster: TestCluster): Promise<string[]> {
  const { body } = await api(url, cluster.adminToken, "/v1/operator/status");
  const server = body.servers.find((s: { id: string }) => s.id === "mutable");
  return (server?.quarantined ?? []).map((q: { tool: string }) => q.tool);
}

Deno.test("governance state holds across replicas", NEEDS_CLUSTER, async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "agent33-governance-cluster-" });
  const description = `${dir}/description.txt`;
  const audit = `${dir}/audit.jsonl`;
  await Deno.writeTextFile(description, "Gets a fact about a topic.");
  const cluster = await startCluster({
    fleet: `proxy_servers:
  - id: mutable
    command: ${JSON.stringify(fixtureCommand("upstreams/mutable_server.ts"))}
    env: { MUTABLE_DESCRIPTION_FILE: "${description}" }
`,
    policies: { "cluster.yaml": POLICY },
    // The client identity may also approve: the requester ≠ approver rule, not a scope, refuses.
    env: { MCP_SERVER_AUTH_SCOPES: "mcp,approver", MCP_AUDIT_LOG: audit },
  });
  const [, b, c] = cluster.replicas as [
    TestCluster["replicas"][0],
    TestCluster["replicas"][0],
    TestCluster["replicas"][0],
  ];
  const clients = await Promise.all(cluster.replicas.map((r) => connect(r.url, cluster.token)));
  const [onA, onB, onC] = clients as [Client, Client, Client];
  try {
    await t.step(
      "an approval requested through A is approved through B, its token fetched and used through C, then refused on every replica",
      async () => {
        const call = { name: "mutable__delete_fact", arguments: { topic: "moon" } };
        const refused = await onA.callTool(call).then(
          () => assert.fail("a destructive call needs approval"),
          (e: McpError) => e,
        );
        assert.equal(codeOf(refused), "approval_required");
        const { id } = (refused.data as { request: { id: string } }).request;

        const listed = await api(b.url, cluster.approverToken, "/v1/approvals?status=pending");
        assert.deepEqual(listed.body.approvals.map((r: { id: string }) => r.id), [id]);
        const approved = await api(b.url, cluster.approverToken, `/v1/approvals/${id}/approve`, {
          method: "POST",
        });
        assert.equal(approved.status, 200, JSON.stringify(approved.body));

        const fetched = await api(c.url, cluster.token, `/v1/approvals/${id}`);
        assert.equal(fetched.body.status, "approved");
        assert.equal(fetched.body.token, approved.body.token);
        const retry = { ...call, _meta: { [APPROVAL_TOKEN_META_KEY]: fetched.body.token } };
        const done = await onC.callTool(retry);
        assert.deepEqual(done.content, [{ type: "text", text: "deleted moon" }]);

        for (const client of [onA, onB, onC]) {
          await assert.rejects(
            client.callTool(retry),
            (e: McpError) => codeOf(e) === "approval_replayed",
          );
        }
      },
    );

    await t.step(
      "the requester cannot approve its own request through another replica",
      async () => {
        const refused = await onA.callTool({
          name: "mutable__delete_fact",
          arguments: { topic: "sun" },
        }).catch((e: McpError) => e) as McpError;
        const { id } = (refused.data as { request: { id: string } }).request;
        for (const replica of [b, c]) {
          const self = await api(replica.url, cluster.token, `/v1/approvals/${id}/approve`, {
            method: "POST",
          });
          assert.equal(self.status, 403);
          assert.equal(self.body.code ?? self.body.error?.code, "self_approval");
        }
        const pending = await api(c.url, cluster.approverToken, `/v1/approvals/${id}`);
        assert.equal(pending.body.status, "pending");
      },
    );

    // Concurrent compare-and-set on a replicated (R3) bucket is serialized only from nats-server
    // 2.9.21 on (nats-io/nats-server#4320: older servers may accept both writes of a race).
    const version = (await (await fetch(`${cluster.nats[0]!.monitorUrl}/varz`)).json()).version;
    await t.step({
      name: `two approvers deciding at once through B and C: one wins, the other gets a conflict${
        serializesCompareAndSet(version) ? "" : ` (skipped: nats-server ${version} < 2.9.21)`
      }`,
      ignore: !serializesCompareAndSet(version),
      fn: async () => {
        const refused = await onA.callTool({
          name: "mutable__delete_fact",
          arguments: { topic: "stars" },
        }).catch((e: McpError) => e) as McpError;
        const { id } = (refused.data as { request: { id: string } }).request;
        const decisions = await Promise.all([
          api(b.url, cluster.approverToken, `/v1/approvals/${id}/approve`, { method: "POST" }),
          api(c.url, cluster.adminToken, `/v1/approvals/${id}/deny`, {
            method: "POST",
            body: JSON.stringify({ reason: "not now" }),
          }),
        ]);
        assert.deepEqual(decisions.map((d) => d.status).sort(), [200, 409]);
        const lost = decisions.find((d) => d.status === 409)!;
        assert.equal(lost.body.code ?? lost.body.error?.code, "approval_not_pending");
      },
    });

    await t.step(
      `a rate limit of ${PER_MINUTE}/min holds across replicas (exactly: tolerance 0 with the shared counters)`,
      async () => {
        const outcomes: string[] = [];
        for (let i = 0; i < 2 * PER_MINUTE; i++) {
          const client = clients[i % 3]!;
          outcomes.push(
            await client.callTool({ name: "mutable__count", arguments: {} }).then(
              () => "ok",
              (e: McpError) => codeOf(e) ?? String(e),
            ),
          );
        }
        assert.deepEqual(outcomes, [
          ...Array(PER_MINUTE).fill("ok"),
          ...Array(PER_MINUTE).fill("rate_limited"),
        ]);
      },
    );

    await t.step(
      "a pinned tool changed under replica A is quarantined on every replica",
      async () => {
        for (const client of clients) {
          const fact = await client.callTool({
            name: "mutable__get_fact",
            arguments: { topic: "x" },
          });
          assert.deepEqual(fact.content, [{ type: "text", text: "a fact" }]);
        }
        await Deno.writeTextFile(description, "Gets a fact about a topic, now reworded.");
        await onA.callTool({ name: "mutable__reload", arguments: {} });
        for (const replica of cluster.replicas) {
          await eventually(
            async () => (await quarantinedOn(replica.url, cluster)).includes("get_fact"),
            `get_fact quarantined on ${replica.id}`,
          );
        }
        for (const client of clients) {
          await assert.rejects(
            client.callTool({ name: "mutable__get_fact", arguments: { topic: "x" } }),
            (e: McpError) => codeOf(e) === "quarantined",
          );
        }
      },
    );

    await t.step(
      "an operator's release on one replica serves the tool again on every replica",
      async () => {
        // Every replica serves the reworded definition before it is reviewed (a replica still
        // serving the old one would quarantine it again, rightly: that one was not reviewed).
        for (const client of [onB, onC]) {
          await client.callTool({ name: "mutable__reload", arguments: {} });
          await eventually(
            async () =>
              (await client.listTools()).tools.some((t) => t.name === "mutable__reloaded_1"),
            "the reloaded catalog listed",
          );
        }
        const released = await api(b.url, cluster.adminToken, "/v1/scanner/release", {
          method: "POST",
          body: JSON.stringify({ server: "mutable", tool: "get_fact" }),
        });
        assert.equal(released.status, 200, JSON.stringify(released.body));
        for (const replica of cluster.replicas) {
          await eventually(
            async () => !(await quarantinedOn(replica.url, cluster)).includes("get_fact"),
            `get_fact released on ${replica.id}`,
          );
        }
        for (const client of clients) {
          const fact = await client.callTool({
            name: "mutable__get_fact",
            arguments: { topic: "x" },
          });
          assert.deepEqual(fact.content, [{ type: "text", text: "a fact" }]);
        }
      },
    );

    await t.step("every replica's audit lines name it", async () => {
      // One audit file for the three (O_APPEND lines): each decision says which replica made it.
      await eventually(async () => {
        const lines = (await Deno.readTextFile(audit).catch(() => "")).split("\n").filter(Boolean);
        const replicas = new Set(lines.map((line) => JSON.parse(line).replica));
        return ["r1", "r2", "r3"].every((id) => replicas.has(id));
      }, "audit lines from r1, r2 and r3");
    });

    await t.step(
      "with every NATS node down, rate limits still hold (each replica's share) and approvals fail closed",
      async () => {
        await Promise.all(cluster.nats.map((node) => node.stop()));
        try {
          const outcomes: string[] = [];
          for (let i = 0; i < 2 * PER_MINUTE; i++) {
            outcomes.push(
              await onA.callTool({ name: "mutable__count", arguments: {} }).then(
                () => "ok",
                (e: McpError) => codeOf(e) ?? String(e),
              ),
            );
          }
          const admitted = outcomes.filter((o) => o === "ok").length;
          assert.ok(admitted <= PER_MINUTE, `the share never exceeds the limit: ${outcomes}`);
          assert.ok(outcomes.includes("rate_limited"), `${outcomes}`);
          await assert.rejects(
            onA.callTool({ name: "mutable__delete_fact", arguments: { topic: "comet" } }),
            (e: McpError) => codeOf(e) === "policy_error" && /agent33_approvals/.test(e.message),
          );
        } finally {
          await Promise.all(cluster.nats.map((node) => node.start()));
        }
      },
    );
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
    await cluster.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
