/**
 * Bench: what cluster mode costs and what it buys, on a real local cluster (tools/cluster/: a
 * 3-node NATS JetStream cluster, gateway replicas, HAProxy).
 *
 * - the shared session state per call, in process, over the 3-node cluster at replication 3:
 *   a request on the replica that holds the session's copy (a cache hit: `known`, `expired`,
 *   `touch` of SharedSessions), and on a replica that has never seen it (one KV read: `load`);
 * - the same per call end to end: one replica in cluster mode against the same replica with
 *   MCP_CLUSTER off (NATS bus on in both), sequential calls of a lean HTTP client;
 * - throughput with 64 calls in flight through HAProxy (round-robin, sessions shared) to 1
 *   replica and to 3.
 * @module
 */
import { NatsEventBus } from "../plugins/bus-nats/nats_event_bus.ts";
import { SharedSessions } from "../core/mcp/shared_sessions.ts";
import type { SessionRecord } from "../core/mcp/session_record.ts";
import { silentLogger } from "../core/support/logger.ts";
import { systemClock } from "../core/support/clock.ts";
import { startNatsCluster } from "../tools/cluster/nats_cluster.ts";
import { type LocalCluster, startLocalCluster } from "../tools/cluster/local_cluster.ts";
import { type LeanClient, leanHttp } from "./lean_client.ts";
import { bounded } from "./processes.ts";
import { latencyRound, median, quantile, throughputRound } from "./stats.ts";
import { getGatewayRoot } from "./setup.ts";

/** Per-call figures in microseconds. */
export interface MicroFigures {
  medianUs: number;
  p99Us: number;
}

/** Throughput of one deployment. */
export interface ClusterThroughput {
  replicas: number;
  callsPerSecond: number;
  medianMs: number;
  p99Ms: number;
}

/** Everything the cluster scenario measured. */
export interface ClusterResult {
  natsNodes: number;
  kvReplicas: number;
  /** SharedSessions on the replica holding the session: known + expired + touch. */
  hit: MicroFigures;
  /** SharedSessions.load on a replica that never saw the session: one KV read, validated. */
  cold: MicroFigures;
  /** Sequential lean HTTP calls (median ms) to one replica with and without cluster mode. */
  endToEnd: {
    clusterMs: number;
    singleMs: number;
    addedUs: number;
    /** Messages the NATS nodes received per call (the bus's event, KV operations, heartbeats). */
    natsMessagesPerCall: { cluster: number; single: number };
  };
  concurrency: number;
  /** How the client reached the replicas. */
  spread: string;
  throughput: ClusterThroughput[];
  cores: number;
}

const RECORD: SessionRecord = {
  v: 1,
  protocolVersion: "2025-11-25",
  capabilities: {},
  clientInfo: { name: "bench", version: "1" },
  tenant: "default",
  subject: "static-token",
  activations: [],
  subscriptions: [],
  openedBy: "a",
  openedAt: 0,
};

function figures(samplesUs: number[]): MicroFigures {
  const sorted = [...samplesUs].sort((a, b) => a - b);
  return { medianUs: quantile(sorted, 0.5), p99Us: quantile(sorted, 0.99) };
}

/** Hit and cold costs of SharedSessions over a 3-node cluster, two connections as two replicas. */
async function sharedStateCosts(sessions: number, rounds: number) {
  const nats = await startNatsCluster(3);
  const buses: NatsEventBus[] = [];
  try {
    const open = async (replicaId: string) => {
      const bus = await NatsEventBus.connect({ url: nats.urls, logger: silentLogger });
      buses.push(bus);
      return await SharedSessions.open(await bus.sharedState({ replicas: 3 }), {
        ttlMs: 600_000,
        replicaId,
        clock: systemClock,
        logger: silentLogger,
      });
    };
    const [a, b] = [await open("a"), await open("b")];
    const ids = Array.from({ length: sessions }, () => crypto.randomUUID());
    for (const id of ids) await a.create(id, RECORD);
    const hit: MicroFigures[] = [];
    const cold: MicroFigures[] = [];
    for (let round = 0; round < rounds; round++) {
      const hits: number[] = [];
      for (const id of [...ids, ...ids]) {
        const t0 = performance.now();
        if (!a.known(id) || a.expired(id)) throw new Error("a hit missed");
        a.touch(id);
        hits.push((performance.now() - t0) * 1000);
      }
      hit.push(figures(hits.slice(ids.length)));
      const colds: number[] = [];
      for (const id of ids) {
        const t0 = performance.now();
        if (!(await b.load(id))) throw new Error("a cold read found no record");
        colds.push((performance.now() - t0) * 1000);
        b.forget(id);
      }
      cold.push(figures(colds));
    }
    a.close();
    b.close();
    const mid = (list: MicroFigures[]) => ({
      medianUs: median(list.map((f) => f.medianUs)),
      p99Us: median(list.map((f) => f.p99Us)),
    });
    return { hit: mid(hit), cold: mid(cold) };
  } finally {
    await Promise.all(buses.map((bus) => bus.close()));
    await nats.stop();
  }
}

const FLEET = () => {
  const root = getGatewayRoot();
  return `proxy_servers:
  - id: fixture
    command: ["deno", "run", "--config", "${root}deno.json", "${root}tests/fixtures/upstreams/fault_server.ts"]
    sandbox: deno
    env: { FAULT: none }
    permissions: { env: [FAULT], read: true }
`;
};

