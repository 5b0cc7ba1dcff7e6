/**
 * Per-call retention: after a warm-up, a thousand more `tools/call` through an in-process gateway
 * (Streamable HTTP in each response mode, the soak's own client) must leave no object behind per
 * call. Live objects are counted by constructor in V8 heap snapshots (each one starts with a full
 * GC), so the check is a count of what is still reachable, never a memory figure.
 */
import assert from "node:assert/strict";
import { writeHeapSnapshot } from "node:v8";
import { faultServer, writeFleet } from "../support/fleet.ts";
import { openSession, startGateway } from "../support/gateway.ts";
import { postToolCall } from "./soak.ts";

/** Live heap objects and closures by constructor name, after a full GC. */
async function liveObjects(): Promise<Map<string, number>> {
  const dir = await Deno.makeTempDir({ prefix: "agent33-heap-" });
  try {
    // The first snapshot's GC queues the finalizers of what died (e.g. the WeakRef bookkeeping of
    // dependent abort signals); they run on the next turns, before the snapshot that is counted.
    writeHeapSnapshot(`${dir}/settle.heapsnapshot`);
    await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 50));
    const snapshot = JSON.parse(
      await Deno.readTextFile(writeHeapSnapshot(`${dir}/count.heapsnapshot`)),
    ) as {
      snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
      nodes: number[];
      strings: string[];
    };
    const { node_fields: fields, node_types: [types] } = snapshot.snapshot.meta;
    const typeAt = fields.indexOf("type");
    const nameAt = fields.indexOf("name");
    const counts = new Map<string, number>();
    for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
      const type = types[snapshot.nodes[i + typeAt]!];
      if (type !== "object" && type !== "closure") continue;
      const name = `${type}:${snapshot.strings[snapshot.nodes[i + nameAt]!]}`;
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    return counts;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

for (const mode of ["json", "sse"] as const) {
  Deno.test(`tools/call retains nothing per call (gateway and the soak's client, ${mode} response mode)`, async () => {
    const fleet = await writeFleet(
      `proxy_servers:${faultServer("u0", { extra: "    timeouts: { connect: 30, call: 10 }\n" })}`,
    );
    const gateway = await startGateway({
      MCP_PROXY_CONFIG_PATH: fleet.path,
      MCP_HTTP_RESPONSE_MODE: mode,
      MCP_POLICY_PATH: "/nonexistent/policies",
    }, { keepLog: () => false });
    try {
      await gateway.kernel.fleetStarted;
      const headers = await openSession(gateway);
      let next = 0;
      const calls = async (count: number) => {
        const end = next + count;
        await Promise.all(Array.from({ length: 16 }, async () => {
          while (next < end) {
            const id = next++;
            const reply = await postToolCall(gateway.url, headers, id, "u0__ok");
            assert.equal(reply.id, id);
            assert.ok(reply.result, JSON.stringify(reply));
          }
        }));
      };
      await calls(300); // warm-up: caches, compiled code, pools
      const before = await liveObjects();
      const n = 1000;
      await calls(n);
      const after = await liveObjects();
      const grown = [...after]
        .map(([name, count]) => [name, count - (before.get(name) ?? 0)] as const)
        .filter(([, growth]) => growth >= n / 2)
        .map(([name, growth]) => `${name} +${growth}`);
      assert.deepEqual(grown, [], `live objects grew with ${n} calls: ${grown.join(", ")}`);
    } finally {
      await gateway.stop();
      await fleet.remove();
    }
  });
}
