import assert from "node:assert/strict";
import { connect } from "nats";
import { systemClock } from "../../core/support/clock.ts";
import { createLogger } from "../../core/support/logger.ts";
import { retry } from "../../core/support/retry.ts";
import { NEEDS_NATS } from "../../tests/support/nats_server.ts";
import { eventually } from "../../tests/support/fleet.ts";
import { natsServerCommands, startNatsCluster } from "../../tools/cluster/nats_cluster.ts";
import {
  canConnect,
  freePort,
  HOST,
  spawnProcess,
  waitUntil,
} from "../../tools/cluster/process.ts";
import { isTransientKvError, openKvBucket } from "./kv_bucket.ts";

function recording(lines: string[]) {
  return createLogger({ level: "debug", sink: (line) => void lines.push(line) });
}

Deno.test("the errors of a JetStream cluster still forming count as passing on their own", () => {
  for (
    const message of [
      "TIMEOUT",
      "503",
      "JetStream system temporarily unavailable",
      "insufficient resources",
      "no suitable peers for placement",
      "stream name already in use with a different configuration",
      "subjects overlap with an existing stream",
    ]
  ) {
    assert.ok(isTransientKvError(new Error(message)), message);
  }
  assert.ok(isTransientKvError(Object.assign(new Error("x"), { code: "TIMEOUT" })));
  for (const message of ["invalid bucket name", "CONNECTION_CLOSED", "authorization violation"]) {
    assert.equal(isTransientKvError(new Error(message)), false, message);
  }
});

Deno.test(
  "a bucket opened while the JetStream cluster has no meta leader is tried again until it forms",
  NEEDS_NATS,
  async () => {
    const cluster = await startNatsCluster(3);
    const nc = await connect({ servers: cluster.nodes[0]!.url });
    try {
      // Two of three nodes down: no quorum, so no meta leader and no bucket can be created.
      await Promise.all([cluster.nodes[1]!.stop(), cluster.nodes[2]!.stop()]);
      const lines: string[] = [];
      const opening = openKvBucket(nc, "agent33_forming_probe", { history: 1, replicas: 1 }, {
        clock: systemClock,
        logger: recording(lines),
      });
      let settled = false;
      opening.then(() => settled = true, () => settled = true);
      await eventually(
        () => lines.some((line) => line.includes('opening the KV bucket "agent33_forming_probe"')),
        "a retry to be logged",
        20_000,
      );
      assert.equal(settled, false, "no bucket without a meta leader");
      // Both come back: with only one, Debian's nats-server 2.9.10 once elected no meta leader
      // within 30 s under CI's load (the lone node had campaigned for up to 20 s).
      await Promise.all([cluster.nodes[1]!.start(), cluster.nodes[2]!.start()]);
      const kv = await opening;
      await kv.put("k", "v");
      assert.equal((await kv.get("k"))?.string(), "v");
    } finally {
      await nc.close();
      await cluster.stop();
    }
  },
);

Deno.test(
  "a bucket asked of a nats-server without JetStream fails at once, naming it",
  NEEDS_NATS,
  async () => {
    const port = freePort();
    const server = spawnProcess({
      name: `nats-server without JetStream on port ${port}`,
      commands: natsServerCommands(Deno.env.get("NATS_SERVER_BIN")),
      install: "apt-get install -y nats-server",
      args: ["-a", HOST, "-p", String(port)],
    });
    await waitUntil(`nats-server on port ${port}`, () => canConnect(port), 10_000, server);
    const nc = await connect({ servers: `nats://${HOST}:${port}` });
    try {
      const lines: string[] = [];
      await assert.rejects(
        openKvBucket(nc, "agent33_probe", {}, { clock: systemClock, logger: recording(lines) }),
        /JetStream disabled/,
      );
      assert.deepEqual(lines, [], "not tried again");
    } finally {
      await nc.close();
      await server.stop();
    }
  },
);

Deno.test(
  "a bucket open that fails for another reason is not tried again",
  NEEDS_NATS,
  async () => {
    const cluster = await startNatsCluster(1);
    const nc = await connect({ servers: cluster.urls });
    try {
      const lines: string[] = [];
      await assert.rejects(
        openKvBucket(nc, "not a bucket name", {}, { clock: systemClock, logger: recording(lines) }),
        /invalid bucket name/i,
      );
      assert.deepEqual(lines, []);
    } finally {
      await nc.close();
      await cluster.stop();
    }
  },
);

Deno.test(
  "a key written through one NATS node is read at once through every other node",
  NEEDS_NATS,
  async () => {
    const cluster = await startNatsCluster(3);
    const connections = await Promise.all(
      cluster.nodes.map((node) => connect({ servers: node.url })),
    );
    try {
      const context = { clock: systemClock, logger: recording([]) };
      const buckets = await Promise.all(
        connections.map((nc) => openKvBucket(nc, "agent33_consistency", { replicas: 3 }, context)),
      );
      // A stream without a leader for a moment (an election on a loaded machine) answers 503:
      // unavailable, not stale, so that is tried again; a stale value is what fails the test.
      const again = <T>(op: () => Promise<T>) =>
        retry(op, {
          clock: systemClock,
          attempts: 50,
          transient: isTransientKvError,
          pauseMs: () => 100,
          retrying: () => {},
        });
      const stale: string[] = [];
      for (let round = 0; round < 500; round++) {
        const writer = buckets[round % 3]!;
        const value = `v${round}`;
        await again(() => writer.put("k", value));
        const reads = await Promise.all(buckets.map((kv) => again(() => kv.get("k"))));
        for (const [node, entry] of reads.entries()) {
          if (entry?.string() !== value) {
            stale.push(`round ${round} node ${node}: ${entry?.string()}`);
          }
        }
      }
      assert.deepEqual(stale, []);
    } finally {
      await Promise.all(connections.map((nc) => nc.close()));
      await cluster.stop();
    }
  },
);