async function deployment(replicas: number, haproxy: boolean, env: Record<string, string> = {}) {
  return await startLocalCluster({
    replicas,
    natsNodes: 3,
    fleet: FLEET(),
    policies: {
      "default.yaml": await Deno.readTextFile(`${getGatewayRoot()}policies/default.yaml`),
    },
    haproxy,
    env: { MCP_HTTP_RESPONSE_MODE: "json", MCP_LOG_LEVEL: "warn", ...env },
  });
}

/** `count` lean sessions at `cluster.url` (HAProxy, or the one replica), and a call over them. */
async function sessionsOn(cluster: LocalCluster, count: number) {
  const clients: LeanClient[] = [];
  for (let i = 0; i < count; i++) {
    clients.push(
      await leanHttp(`${cluster.url}/mcp`, { authorization: `Bearer ${cluster.token}` }),
    );
  }
  let next = 0;
  const call = async () => {
    const client = clients[next++ % clients.length]!;
    const result = await client.request("tools/call", { name: "fixture__ok", arguments: {} });
    const content = result.content as { text?: string }[] | undefined;
    if (result.isError || content?.[0]?.text !== "ok") {
      throw new Error(`fixture__ok answered ${JSON.stringify(result).slice(0, 200)}`);
    }
  };
  return { call, close: () => Promise.all(clients.map((c) => c.close())) };
}

/** Messages the NATS nodes of a deployment received so far (clients and routes, /varz). */
async function natsMessages(cluster: LocalCluster): Promise<number> {
  const counts = await Promise.all(cluster.nats.nodes.map(async (node) => {
    const response = await fetch(`${node.monitorUrl}/varz`);
    return ((await response.json()) as { in_msgs: number }).in_msgs;
  }));
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * Median sequential latency (ms) of one replica in cluster mode and of the same replica with
 * MCP_CLUSTER off (NATS bus on in both), both running at once and taking turns each round, so
 * the machine's other work weighs on both alike.
 */
async function oneReplicaLatencies(calls: number, rounds: number) {
  const deployments = await Promise.all([
    deployment(1, false),
    deployment(1, false, { MCP_CLUSTER: "false" }),
  ]);
  try {
    const lanes = await Promise.all(deployments.map((d) => sessionsOn(d, 1)));
    const medians: [number[], number[]] = [[], []];
    const messages: [number, number] = [0, 0];
    for (let round = 0; round < rounds; round++) {
      for (const side of [0, 1] as const) {
        const before = await natsMessages(deployments[side]!);
        const result = await bounded(
          latencyRound(lanes[side]!.call, 100, calls),
          120_000,
          "latency",
        );
        messages[side] += (await natsMessages(deployments[side]!)) - before;
        medians[side].push(result.medianMs);
      }
    }
    await Promise.all(lanes.map((l) => l.close()));
    const perCall = (n: number) => n / (rounds * (calls + 100));
    return {
      clusterMs: median(medians[0]),
      singleMs: median(medians[1]),
      natsMessagesPerCall: { cluster: perCall(messages[0]), single: perCall(messages[1]) },
    };
  } finally {
    await Promise.all(deployments.map((d) => d.stop()));
  }
}

async function throughputOf(replicas: number, concurrency: number, calls: number, rounds: number) {
  const cluster = await deployment(replicas, true);
  try {
    const lanes = await sessionsOn(cluster, 16);
    const results = [];
    for (let round = 0; round < rounds; round++) {
      results.push(
        await bounded(
          throughputRound(lanes.call, concurrency, calls, Math.ceil(calls / 10)),
          180_000,
          `throughput of ${replicas} replica(s)`,
        ),
      );
    }
    await lanes.close();
    return {
      replicas,
      callsPerSecond: median(results.map((r) => r.callsPerSecond)),
      medianMs: median(results.map((r) => r.medianMs)),
      p99Ms: median(results.map((r) => r.p99Ms)),
    };
  } finally {
    await cluster.stop();
  }
}

/** Runs the cluster scenario; `progress` reports each phase. */
export async function benchCluster(
  quick: boolean,
  rounds: number,
  progress: (text: string) => void,
): Promise<ClusterResult> {
  const concurrency = 64;
  progress("cluster: shared session state over a 3-node NATS cluster, in process");
  const { hit, cold } = await sharedStateCosts(quick ? 200 : 1_000, rounds);
  const calls = quick ? 300 : 1_500;
  progress("cluster: one replica with and without MCP_CLUSTER, sequential calls, taking turns");
  const { clusterMs, singleMs, natsMessagesPerCall } = await oneReplicaLatencies(calls, rounds);
  const throughput: ClusterThroughput[] = [];
  for (const replicas of [1, 3]) {
    progress(`cluster: throughput of ${replicas} replica(s), ${concurrency} calls in flight`);
    throughput.push(await throughputOf(replicas, concurrency, quick ? 800 : 3_000, rounds));
  }
  return {
    natsNodes: 3,
    kvReplicas: 3,
    hit,
    cold,
    endToEnd: { clusterMs, singleMs, addedUs: (clusterMs - singleMs) * 1000, natsMessagesPerCall },
    concurrency,
    spread: "16 sessions through HAProxy round-robin",
    throughput,
    cores: navigator.hardwareConcurrency,
  };
}
