/**
 * `deno task cluster`: a scale-out deployment on loopback to try by hand — a 3-node NATS
 * JetStream cluster, 3 gateway replicas in cluster mode serving the demo fleet, and HAProxy
 * round-robin in front. Prints where to connect and the tokens; Ctrl-C or SIGTERM stops it all.
 *
 * `deno task cluster [--replicas N] [--nats-nodes N]`
 * @module
 */
import { parseArgs } from "node:util";
import { startLocalCluster } from "./local_cluster.ts";

const ROOT = new URL("../../", import.meta.url);
const encoder = new TextEncoder();

function say(text: string): void {
  Deno.stdout.writeSync(encoder.encode(`${text}\n`));
}

function count(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 9) {
    throw new Error(`${name} must be 1-9, got "${value}"`);
  }
  return n;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { replicas: { type: "string" }, "nats-nodes": { type: "string" } },
  });
  const replicas = count(values.replicas, "--replicas", 3);
  const natsNodes = count(values["nats-nodes"], "--nats-nodes", 3);
  say(`starting ${natsNodes} NATS nodes, ${replicas} gateway replicas and HAProxy on 127.0.0.1…`);
  const cluster = await startLocalCluster({
    replicas,
    natsNodes,
    fleet: await Deno.readTextFile(new URL("demo/fleet.yaml", ROOT)),
    policies: { "default.yaml": await Deno.readTextFile(new URL("policies/default.yaml", ROOT)) },
  });
  say(`
MCP clients connect to  ${cluster.url}/mcp  (HAProxy, round-robin, no stickiness)
replicas                ${cluster.replicas.map((r) => `${r.id} ${r.url}`).join("   ")}
NATS_URL                ${cluster.nats.urls}
client token (mcp)      ${cluster.token}
operator token (admin)  ${cluster.adminToken}
approver token          ${cluster.approverToken}
shared fleet file       ${cluster.dir}/fleet.yaml   policies ${cluster.dir}/policies/

Each replica runs its own copy of the demo upstreams (the memory server's graph is per replica).
Ctrl-C stops everything.`);
  const stopped = Promise.withResolvers<void>();
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  const onSignal = () => stopped.resolve();
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  await stopped.promise;
  say("stopping…");
  await cluster.stop();
  for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  return 0;
}

try {
  Deno.exit(await main());
} catch (error) {
  Deno.stderr.writeSync(encoder.encode(`deno task cluster: ${(error as Error).message}\n`));
  Deno.exit(1);
}
