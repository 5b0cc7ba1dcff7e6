/**
 * A whole scale-out deployment on loopback: a NATS JetStream cluster, N gateway replicas in
 * cluster mode sharing one fleet file, one policy dir, one approval secret and one set of tokens,
 * and HAProxy round-robin in front. `deno task cluster` runs it; tests/support/cluster.ts wraps it.
 * @module
 */
import { type NatsCluster, startNatsCluster } from "./nats_cluster.ts";
import { type HaproxyHandle, startHaproxy } from "./haproxy.ts";
import { createReplica, type Replica } from "./replica.ts";
import { freePort } from "./process.ts";

/** What to start. */
export interface LocalClusterOptions {
  /** Gateway replicas, default 3. */
  replicas?: number;
  /** NATS JetStream nodes, default 3. */
  natsNodes?: number;
  /** The fleet YAML every replica starts from (written to the shared fleet file). */
  fleet: string;
  /** Policy files (name → YAML) of the shared policy dir. */
  policies: Record<string, string>;
  /** More variables for every replica (over the cluster's own). */
  env?: Record<string, string>;
  /** HAProxy in front, default true. */
  haproxy?: boolean;
  /** The nats-server binary, when not Debian's (`/usr/sbin/nats-server`, then PATH). */
  natsServerBin?: string;
}

/** A running local cluster. */
export interface LocalCluster {
  /** HAProxy's URL (MCP at `${url}/mcp`), or the first replica's without HAProxy. */
  url: string;
  replicas: Replica[];
  nats: NatsCluster;
  haproxy: HaproxyHandle | undefined;
  /** Client token (scope `mcp`, identity `static-token`). */
  token: string;
  /** Operator token (scope `admin`, identity `admin-token`). */
  adminToken: string;
  /** A third identity (`approver`, scope `approver`) from the shared tokens file. */
  approverToken: string;
  /** The temp dir holding the fleet file (`fleet.yaml`), `policies/`, tokens and replica data. */
  dir: string;
  /** Stops HAProxy, the replicas and the NATS nodes, and removes the temp dir. */
  stop(): Promise<void>;
}

function randomHex(bytes: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)))
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest)).map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Writes the shared files and returns the variables every replica gets. */
async function writeSharedFiles(
  dir: string,
  options: LocalClusterOptions,
  tokens: { token: string; adminToken: string; approverToken: string },
): Promise<Record<string, string>> {
  await Deno.writeTextFile(`${dir}/fleet.yaml`, options.fleet);
  await Deno.mkdir(`${dir}/policies`);
  for (const [name, yaml] of Object.entries(options.policies)) {
    if (!/^[A-Za-z0-9_.-]+\.ya?ml$/.test(name)) {
      throw new Error(`policy file name "${name}" must be a plain *.yaml name`);
    }
    await Deno.writeTextFile(`${dir}/policies/${name}`, yaml);
  }
  await Deno.writeTextFile(
    `${dir}/tokens.yaml`,
    `tokens:\n  - sha256: ${await sha256Hex(tokens.approverToken)}\n` +
      "    tenant: default\n    scopes: [approver]\n    subject: approver\n",
  );
  return {
    MCP_SERVER_AUTH_TOKEN: tokens.token,
    MCP_SERVER_AUTH_SCOPES: "mcp",
    MCP_ADMIN_TOKEN: tokens.adminToken,
    MCP_AUTH_TOKENS_FILE: `${dir}/tokens.yaml`,
    MCP_APPROVAL_SECRET: randomHex(32),
    MCP_PROXY_CONFIG_PATH: `${dir}/fleet.yaml`,
    MCP_POLICY_PATH: `${dir}/policies`,
  };
}

/** Starts everything, in parallel where the order allows; on any failure stops what started. */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const replicaCount = options.replicas ?? 3;
  const natsNodes = options.natsNodes ?? 3;
  if (!Number.isInteger(replicaCount) || replicaCount < 1) {
    throw new RangeError(`replicas must be a positive integer, got ${replicaCount}`);
  }
  const dir = await Deno.makeTempDir({ prefix: "agent33-cluster-" });
  const tokens = { token: randomHex(24), adminToken: randomHex(24), approverToken: randomHex(24) };
  let nats: NatsCluster | undefined;
  let haproxy: HaproxyHandle | undefined;
  const replicas: Replica[] = [];
  const stop = async () => {
    await haproxy?.stop();
    await Promise.all(replicas.map((r) => r.stop()));
    await nats?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    const [shared, started] = await Promise.all([
      writeSharedFiles(dir, options, tokens),
      startNatsCluster(natsNodes, options.natsServerBin),
    ]);
    nats = started;
    const front = freePort();
    for (let i = 1; i <= replicaCount; i++) {
      await Deno.mkdir(`${dir}/r${i}`);
      replicas.push(createReplica(`r${i}`, {
        ...shared,
        MCP_CLUSTER: "true",
        NATS_URL: nats.urls,
        MCP_CLUSTER_KV_REPLICAS: String(Math.min(3, natsNodes)),
        MCP_DATA_DIR: `${dir}/r${i}`,
        // The load balancer forwards the client's Host: the name clients use must be allowed.
        ...(options.haproxy === false ? {} : {
          MCP_ALLOWED_HOSTS: `127.0.0.1:${front},localhost:${front}`,
        }),
        ...options.env,
      }));
    }
    // Settled, not all(): a failure must not leave the others starting while stop() runs.
    const results = await Promise.allSettled(replicas.map((r) => r.start()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    // After the replicas: their ports are final once they listen.
    if (options.haproxy !== false) {
      haproxy = await startHaproxy(
        dir,
        front,
        replicas.map((r) => ({ id: r.id, address: `127.0.0.1:${r.port}` })),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url: haproxy?.url ?? replicas[0]!.url,
    replicas,
    nats: nats!,
    haproxy,
    ...tokens,
    dir,
    stop,
  };
}
