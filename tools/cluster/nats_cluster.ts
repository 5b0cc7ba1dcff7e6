/**
 * A NATS JetStream cluster on loopback: N `nats-server` processes, each with its own store dir,
 * server name, client port, route port and monitoring port, with routes to all the others under
 * one cluster name. Ready once every node's `/jsz` names the same JetStream meta leader.
 * @module
 */
import {
  canConnect,
  freePort,
  getJson,
  HOST,
  type ManagedProcess,
  spawnProcess,
  waitUntil,
} from "./process.ts";

/** Where `nats-server` is looked for: `override`, else Debian's path (often not on PATH), PATH. */
export function natsServerCommands(override?: string): string[] {
  return override ? [override] : ["/usr/sbin/nats-server", "nats-server"];
}

const CLUSTER_NAME = "agent33";
const START_TIMEOUT_MS = 30_000;

/** One node of the cluster; stop() keeps its store so start() rejoins with its data. */
export interface NatsNode {
  /** Server name, `n1`…: what `/jsz` and the meta group call it. */
  readonly name: string;
  /** `nats://127.0.0.1:<port>` for clients. */
  readonly url: string;
  readonly port: number;
  /** `http://127.0.0.1:<port>`: the monitoring endpoints (`/jsz`, `/routez`, `/healthz`). */
  readonly monitorUrl: string;
  /** Whether its process runs. */
  running(): boolean;
  /** Stops the process (SIGTERM, awaited); the store dir stays. */
  stop(): Promise<void>;
  /** Starts it again on the same ports and store and waits until it sees a meta leader. */
  start(): Promise<void>;
  /** Its stderr tail (the server's log), for error messages. */
  log(): string;
}

/** A running NATS cluster. */
export interface NatsCluster {
  readonly nodes: NatsNode[];
  /** Every node's client URL, comma-separated: the value of NATS_URL. */
  readonly urls: string;
  /** Stops every node and removes the store dirs. */
  stop(): Promise<void>;
}

/** The JetStream meta group as one node's `/jsz` reports it. */
export interface MetaCluster {
  name?: string;
  leader?: string;
  cluster_size?: number;
  replicas?: { name: string; current: boolean; offline?: boolean }[];
}

/** One node's view of the JetStream meta group (undefined while it does not answer). */
export async function metaCluster(
  node: { monitorUrl: string },
): Promise<MetaCluster | undefined> {
  const jsz = await getJson(`${node.monitorUrl}/jsz`) as { meta_cluster?: MetaCluster } | undefined;
  return jsz?.meta_cluster;
}

interface Ports {
  client: number;
  route: number;
  monitor: number;
}

function nodeArgs(name: string, ports: Ports, storeDir: string, peers: Ports[]): string[] {
  const args = ["-a", HOST, "-p", String(ports.client), "-n", name, "-m", String(ports.monitor)];
  args.push("-js", "-sd", storeDir);
  if (peers.length > 0) {
    args.push("--cluster", `nats://${HOST}:${ports.route}`, "--cluster_name", CLUSTER_NAME);
    args.push("--routes", peers.map((p) => `nats://${HOST}:${p.route}`).join(","));
  }
  return args;
}

/** Whether `node` answers and (in a cluster) knows a JetStream meta leader. */
async function hasMetaLeader(node: NatsNode, clustered: boolean): Promise<boolean> {
  if (!(await canConnect(node.port))) return false;
  const jsz = await getJson(`${node.monitorUrl}/jsz`) as { meta_cluster?: MetaCluster } | undefined;
  if (jsz === undefined) return false;
  return !clustered || Boolean(jsz.meta_cluster?.leader);
}

function createNode(index: number, all: Ports[], storeRoot: string, bin?: string): NatsNode {
  const name = `n${index + 1}`;
  const ports = all[index]!;
  const peers = all.filter((_, i) => i !== index);
  const storeDir = `${storeRoot}/${name}`;
  let process: ManagedProcess | undefined;
  let last: ManagedProcess | undefined;
  const node: NatsNode = {
    name,
    url: `nats://${HOST}:${ports.client}`,
    port: ports.client,
    monitorUrl: `http://${HOST}:${ports.monitor}`,
    running: () => process !== undefined && !process.exited(),
    log: () => (process ?? last)?.stderrTail() ?? "",
    async stop() {
      const current = process;
      process = undefined;
      if (current) await current.stop();
    },
    async start() {
      if (node.running()) return;
      process = last = spawnProcess({
        name: `nats-server ${name}`,
        commands: natsServerCommands(bin),
        install: "apt-get install -y nats-server",
        args: nodeArgs(name, ports, storeDir, peers),
      });
      await waitUntil(
        `nats-server ${name} (${node.url}) with a JetStream meta leader`,
        () => hasMetaLeader(node, peers.length > 0),
        START_TIMEOUT_MS,
        process,
      );
    },
  };
  return node;
}

/**
 * Starts `nodes` JetStream servers with routes between them, in parallel, and waits for a leader;
 * `bin` is the nats-server binary when not the Debian one.
 */
export async function startNatsCluster(nodes = 3, bin?: string): Promise<NatsCluster> {
  if (!Number.isInteger(nodes) || nodes < 1) {
    throw new RangeError(`natsNodes must be a positive integer, got ${nodes}`);
  }
  // A port found free can be taken (by any outgoing connection) before the node binds it.
  for (let attempt = 1;; attempt++) {
    try {
      return await startOnce(nodes, bin);
    } catch (error) {
      if (attempt >= PORT_ATTEMPTS || !PORT_TAKEN.test(String(error))) throw error;
    }
  }
}

const PORT_ATTEMPTS = 3;
const PORT_TAKEN = /address already in use/i;

async function startOnce(nodes: number, bin?: string): Promise<NatsCluster> {
  const storeRoot = await Deno.makeTempDir({ prefix: "agent33-nats-cluster-" });
  const ports = Array.from({ length: nodes }, () => ({
    client: freePort(),
    route: freePort(),
    monitor: freePort(),
  }));
  const members = ports.map((_, i) => createNode(i, ports, storeRoot, bin));
  const stop = async () => {
    await Promise.all(members.map((m) => m.stop()));
    await Deno.remove(storeRoot, { recursive: true }).catch(() => {});
  };
  const started = await Promise.allSettled(members.map((m) => m.start()));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    await stop();
    throw failed.reason;
  }
  return { nodes: members, urls: members.map((m) => m.url).join(","), stop };
}
