/**
 * Bench: the cost of one ToolGovernance.check in process, with the shipped policies, for a call
 * that is allowed after argument validation (the common path).
 * @module
 */
import { systemClock } from "../core/support/clock.ts";
import { InProcessEventBus } from "../core/bus/event_bus.ts";
import { ApprovalQueue } from "../core/governance/approval_queue.ts";
import { ApprovalTokens } from "../core/governance/approval_tokens.ts";
import { AuditLog } from "../core/governance/audit_log.ts";
import { MemoryNonceStore } from "../core/governance/nonce_store.ts";
import { loadPolicies } from "../core/governance/policy_loader.ts";
import { RateLimiter } from "../core/governance/rate_limiter.ts";
import { ToolGovernance } from "../core/governance/tool_governance.ts";
import { silentLogger } from "../core/support/logger.ts";
import { median, quantile } from "./stats.ts";

/** The check's cost per call, medians over rounds. */
export interface GovernanceResult {
  medianUs: number;
  p99Us: number;
  rounds: { medianUs: number; p99Us: number }[];
  policy: string;
}

/** Measures `calls` checks per round after a warm-up. */
export async function benchGovernance(
  policyPath: string,
  rounds: number,
  calls: number,
): Promise<GovernanceResult> {
  const clock = systemClock;
  const bus = new InProcessEventBus();
  const tokens = new ApprovalTokens({
    secret: crypto.getRandomValues(new Uint8Array(32)),
    clock,
    nonces: new MemoryNonceStore({ clock }),
  });
  const audit = new AuditLog({ bus, clock, logger: silentLogger });
  const governance = new ToolGovernance({
    policies: await loadPolicies(policyPath),
    tokens,
    approvals: new ApprovalQueue({ clock, bus, tokens }),
    rateLimiter: new RateLimiter({ clock }),
    audit,
    clock,
  });
  const target = {
    name: "everything__echo",
    server: "everything",
    descriptor: {
      inputSchema: {
        type: "object" as const,
        properties: { message: { type: "string" } },
        required: ["message"],
      },
      annotations: { readOnlyHint: true },
    },
  };
  const ctx = { tenant: "default", subject: "bench" };
  const results: { medianUs: number; p99Us: number }[] = [];
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < 200; i++) await governance.check(ctx, target, { message: "hi" });
    const samples: number[] = [];
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      const verdict = await governance.check(ctx, target, { message: `hi ${i}` });
      samples.push((performance.now() - start) * 1000);
      if (verdict.action !== "allow") {
        throw new Error(`expected allow, got ${JSON.stringify(verdict)}`);
      }
    }
    samples.sort((a, b) => a - b);
    results.push({ medianUs: quantile(samples, 0.5), p99Us: quantile(samples, 0.99) });
  }
  await audit.close();
  return {
    medianUs: median(results.map((r) => r.medianUs)),
    p99Us: median(results.map((r) => r.p99Us)),
    rounds: results,
    policy: policyPath,
  };
}
