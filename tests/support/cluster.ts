/**
 * Test support: a real scale-out deployment on loopback for the cluster tests
 * (tests/cluster/*_cluster.ts, `deno task test:cluster`): a NATS JetStream cluster with real
 * routes, N gateway replicas as child processes in cluster mode, HAProxy round-robin in front.
 * The processes are tools/cluster/'s (what `deno task cluster` runs); this adds the test defaults
 * (one stdio fixture upstream, the repository's default policy) and {@link NEEDS_CLUSTER}.
 * @module
 */
import { binaryInstalled, needsBinary } from "./needs_binary.ts";
import { faultServer } from "./fleet.ts";
import { natsServerCommands } from "../../tools/cluster/nats_cluster.ts";
import { haproxyCommands } from "../../tools/cluster/haproxy.ts";
import { startLocalCluster } from "../../tools/cluster/local_cluster.ts";
import type { MetaCluster } from "../../tools/cluster/nats_cluster.ts";

export { metaCluster } from "../../tools/cluster/nats_cluster.ts";
export type { MetaCluster };

/**
 * Options of a cluster test: `Deno.test(name, NEEDS_CLUSTER, fn)`. Ignored, with the install
 * command, when nats-server or haproxy is missing; required when `CI` is set.
 */
export const NEEDS_CLUSTER: { ignore: boolean } =
  binaryInstalled(natsServerCommands(Deno.env.get("NATS_SERVER_BIN")))
    ? needsBinary("haproxy", haproxyCommands(), "apt-get install -y haproxy")
    : needsBinary(
      "nats-server",
      natsServerCommands(Deno.env.get("NATS_SERVER_BIN")),
      "apt-get install -y nats-server haproxy",
    );

/** What to start. */
export interface ClusterOptions {
  /** Gateway replicas, default 3. */
  replicas?: number;
  /** NATS JetStream nodes with real routes, default 3. */
  natsNodes?: number;
  /** Fleet YAML text (default: one stdio fixture upstream, `fixture`, the fault server). */
  fleet?: string;
  /** File name → policy YAML (default: the repository's policies/default.yaml). */
  policies?: Record<string, string>;
  /** Extra variables for every replica. */
  env?: Record<string, string>;
  /** Default true: HAProxy round-robin in front, no stickiness. */
  haproxy?: boolean;
}

/** One gateway replica. */
export interface ReplicaHandle {
  /** MCP_REPLICA_ID: `r1`, `r2`, … */
  id: string;
  /** The replica's own URL, bypassing HAProxy. */
  url: string;
  /** Sends `signal` (default SIGKILL) and waits for the exit. */
  kill(signal?: Deno.Signal): Promise<void>;
  /** Starts it again at the same URL and waits until it is ready. */
  start(): Promise<void>;
  /** Its stderr tail. */
  log(): string;
  /** Its process id while it runs. */
  pid(): number | undefined;
}

/** One NATS node. */
export interface NatsNodeHandle {
  /** Server name, `n1`, … */
  name: string;
  /** `nats://127.0.0.1:<port>`. */
  url: string;
  /** Its monitoring endpoints (`/jsz`). */
  monitorUrl: string;
  /** Stops it (SIGTERM, awaited); its store stays. */
  stop(): Promise<void>;
  /** Starts it again with its store and waits until it sees a meta leader. */
  start(): Promise<void>;
}

/** A running cluster. */
export interface TestCluster {
  /** HAProxy front, e.g. `http://127.0.0.1:PORT` (MCP at `${url}/mcp`). */
  url: string;
  replicas: ReplicaHandle[];
  nats: NatsNodeHandle[];
  /** Every node's URL, comma-separated (the replicas' NATS_URL). */
  natsUrl: string;
  /** An `mcp` client token valid on every replica (identity `static-token`). */
  token: string;
  /** An admin token valid on every replica (identity `admin-token`). */
  adminToken: string;
  /** A second identity with the approver scope (`approver`). */
  approverToken: string;
  /** The temp dir with the shared `fleet.yaml` and `policies/`. */
  dir: string;
  /** Stops everything and removes the temp dir. */
  stop(): Promise<void>;
}

const DEFAULT_POLICY = new URL("../../policies/default.yaml", import.meta.url);

/** Starts a cluster; stop() it in a `finally`. */
export async function startCluster(options: ClusterOptions = {}): Promise<TestCluster> {
  const cluster = await startLocalCluster({
    ...options,
    ...(Deno.env.get("NATS_SERVER_BIN") ? { natsServerBin: Deno.env.get("NATS_SERVER_BIN") } : {}),
    fleet: options.fleet ?? `proxy_servers:${faultServer("fixture")}`,
    policies: options.policies ?? { "default.yaml": await Deno.readTextFile(DEFAULT_POLICY) },
  });
  return {
    url: cluster.url,
    replicas: cluster.replicas,
    nats: cluster.nats.nodes,
    natsUrl: cluster.nats.urls,
    token: cluster.token,
    adminToken: cluster.adminToken,
    approverToken: cluster.approverToken,
    dir: cluster.dir,
    stop: cluster.stop,
  };
}

/** The live descendants of process `root` (Linux /proc): what a cluster started, grandchildren too. */
export function descendantPids(root = Deno.pid): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    const ppid = parentOf(pid);
    if (ppid !== undefined) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/** Whether process `pid` still exists and is not a zombie. */
export function processAlive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ")".
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined; // it exited while we read
  }
}
