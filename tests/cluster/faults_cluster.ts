/**
 * Faults of a scale-out deployment, on a real local cluster (3 NATS nodes, 3 replicas, HAProxy):
 * a gateway replica SIGKILLed under load, and a NATS node stopped and started again.
 */
import assert from "node:assert/strict";
import { connect, type NatsConnection } from "nats";
import {
  descendantPids,
  metaCluster,
  NEEDS_CLUSTER,
  processAlive,
  startCluster,
  type TestCluster,
} from "../support/cluster.ts";
import { openRawSession, type RawOutcome, rawToolCall, resultText } from "../support/mcp_http.ts";
import { eventually } from "../support/fleet.ts";

const IN_FLIGHT = 64;
const SLOW_MS = 6_000;

interface Session {
  replica: string;
  headers: Record<string, string>;
}

async function inFlightOn(url: string): Promise<number> {
  const response = await fetch(`${url}/readyz`);
  const body = await response.json() as { toolCallsInFlight?: number };
  return body.toolCallsInFlight ?? 0;
}

async function replicaAnswering(cluster: TestCluster): Promise<string | undefined> {
  const response = await fetch(`${cluster.url}/v1/operator/status`, {
    headers: { Authorization: `Bearer ${cluster.adminToken}` },
  });
  if (response.status !== 200) {
    await response.body?.cancel();
    return undefined;
  }
  return ((await response.json()) as { replica?: string }).replica;
}

/** Two sessions per replica, opened at each replica's own URL. */
async function sessionsOnEveryReplica(cluster: TestCluster): Promise<Session[]> {
  const sessions: Session[] = [];
  for (const replica of cluster.replicas) {
    for (let i = 0; i < 2; i++) {
      sessions.push({
        replica: replica.id,
        headers: await openRawSession(replica.url, cluster.token),
      });
    }
  }
  return sessions;
}

function urlOf(cluster: TestCluster, id: string): string {
  return cluster.replicas.find((r) => r.id === id)!.url;
}

async function killUnderLoad(cluster: TestCluster): Promise<void> {
  const sessions = await sessionsOnEveryReplica(cluster);
  const victim = cluster.replicas[1]!;
  const calls = Array.from({ length: IN_FLIGHT }, (_, i) => {
    const session = sessions[i % sessions.length]!;
    return rawToolCall(urlOf(cluster, session.replica), session.headers, "fixture__slow", {
      ms: SLOW_MS,
    }).then((outcome) => ({ session, outcome, settledAt: Date.now() }));
  });
  let onVictim = 0;
  await eventually(async () => {
    const counts = await Promise.all(cluster.replicas.map((r) => inFlightOn(r.url)));
    onVictim = counts[1]!;
    return counts.reduce((a, b) => a + b, 0) === IN_FLIGHT;
  }, `${IN_FLIGHT} calls in flight over the replicas`);
  const victimPid = victim.pid();
  assert.ok(victimPid !== undefined, `${victim.id} runs`);
  const upstreams = descendantPids(victimPid);
  assert.ok(upstreams.length > 0, "the replica runs its fixture upstream as a child process");
  await victim.kill("SIGKILL");
  const killedAt = Date.now();
  const settled = await Promise.all(calls);
  await eventually(
    () => upstreams.every((pid) => !processAlive(pid)),
    "the killed replica's upstream processes to exit (their stdin closed)",
    10_000,
  );

  const failed = settled.filter((s) => resultText(s.outcome) === undefined);
  assert.equal(failed.length, onVictim, "exactly the calls in flight on the killed replica fail");
  for (const { session, outcome, settledAt } of failed) {
    assert.equal(session.replica, victim.id, JSON.stringify(outcome));
    assertClearFailure(outcome);
    assert.ok(settledAt - killedAt < SLOW_MS / 2, "a call on a dead replica fails at once");
  }
  for (const { outcome } of settled.filter((s) => s.session.replica !== victim.id)) {
    assert.equal(resultText(outcome), `slept ${SLOW_MS}`, JSON.stringify(outcome));
  }
}

