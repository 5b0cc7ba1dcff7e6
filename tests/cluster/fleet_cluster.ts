/**
 * Fleet, policies and replica lifecycle in a cluster (issue 22, items 3 and 4): the fleet comes
 * from the shared agent33_config bucket, so an admin edit through one replica is live on all; an
 * edit based on a stale revision is refused with 409; a broken document written to the bucket
 * keeps the fleet on every replica; /v1/operator/status lists every replica's heartbeat with the
 * revisions it runs; SIGTERM drains a replica (readyz 503, its call in flight finishes, its
 * heartbeat is deleted).
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { NEEDS_CLUSTER, startCluster, type TestCluster } from "../support/cluster.ts";
import { eventually, fixture } from "../support/fleet.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

// deno-lint-ignore no-explicit-any
type Json = any;

async function admin(
  cluster: TestCluster,
  url: string,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; body: Json }> {
  const response = await fetch(`${url}${path}`, {
    method: init.method ?? "GET",
    headers: {
      Authorization: `Bearer ${cluster.adminToken}`,
      ...(init.body === undefined ? {} : { "Content-Type": "application/json" }),
      ...init.headers,
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

/** The fault fixture as a JSON fleet entry, as an operator would POST it. */
function faultEntry(id: string) {
  return {
    id,
    command: ["deno", "run", "--config", `${ROOT}deno.json`, fixture("upstreams/fault_server.ts")],
    sandbox: "deno",
    env: { FAULT: "none" },
    permissions: { env: ["FAULT"], read: true },
  };
}

async function serverIds(cluster: TestCluster, url: string): Promise<string[]> {
  const { body } = await admin(cluster, url, "/v1/mcp/proxy/servers");
  return body.servers.map((s: { id: string }) => s.id).sort();
}

