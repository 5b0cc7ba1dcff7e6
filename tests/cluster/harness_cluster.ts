/**
 * The cluster harness itself (tests/support/cluster.ts): a 3-node NATS JetStream cluster with one
 * meta leader, three gateway replicas each answering at its own URL with its own id, HAProxy
 * spreading requests over all three, and stop() leaving no process behind.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  descendantPids,
  metaCluster,
  NEEDS_CLUSTER,
  processAlive,
  startCluster,
} from "../support/cluster.ts";

async function statusOf(url: string, token: string): Promise<{ replica?: string }> {
  const response = await fetch(`${url}/v1/operator/status`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  assert.equal(response.status, 200);
  return await response.json();
}

Deno.test(
  "the cluster harness starts NATS, replicas and HAProxy, and stops them all",
  NEEDS_CLUSTER,
  async (t) => {
    const cluster = await startCluster();
    let pids: number[] = [];
    try {
      await t.step("the NATS nodes form one JetStream cluster with one meta leader", async () => {
        assert.equal(cluster.nats.length, 3);
        const views = await Promise.all(cluster.nats.map((node) => metaCluster(node)));
        const leaders = new Set(views.map((view) => view?.leader));
        assert.equal(leaders.size, 1, JSON.stringify(views));
        assert.ok([...leaders][0], "a leader is named");
        assert.equal(views[0]?.cluster_size, 3);
        assert.equal(cluster.natsUrl.split(",").length, 3);
      });

      await t.step(
        "each replica answers /healthz at its own URL and names its own id",
        async () => {
          assert.deepEqual(cluster.replicas.map((r) => r.id), ["r1", "r2", "r3"]);
          for (const replica of cluster.replicas) {
            const health = await fetch(`${replica.url}/healthz`);
            assert.deepEqual(await health.json(), { status: "ok" });
            assert.equal((await statusOf(replica.url, cluster.adminToken)).replica, replica.id);
          }
        },
      );

      await t.step("HAProxy spreads requests round-robin over every replica", async () => {
        const seen = new Map<string, number>();
        for (let i = 0; i < 9; i++) {
          const { replica } = await statusOf(cluster.url, cluster.adminToken);
          seen.set(replica ?? "?", (seen.get(replica ?? "?") ?? 0) + 1);
        }
        assert.deepEqual(Object.fromEntries([...seen].sort()), { r1: 3, r2: 3, r3: 3 });
      });

      await t.step("every replica serves the shared fleet to the mcp token", async () => {
        for (const replica of cluster.replicas) {
          const client = new Client({ name: "harness", version: "1" });
          await client.connect(
            new StreamableHTTPClientTransport(new URL(`${replica.url}/mcp`), {
              requestInit: { headers: { Authorization: `Bearer ${cluster.token}` } },
            }),
          );
          try {
            const result = await client.callTool({ name: "fixture__ok", arguments: {} });
            assert.deepEqual(result.content, [{ type: "text", text: "ok" }], replica.id);
          } finally {
            await client.close();
          }
        }
      });

      await t.step(
        "the tokens hold their scopes: mcp is no operator, the approver is",
        async () => {
          const asClient = await fetch(`${cluster.url}/v1/operator/status`, {
            headers: { Authorization: `Bearer ${cluster.token}` },
          });
          assert.equal(asClient.status, 403);
          await asClient.body?.cancel();
          const approvals = await fetch(`${cluster.url}/v1/approvals`, {
            headers: { Authorization: `Bearer ${cluster.approverToken}` },
          });
          assert.equal(approvals.status, 200);
          await approvals.body?.cancel();
        },
      );
      pids = descendantPids();
      assert.ok(pids.length >= 7, `3 NATS nodes, 3 replicas and HAProxy run: ${pids}`);
    } finally {
      await cluster.stop();
    }
    const left = pids.filter(processAlive);
    assert.deepEqual(left, [], "no process of the cluster outlives stop()");
  },
);
