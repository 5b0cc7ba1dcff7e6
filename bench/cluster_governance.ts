/**
 * Bench: what the shared governance state costs per call in cluster mode, on a real 3-node NATS
 * JetStream cluster (KV replicas 3, as MCP_CLUSTER_KV_REPLICAS=3): a rate-limited call allowed
 * (one KV compare-and-set), refused (none: the cached counter decides), three replicas on one
 * counter at once, this process's token bucket for comparison, and an approval filed and decided.
 * The figures docs/scale-out.md quotes come from here.
 *
 *     deno run -A bench/cluster_governance.ts [calls]
 * @module
 */
import { connect } from "nats";
import { principalOf } from "../core/auth/token_payload.ts";
import { InProcessEventBus } from "../core/bus/event_bus.ts";
import { ApprovalQueue } from "../core/governance/approval_queue.ts";
import { ApprovalTokens } from "../core/governance/approval_tokens.ts";
import { MemoryNonceStore } from "../core/governance/nonce_store.ts";
import { RateLimiter, rateLimitKey } from "../core/governance/rate_limiter.ts";
import { SharedApprovalBackend } from "../core/governance/shared_approval_backend.ts";
import { SharedRateLimiter } from "../core/governance/shared_rate_limiter.ts";
import { systemClock } from "../core/support/clock.ts";
import { silentLogger } from "../core/support/logger.ts";
import { NatsSharedState } from "../plugins/bus-nats/nats_shared_state.ts";
import { startNatsCluster } from "../tools/cluster/nats_cluster.ts";
import { median, quantile } from "./stats.ts";

/** Who decides the bench's requests: an approver of every tenant, never their requester. */
const OPERATOR = {
  subject: "operator",
  principal: principalOf("tokens_file", "operator"),
  tenant: "ops",
  scopes: ["approver", "all_tenants"],
};

const calls = Number(Deno.args[0] ?? 2000);

async function timed(n: number, call: (i: number) => Promise<unknown> | unknown) {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await call(i);
    samples.push((performance.now() - start) * 1000);
  }
  const sorted = samples.sort((a, b) => a - b);
  return { medianUs: Math.round(median(sorted)), p99Us: Math.round(quantile(sorted, 0.99)) };
}

const nats = await startNatsCluster(3);
const connections = await Promise.all(
  nats.nodes.map((node) => connect({ servers: node.url })),
);
const states = connections.map((nc) =>
  new NatsSharedState(nc, { replicas: 3, logger: silentLogger, clock: systemClock })
);
try {
  const limiters = await Promise.all(states.map(async (state) => {
    const limiter = new SharedRateLimiter({
      clock: systemClock,
      logger: silentLogger,
      replicas: () => 3,
      timeoutMs: 5_000,
    });
    await limiter.open(state);
    return limiter;
  }));
  const [one] = limiters as [SharedRateLimiter];
  const key = rateLimitKey("acme", "*", "fs__write");
  await one.take(key, 1e9, 1e9); // creates the counter
  const allowed = await timed(calls, () => one.take(key, 1e9, 1e9));
  const empty = rateLimitKey("acme", "*", "fs__delete");
  await one.take(empty, 1e-6, 1);
  const refused = await timed(calls, () => one.take(empty, 1e-6, 1));
  const shared = rateLimitKey("acme", "*", "fs__read");
  const start = performance.now();
  await Promise.all(limiters.map(async (limiter) => {
    for (let i = 0; i < calls / 4; i++) await limiter.take(shared, 1e9, 1e9);
  }));
  const contendedUs = Math.round(((performance.now() - start) * 1000) / ((calls / 4) * 3));
  const conflicts = limiters.reduce((sum, l) => sum + l.stats().conflicts, 0);
  const local = new RateLimiter({ clock: systemClock });
  const localTake = await timed(calls, () => local.take(key, 1e9, 1e9));

  const clock = systemClock;
  const queue = new ApprovalQueue({
    clock,
    bus: new InProcessEventBus(),
    tokens: new ApprovalTokens({
      secret: crypto.getRandomValues(new Uint8Array(32)),
      clock,
      nonces: new MemoryNonceStore({ clock }),
    }),
    maxPendingPerTenant: 10_000,
  });
  await queue.share(
    await SharedApprovalBackend.open(states[0]!, {
      requestTtlMs: 600_000,
      tokenTtlMs: 600_000,
      logger: silentLogger,
    }),
  );
  const rounds = Math.min(200, calls);
  const approval = await timed(rounds, async (i) => {
    const request = await queue.file({
      tenant: `t${i % 50}`,
      subject: "alice",
      tool: "fs__delete",
      effect: "destructive",
      arguments: { i },
      argumentsHash: i.toString(16).padStart(64, "0"),
    });
    await queue.approve(request.id, OPERATOR);
  });
  queue.close();
  const report = JSON.stringify(
    {
      nats: "3 nodes, KV replicas 3, loopback",
      calls,
      rateLimitAllowedUs: allowed,
      rateLimitRefusedUs: refused,
      rateLimitThreeReplicasOneCounterUsPerCall: contendedUs,
      conflictsPerCall: Number((conflicts / ((calls / 4) * 3)).toFixed(2)),
      localTokenBucketUs: localTake,
      approvalFiledAndApprovedUs: approval,
    },
    null,
    2,
  );
  Deno.stdout.writeSync(new TextEncoder().encode(report + "\n"));
} finally {
  await Promise.all(states.map((state) => state.close()));
  await Promise.all(connections.map((nc) => nc.close()));
  await nats.stop();
}
