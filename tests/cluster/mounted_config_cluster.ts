/**
 * A cluster whose fleet and policies are each replica's mounted files (MCP_CLUSTER_CONFIG=mounted,
 * a ConfigMap): the admin API refuses fleet edits with 409 fleet_read_only, every replica reports
 * the same digests, and a change of the file is applied by every replica from its own watch.
 */
import assert from "node:assert/strict";
import { NEEDS_CLUSTER, startCluster, type TestCluster } from "../support/cluster.ts";
import { eventually, faultServer } from "../support/fleet.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

async function status(cluster: TestCluster, url: string): Promise<Json> {
  const response = await fetch(`${url}/v1/operator/status`, {
    headers: { Authorization: `Bearer ${cluster.adminToken}` },
  });
  assert.equal(response.status, 200);
  return await response.json();
}

Deno.test(
  "mounted config in a cluster: read-only to the admin API, the same digests everywhere, file changes applied by all",
  NEEDS_CLUSTER,
  async (t) => {
    const cluster = await startCluster({ env: { MCP_CLUSTER_CONFIG: "mounted" } });
    try {
      let digest = "";
      await t.step("every replica reports the digests of the same files", async () => {
        await eventually(
          async () => (await status(cluster, cluster.url)).cluster?.replicas?.length === 3,
          "three heartbeats",
        );
        const { cluster: view } = await status(cluster, cluster.replicas[0]!.url);
        assert.equal(view.fleetRevision, 0);
        digest = view.replicas[0].digests.fleet;
        assert.match(digest, /^sha256:[0-9a-f]{12}$/);
        assert.deepEqual(
          new Set(view.replicas.map((r: Json) => r.digests.fleet)),
          new Set([digest]),
        );
      });

      await t.step("an admin edit of the fleet is refused with 409 fleet_read_only", async () => {
        const response = await fetch(
          `${cluster.replicas[1]!.url}/v1/mcp/proxy/servers/fixture/disable`,
          {
            method: "POST",
            headers: {
              Authorization: `Bearer ${cluster.adminToken}`,
              "Content-Type": "application/json",
            },
            body: "{}",
          },
        );
        const body = await response.json();
        assert.equal(response.status, 409, JSON.stringify(body));
        assert.equal(body.error.code, "fleet_read_only");
      });

      await t.step("a changed fleet file is applied by every replica", async () => {
        const text = await Deno.readTextFile(`${cluster.dir}/fleet.yaml`);
        await Deno.writeTextFile(`${cluster.dir}/fleet.yaml`, text + faultServer("second"));
        await eventually(async () => {
          const { cluster: view } = await status(cluster, cluster.url);
          return view.replicas.length === 3 &&
            view.replicas.every((r: Json) => r.digests.fleet !== digest && r.fleet.servers === 2);
        }, "every replica to run the changed file");
      });
    } finally {
      await cluster.stop();
    }
  },
);
