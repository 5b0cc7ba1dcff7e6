/**
 * Faults of a scale-out deployment, on a real local cluster (3 NATS nodes, 3 replicas, HAProxy),
 * every request through HAProxy on shared sessions: a gateway replica SIGKILLed under load, and a
 * NATS node (the JetStream meta leader) stopped and started again.
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

async function inFlightOn(url: string): Promise<number> {
  const response = await fetch(`${url}/readyz`);
  const body = await response.json() as { toolCallsInFlight?: number };
  return body.toolCallsInFlight ?? 0;
}

/** fixture__slow calls a replica finished (its own /metrics). */
async function slowCallsServed(cluster: TestCluster, url: string): Promise<number> {
  const response = await fetch(`${url}/metrics`, {
    headers: { Authorization: `Bearer ${cluster.adminToken}` },
  });
  return (await response.text()).split("\n")
    .filter((line) =>
      line.startsWith("agent33_tool_calls_total{") && line.includes("fixture__slow")
    )
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

async function inFlightOnAll(cluster: TestCluster): Promise<number[]> {
  return await Promise.all(cluster.replicas.map((r) => inFlightOn(r.url)));
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

/** `count` sessions opened through HAProxy (so on every replica in turn). */
async function sessionsThroughHaproxy(
  cluster: TestCluster,
  count: number,
): Promise<Record<string, string>[]> {
  const sessions: Record<string, string>[] = [];
  for (let i = 0; i < count; i++) sessions.push(await openRawSession(cluster.url, cluster.token));
  return sessions;
}

/** Three calls of fixture__ok per session through HAProxy: each lands on more than one replica. */
async function everySessionAnswers(cluster: TestCluster, sessions: Record<string, string>[]) {
  const calls = await Promise.all(
    sessions.flatMap((headers) =>
      [1, 2, 3].map(() => rawToolCall(cluster.url, headers, "fixture__ok"))
    ),
  );
  assert.deepEqual(calls.map(resultText), calls.map(() => "ok"), JSON.stringify(calls));
}

async function killUnderLoad(cluster: TestCluster): Promise<void> {
  const sessions = await sessionsThroughHaproxy(cluster, 8);
  const victim = cluster.replicas[1]!;
  const calls = Array.from(
    { length: IN_FLIGHT },
    (_, i) =>
      rawToolCall(cluster.url, sessions[i % sessions.length]!, "fixture__slow", { ms: SLOW_MS })
        .then((outcome) => ({ outcome, settledAt: Date.now() })),
  );
  let onVictim = 0;
  await eventually(async () => {
    const counts = await inFlightOnAll(cluster);
    onVictim = counts[1]!;
    return counts.reduce((a, b) => a + b, 0) === IN_FLIGHT;
  }, `${IN_FLIGHT} calls in flight over the replicas`);
  assert.ok(onVictim > 0, "round-robin put calls on every replica");
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
  for (const { outcome, settledAt } of failed) {
    assertClearFailure(outcome);
    assert.ok(settledAt - killedAt < SLOW_MS / 2, "a call on a dead replica fails at once");
  }
  for (const { outcome } of settled.filter((s) => resultText(s.outcome) !== undefined)) {
    assert.equal(resultText(outcome), `slept ${SLOW_MS}`, JSON.stringify(outcome));
  }
  const executed = await Promise.all(
    cluster.replicas.filter((r) => r !== victim).map((r) => slowCallsServed(cluster, r.url)),
  );
  assert.equal(
    executed.reduce((a, b) => a + b, 0),
    IN_FLIGHT - onVictim,
    "no call that died with its replica ran again on another (HAProxy retries only refused connections)",
  );
  // Those opened on the killed replica too: the others rebuild them from their shared record.
  await everySessionAnswers(cluster, sessions);
}

async function drainUnderLoad(cluster: TestCluster): Promise<void> {
  const sessions = await sessionsThroughHaproxy(cluster, 6);
  const victim = cluster.replicas[2]!;
  const slow = sessions.flatMap((headers) =>
    [1, 2, 3, 4].map(() => rawToolCall(cluster.url, headers, "fixture__slow", { ms: 1_500 }))
  );
  await eventually(
    async () => (await inFlightOn(victim.url)) > 0,
    `calls in flight on ${victim.id}`,
  );
  let exited = false;
  const stopping = victim.kill("SIGTERM").then(() => void (exited = true));
  try {
    // Calls sent while it drains: HAProxy sends its 503s (never run) to another replica.
    const during: RawOutcome[] = [];
    for (let i = 0; !exited; i++) {
      during.push(await rawToolCall(cluster.url, sessions[i % sessions.length]!, "fixture__ok"));
    }
    await stopping;
    const answers = await Promise.all(slow);
    assert.deepEqual(
      answers.map(resultText),
      slow.map(() => "slept 1500"),
      JSON.stringify(answers.filter((a) => resultText(a) !== "slept 1500")),
    );
    assert.ok(during.length > 0);
    assert.deepEqual(during.map(resultText), during.map(() => "ok"), JSON.stringify(during));
  } finally {
    // The next steps need all three, whatever this one found.
    await stopping;
    await victim.start();
  }
  await everySessionAnswers(cluster, sessions);
}

/** What a client sees of a call its replica died under: HAProxy's 502 Bad Gateway, at once. */
function assertClearFailure(outcome: RawOutcome): void {
  assert.equal(outcome.kind, "http_error", JSON.stringify(outcome));
  if (outcome.kind !== "http_error") return;
  assert.equal(outcome.status, 502, outcome.body);
  assert.match(outcome.body, /502 Bad Gateway/);
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
        `SIGKILL of a replica with ${IN_FLIGHT} calls in flight: its calls fail at once with HAProxy's 502, every other call succeeds, none runs twice, no session is lost`,
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
        "SIGTERM of a replica under load (a rolling restart): its calls finish, every new call lands elsewhere, none fails",
        () => drainUnderLoad(cluster),
      );

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

            const sessions = await sessionsThroughHaproxy(cluster, 6);
            const leader = (await metaCluster(cluster.nats[0]!))?.leader;
            const node = cluster.nats.find((n) => n.name === leader)!;
            const inFlight = sessions.map((headers) =>
              rawToolCall(cluster.url, headers, "fixture__slow", { ms: 1_500 })
            );
            await eventually(
              async () => (await inFlightOnAll(cluster)).reduce((a, b) => a + b, 0) === 6,
              "the slow calls in flight",
            );
            await node.stop();
            assert.deepEqual(
              (await Promise.all(inFlight)).map(resultText),
              sessions.map(() => "slept 1500"),
              "the calls in flight when the node stopped",
            );
            // Sessions opened and served while the node is down: records written and read in KV.
            const opened = await sessionsThroughHaproxy(cluster, 6);
            await everySessionAnswers(cluster, [...sessions, ...opened]);
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