async function connectClient(cluster: TestCluster, url: string): Promise<Client> {
  const client = new Client({ name: "fleet-cluster", version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${cluster.token}` } },
    }),
  );
  return client;
}

/** Writes a document to the shared config bucket directly, as `nats kv put` would. */
async function putConfig(cluster: TestCluster, key: string, value: unknown): Promise<number> {
  const nc = await connect({ servers: cluster.natsUrl.split(",") });
  try {
    const kv = await nc.jetstream().views.kv("agent33_config");
    return await kv.put(key, new TextEncoder().encode(JSON.stringify(value)));
  } finally {
    await nc.close();
  }
}

Deno.test(
  "the fleet and the replicas of a cluster: one shared fleet, revisions, heartbeats, drain",
  NEEDS_CLUSTER,
  async (t) => {
    const cluster = await startCluster({ env: { MCP_CLUSTER_HEARTBEAT_MS: "500" } });
    const [a, b, c] = cluster.replicas as [
      typeof cluster.replicas[0],
      typeof cluster.replicas[0],
      typeof cluster.replicas[0],
    ];
    try {
      let revision = 0;
      await t.step(
        "status lists the three replicas, each running the same fleet revision",
        async () => {
          await eventually(async () => {
            const { body } = await admin(cluster, a.url, "/v1/operator/status");
            return body.cluster?.replicas?.length === 3;
          }, "three heartbeats");
          const { body } = await admin(cluster, b.url, "/v1/operator/status");
          assert.equal(body.replica, b.id);
          assert.deepEqual(body.cluster.replicas.map((r: Json) => r.id), ["r1", "r2", "r3"]);
          revision = body.cluster.fleetRevision;
          assert.ok(revision > 0);
          for (const replica of body.cluster.replicas) {
            assert.equal(replica.fleetRevision, revision, replica.id);
            assert.equal(replica.policyRevision, body.cluster.policyRevision, replica.id);
            assert.equal(replica.draining, false);
            assert.equal(typeof replica.url, "string");
          }
          const listed = await admin(cluster, c.url, "/v1/mcp/proxy/servers");
          assert.equal(listed.body.revision, revision);
          assert.equal(listed.headers.get("etag"), `"${revision}"`);
        },
      );

      await t.step("a server added through replica A is live on B and C", async () => {
        const added = await admin(cluster, a.url, "/v1/mcp/proxy/servers", {
          method: "POST",
          body: faultEntry("second"),
          headers: { "If-Match": `"${revision}"` },
        });
        assert.equal(added.status, 201, JSON.stringify(added.body));
        assert.deepEqual(added.body.fleet.added, ["second"]);
        assert.ok(added.body.revision > revision);
        revision = added.body.revision;
        for (const replica of [b, c]) {
          await eventually(
            async () => (await serverIds(cluster, replica.url)).includes("second"),
            `the new server on ${replica.id}`,
          );
          const client = await connectClient(cluster, replica.url);
          try {
            await eventually(async () => {
              const { tools } = await client.listTools();
              return tools.some((tool) => tool.name === "second__ok");
            }, `second__ok on ${replica.id}`);
            const result = await client.callTool({ name: "second__ok", arguments: {} });
            assert.deepEqual(result.content, [{ type: "text", text: "ok" }], replica.id);
          } finally {
            await client.close();
          }
        }
      });

      await t.step(
        "an edit based on a stale revision is refused with 409 revision_conflict",
        async () => {
          const stale = await admin(cluster, b.url, "/v1/mcp/proxy/servers/second", {
            method: "DELETE",
            headers: { "If-Match": `"${revision - 1}"` },
          });
          assert.equal(stale.status, 409);
          assert.equal(stale.body.error.code, "revision_conflict");
          assert.equal(stale.body.error.revision, revision);
          assert.match(stale.body.error.message, /If-Match/);
          for (const replica of cluster.replicas) {
            assert.ok((await serverIds(cluster, replica.url)).includes("second"), replica.id);
          }
        },
      );

      await t.step("a broken document in the bucket keeps the fleet on every replica", async () => {
        const broken = await putConfig(cluster, "fleet", {
          text: "proxy_servers:\n  - id: Bad Id\n",
        });
        await eventually(async () => {
          const { body } = await admin(cluster, c.url, "/v1/operator/status");
          return body.cluster.replicas.length === 3 &&
            body.cluster.replicas.every((r: Json) => r.rejected?.fleet?.revision === broken);
        }, "every replica to report the broken revision");
        for (const replica of cluster.replicas) {
          assert.deepEqual(
            await serverIds(cluster, replica.url),
            ["fixture", "second"],
            replica.id,
          );
          const { body } = await admin(cluster, replica.url, "/v1/operator/status");
          assert.equal(body.cluster.fleetRevision, revision, `${replica.id} runs what it ran`);
        }
        const client = await connectClient(cluster, a.url);
        try {
          const result = await client.callTool({ name: "fixture__ok", arguments: {} });
          assert.deepEqual(result.content, [{ type: "text", text: "ok" }]);
        } finally {
          await client.close();
        }
      });

      await t.step(
        "SIGTERM drains a replica: readyz 503, its call finishes, its heartbeat goes",
        async () => {
          const client = await connectClient(cluster, c.url);
          const call = client.callTool({ name: "fixture__slow", arguments: { ms: 1500 } });
          // The call is running on C before the signal.
          await new Promise((resolve) => setTimeout(resolve, 300));
          const killed = c.kill("SIGTERM");
          let sawDraining = false;
          await eventually(
            async () => {
              const ready = await fetch(`${c.url}/readyz`).catch(() => undefined);
              if (ready) {
                await ready.body?.cancel();
                sawDraining ||= ready.status === 503;
              }
              return sawDraining;
            },
            "readyz 503 on the draining replica",
            5_000,
          );
          const result = await call;
          assert.deepEqual(result.content, [{ type: "text", text: "slept 1500" }]);
          await client.close().catch(() => {});
          await killed;
          const { body } = await admin(cluster, a.url, "/v1/operator/status");
          assert.deepEqual(body.cluster.replicas.map((r: Json) => r.id), ["r1", "r2"]);
        },
      );
    } finally {
      await cluster.stop();
    }
  },
);
