/**
 * The shared governance state a replica opens in cluster mode, and the replica id its audit
 * carries.
 */
import assert from "node:assert/strict";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { silentLogger } from "../support/logger.ts";
import { ApprovalQueue } from "./approval_queue.ts";
import { ApprovalTokens } from "./approval_tokens.ts";
import { AuditLog } from "./audit_log.ts";
import { createClusterGovernance } from "./cluster_governance.ts";
import { MemoryNonceStore } from "./nonce_store.ts";
import { rateLimitKey } from "./rate_limiter.ts";

function governance(clock: ManualClock, options: { secret?: boolean; replicas?: number[] } = {}) {
  const counts = [...(options.replicas ?? [1])];
  const queue = new ApprovalQueue({
    clock,
    bus: new InProcessEventBus(),
    tokens: new ApprovalTokens({
      secret: "an-approval-secret-that-is-at-least-32-bytes-long",
      clock,
      nonces: new MemoryNonceStore({ clock }),
    }),
  });
  return createClusterGovernance({
    approvals: queue,
    clock,
    logger: silentLogger,
    replicaId: "r1",
    approvalTtlMs: 600_000,
    approvalSecretSet: options.secret ?? true,
    countReplicas: () =>
      counts.length > 1 ? Promise.resolve(counts.shift()!) : Promise.resolve(counts[0]!),
  });
}

Deno.test("cluster mode refuses to start without MCP_APPROVAL_SECRET", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  await assert.rejects(
    governance(clock, { secret: false }).open(new MemorySharedState({ clock })),
    (e: GatewayError) => e.code === "config_invalid" && /MCP_APPROVAL_SECRET/.test(e.message),
  );
});

Deno.test("the live replica count is read at open and again every 10 s", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const shared = governance(clock, { replicas: [2, 3] });
  await shared.open(new MemorySharedState({ clock }));
  try {
    assert.equal(shared.replicas(), 2);
    clock.advance(10_000);
    await Promise.resolve();
    assert.equal(shared.replicas(), 3);
    assert.ok(shared.pins, "the pins are open");
    assert.equal(
      (await shared.rateLimiter.take(rateLimitKey("acme", "*", "fs__read"), 6, 6)).ok,
      true,
    );
    assert.equal(shared.rateLimiter.stats().shared, 1);
  } finally {
    shared.close();
  }
});

Deno.test("in cluster mode every audit line and decision event names the replica", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((event) => events.push(event));
  const dir = await Deno.makeTempDir();
  const log = new AuditLog({
    path: `${dir}/audit.jsonl`,
    bus,
    clock,
    logger: silentLogger,
    replica: "r2",
  });
  try {
    log.record({
      tenant: "acme",
      subject: "alice",
      tool: "fs__read",
      effect: "read",
      verdict: "allow",
      argumentsHash: "c".repeat(64),
    });
    await log.flush();
    const line = JSON.parse(await Deno.readTextFile(`${dir}/audit.jsonl`));
    assert.equal(line.replica, "r2");
    assert.equal((events[0] as { replica?: string }).replica, "r2");
  } finally {
    await log.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an open that failed half way (a bucket timing out) opens only what is missing when tried again", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const state = new MemorySharedState({ clock });
  const opened: string[] = [];
  let failPins = true;
  const flaky: typeof state = Object.create(state);
  flaky.bucket = (name, options) => {
    opened.push(name);
    if (name === "agent33_pins" && failPins) {
      failPins = false;
      return Promise.reject(
        new Error('Cannot open the JetStream KV bucket "agent33_pins": TIMEOUT'),
      );
    }
    return state.bucket(name, options);
  };
  const shared = governance(clock);
  await assert.rejects(shared.open(flaky), /TIMEOUT/);
  assert.equal(shared.pins, undefined);
  await shared.open(flaky);
  try {
    assert.ok(shared.pins, "the pins are open after the retry");
    assert.equal(opened.filter((name) => name === "agent33_approvals").length, 1, "approvals once");
    assert.equal(opened.filter((name) => name === "agent33_rate_limits").length, 1, "limits once");
  } finally {
    shared.close();
  }
});