/** A failure a client can act on: the connection dropped, or the load balancer answered 502/503. */
function assertClearFailure(outcome: RawOutcome): void {
  if (outcome.kind === "transport_error") {
    assert.match(outcome.error, /fetch failed|error reading a body|connection/i);
  } else {
    assert.equal(outcome.kind, "http_error", JSON.stringify(outcome));
    assert.ok([502, 503].includes(outcome.status), JSON.stringify(outcome));
  }
}

async function natsClient(cluster: TestCluster): Promise<NatsConnection> {
  return await connect({ servers: cluster.natsUrl.split(","), reconnectTimeWait: 100 });
}

/** What one node's own copy of a stream holds (undefined when it keeps no copy). */
async function localStreamMessages(
  monitorUrl: string,
  stream: string,
): Promise<number | undefined> {
  const response = await fetch(`${monitorUrl}/jsz?streams=true`);
  const jsz = await response.json() as {
    account_details?: { stream_detail?: { name: string; state: { messages: number } }[] }[];
  };
  const detail = jsz.account_details?.flatMap((a) => a.stream_detail ?? [])
    .find((s) => s.name === stream);
  return detail?.state.messages;
}

Deno.test(
  "a replica SIGKILLed or a NATS node stopped costs only the calls in flight on it",
  NEEDS_CLUSTER,
  async (t) => {
    const cluster = await startCluster();
    try {
      await t.step(
        `SIGKILL of a replica with ${IN_FLIGHT} calls in flight: its calls fail at once with a clear error, every other call succeeds`,
        () => killUnderLoad(cluster),
      );

      await t.step(
        "after the kill HAProxy serves every new request from the live replicas",
        async () => {
          const seen = new Set<string | undefined>();
          for (let i = 0; i < 12; i++) seen.add(await replicaAnswering(cluster));
          assert.deepEqual([...seen].sort(), ["r1", "r3"]);
        },
      );

      await t.step("the killed replica started again takes its share of requests", async () => {
        await cluster.replicas[1]!.start();
        await eventually(
          async () => (await replicaAnswering(cluster)) === "r2",
          "HAProxy to use r2",
        );
      });

      await t.step(
        "a NATS node stopped: no call fails, KV keeps working (replication factor 3); started again it rejoins and catches up",
        async () => {
          const nc = await natsClient(cluster);
          try {
            const kv = await nc.jetstream().views.kv("agent33_harness_probe", { replicas: 3 });
            await kv.put("before", "1");
            const nonces = await nc.jetstreamManager()
              .then((m) => m.streams.info("KV_agent33_approval_nonces"));
            assert.equal(nonces.config.num_replicas, 3, "the gateway's own bucket is on 3 nodes");

            const leader = (await metaCluster(cluster.nats[0]!))?.leader;
            const node = cluster.nats.find((n) => n.name === leader)!;
            await node.stop();
            const sessions = await sessionsOnEveryReplica(cluster);
            const calls = await Promise.all(
              sessions.flatMap((s) =>
                Array.from(
                  { length: 4 },
                  () => rawToolCall(urlOf(cluster, s.replica), s.headers, "fixture__ok"),
                )
              ),
            );
            assert.deepEqual(calls.map(resultText), calls.map(() => "ok"));
            await eventually(async () => {
              try {
                await kv.put("during", "2");
                return true;
              } catch {
                return false; // a new stream leader is being elected
              }
            }, "a KV write while a NATS node is down");
            assert.equal((await kv.get("before"))?.string(), "1");

            await node.start();
            assert.ok((await metaCluster(node))?.leader, `${node.name} sees a meta leader again`);
            await eventually(
              async () =>
                (await localStreamMessages(node.monitorUrl, "KV_agent33_harness_probe")) === 2,
              `${node.name}'s copy of the probe bucket to catch up`,
            );
          } finally {
            await nc.close();
          }
        },
      );
    } finally {
      await cluster.stop();
    }
  },
);
