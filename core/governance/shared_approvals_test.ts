/**
 * Approvals shared by replicas: three queues on ONE MemorySharedState are three replicas; each
 * has its own bus and token issuer (same secret, one nonce store, as MCP_APPROVAL_SECRET and the
 * NATS nonce bucket give them).
 */
import assert from "node:assert/strict";
import { principalOf } from "../auth/token_payload.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { encodeJson, type SharedState } from "../bus/shared_state.ts";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { silentLogger } from "../support/logger.ts";
import { ApprovalQueue, type ApprovalRequestInput } from "./approval_queue.ts";
import { ApprovalTokens } from "./approval_tokens.ts";
import { MemoryNonceStore } from "./nonce_store.ts";
import { APPROVALS_BUCKET, SharedApprovalBackend } from "./shared_approval_backend.ts";
import { approver as by } from "../../tests/support/deciders.ts";

const SECRET = "an-approval-secret-that-is-at-least-32-bytes-long";
const MINUTE = 60_000;
const INPUT: ApprovalRequestInput = {
  tenant: "acme",
  subject: "alice",
  principal: principalOf("tokens_file", "alice"),
  tool: "fs__delete",
  server: "fs",
  effect: "destructive",
  arguments: { path: "/srv/data" },
  argumentsHash: "c".repeat(64),
};
const ALICE = { tenant: "acme", principal: principalOf("tokens_file", "alice") };

async function replicas(
  count: number,
  options: { maxPendingPerTenant?: number; maxPendingPerPrincipal?: number; shared?: SharedState } =
    {},
) {
  const clock = new ManualClock(1_700_000_000_000);
  const shared = options.shared ?? new MemorySharedState({ clock });
  const nonces = new MemoryNonceStore({ clock });
  const events: GatewayEvent[] = [];
  const queues: ApprovalQueue[] = [];
  const tokens: ApprovalTokens[] = [];
  for (let i = 1; i <= count; i++) {
    const bus = new InProcessEventBus();
    bus.subscribe((event) => events.push(event));
    const issuer = new ApprovalTokens({ secret: SECRET, clock, nonces });
    const queue = new ApprovalQueue({
      clock,
      bus,
      tokens: issuer,
      ttlMs: 10 * MINUTE,
      replica: `r${i}`,
      ...(options.maxPendingPerTenant === undefined
        ? {}
        : { maxPendingPerTenant: options.maxPendingPerTenant }),
      ...(options.maxPendingPerPrincipal === undefined
        ? {}
        : { maxPendingPerPrincipal: options.maxPendingPerPrincipal }),
    });
    await queue.share(
      await SharedApprovalBackend.open(shared, {
        requestTtlMs: 10 * MINUTE,
        tokenTtlMs: 10 * MINUTE,
        logger: silentLogger,
      }),
    );
    queues.push(queue);
    tokens.push(issuer);
  }
  // A tuple: tests take as many replicas as they asked for.
  const all = queues as [ApprovalQueue, ApprovalQueue, ApprovalQueue];
  return {
    clock,
    shared,
    events,
    queues: all,
    tokens,
    close: () => queues.forEach((q) => q.close()),
  };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    return error.code;
  }
  throw new Error("expected a GatewayError");
}

Deno.test("on another replica a request still knows its requester's principal: a namesake of another issuer cannot fetch it, and may decide it", async () => {
  const { queues: [a, b], close } = await replicas(2);
  try {
    const request = await a.file(INPUT);
    const namesake = {
      tenant: "acme",
      scopes: ["approver"],
      subject: "alice",
      principal: principalOf("jwt", "keys", "https://idp.example", "alice"),
    };
    await b.approve(request.id, namesake);
    await a.refresh(request.id);
    assert.equal(
      await codeOf(Promise.resolve().then(() => a.tokenFor(request.id, namesake))),
      "not_found",
    );
    assert.ok(a.tokenFor(request.id, ALICE).token);
  } finally {
    close();
  }
});

Deno.test("a request filed on one replica is listed and approved on another, and its token fetched and redeemed once on a third", async () => {
  const { queues: [a, b, c], tokens, close } = await replicas(3);
  try {
    const request = await a.file(INPUT);
    assert.deepEqual(b.list({ status: "pending" }).map((r) => r.id), [request.id]);
    const issued = await b.approve(request.id, by("operator-1"));
    await c.refresh(request.id);
    assert.deepEqual(c.tokenFor(request.id, ALICE), issued);
    assert.equal(c.get(request.id)?.status, "approved");
    const claims = { tenant: "acme", tool: "fs__delete", argumentsHash: INPUT.argumentsHash };
    assert.equal((await tokens[2]!.verify(issued.token, claims)).ok, true);
    for (const issuer of tokens) {
      assert.equal((await issuer.verify(issued.token, claims)).ok, false, "single use everywhere");
    }
  } finally {
    close();
  }
});

Deno.test("the requester cannot decide its own request on another replica", async () => {
  const { queues: [a, b], close } = await replicas(2);
  try {
    const request = await a.file(INPUT);
    assert.equal(await codeOf(b.approve(request.id, by("alice"))), "self_approval");
    assert.equal(await codeOf(b.reject(request.id, by("alice"))), "self_approval");
    assert.equal(a.get(request.id)?.status, "pending");
  } finally {
    close();
  }
});

Deno.test("the per-tenant pending bound counts the requests of every replica", async () => {
  const { queues: [a, b], close } = await replicas(2, { maxPendingPerTenant: 2 });
  try {
    await a.file({ ...INPUT, argumentsHash: "1".repeat(64) });
    await b.file({ ...INPUT, argumentsHash: "2".repeat(64) });
    assert.equal(
      await codeOf(a.file({ ...INPUT, argumentsHash: "3".repeat(64) })),
      "approval_queue_full",
    );
    assert.equal(
      await codeOf(b.file({ ...INPUT, argumentsHash: "4".repeat(64) })),
      "approval_queue_full",
    );
    // Another tenant has its own bound; a decision frees a slot on every replica.
    await b.file({ ...INPUT, tenant: "globex" });
    const [first] = a.list({ status: "pending" });
    await b.reject(first!.id, by("operator-1"));
    await a.file({ ...INPUT, argumentsHash: "5".repeat(64) });
  } finally {
    close();
  }
});

Deno.test("the per-principal pending bound counts the requests of every replica", async () => {
  const { queues: [a, b], close } = await replicas(2, {
    maxPendingPerTenant: 10,
    maxPendingPerPrincipal: 2,
  });
  try {
    await a.file({ ...INPUT, argumentsHash: "1".repeat(64) });
    await b.file({ ...INPUT, argumentsHash: "2".repeat(64) });
    for (const queue of [a, b]) {
      await assert.rejects(
        queue.file({ ...INPUT, argumentsHash: "3".repeat(64) }),
        (error: GatewayError) => {
          assert.equal(error.code, "approval_queue_full");
          assert.match(error.message, /MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL/);
          return true;
        },
      );
    }
    // Another principal of the tenant files; a decision frees the first principal's slot.
    const carol = { subject: "carol", principal: principalOf("tokens_file", "carol") };
    await b.file({ ...INPUT, ...carol, argumentsHash: "3".repeat(64) });
    const [first] = a.list({ status: "pending" });
    await b.reject(first!.id, by("operator-1"));
    await a.file({ ...INPUT, argumentsHash: "4".repeat(64) });
  } finally {
    close();
  }
});

Deno.test("an identical request filed on two replicas at once is one request", async () => {
  const { queues: [a, b], close } = await replicas(2);
  try {
    const [one, two] = await Promise.all([a.file(INPUT), b.file(INPUT)]);
    assert.equal(one.id, two.id);
    assert.equal(a.list().length, 1);
    assert.equal(b.list().length, 1);
  } finally {
    close();
  }
});

Deno.test("of two approvers deciding at once on two replicas one wins and the other is told who did", async () => {
  const { queues: [a, b, c], events, close } = await replicas(3);
  try {
    const request = await a.file(INPUT);
    const outcomes = await Promise.allSettled([
      b.approve(request.id, by("operator-1")),
      c.reject(request.id, by("operator-2"), "not now"),
    ]);
    const won = outcomes.filter((o) => o.status === "fulfilled");
    const lost = outcomes.filter((o) => o.status === "rejected");
    assert.equal(won.length, 1);
    assert.equal(lost.length, 1);
    const error = (lost[0] as PromiseRejectedResult).reason as GatewayError;
    assert.equal(error.code, "approval_not_pending");
    assert.match(error.message, /by operator-[12] at the same moment, on another replica/);
    await a.refresh(request.id);
    const settled = a.get(request.id)!;
    assert.equal(settled.status, won[0] === outcomes[0] ? "approved" : "denied");
    const decisions = events.filter((e) => e.type !== "approval.requested");
    assert.equal(decisions.length, 1, "only the decision that counted is announced");
  } finally {
    close();
  }
});

Deno.test("a request lapses on every replica", async () => {
  const { clock, queues: [a, b], close } = await replicas(2);
  try {
    const request = await a.file(INPUT);
    clock.advance(10 * MINUTE);
    assert.equal(b.get(request.id)?.status, "expired");
    assert.equal(await codeOf(b.approve(request.id, by("operator-1"))), "approval_expired");
    assert.equal(await codeOf(b.reject(request.id, by("operator-1"))), "approval_expired");
  } finally {
    close();
  }
});

Deno.test("approval events name the replica that made the change", async () => {
  const { queues: [a, b], events, close } = await replicas(2);
  try {
    const request = await a.file(INPUT);
    await b.approve(request.id, by("operator-1"));
    assert.deepEqual(events.map((e) => [e.type, (e as { replica?: string }).replica]), [
      ["approval.requested", "r1"],
      ["approval.approved", "r2"],
    ]);
  } finally {
    close();
  }
});

Deno.test("a malformed record in the shared bucket is skipped, never served", async () => {
  const { shared, queues: [a], close } = await replicas(1);
  try {
    const bucket = await shared.bucket(APPROVALS_BUCKET);
    await bucket.put("request.forged", encodeJson({ id: "forged", status: "approved" }));
    await bucket.put("request.other", encodeJson({ ...(await a.file(INPUT)), id: "another" }));
    await a.refresh("forged");
    assert.equal(a.get("forged"), undefined);
    assert.equal(a.list().length, 1, "only the real request");
  } finally {
    close();
  }
});

Deno.test("with the shared bucket unreachable, requests and decisions are refused, naming it", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const state = new MemorySharedState({ clock });
  let down = false;
  // The same state, failing on demand as an unreachable JetStream would.
  const flaky: SharedState = {
    async bucket(name, options) {
      const bucket = await state.bucket(name, options);
      const guard =
        <A extends unknown[], R>(fn: (...args: A) => Promise<R>) => (...args: A): Promise<R> =>
          down ? Promise.reject(new Error("TIMEOUT")) : fn.apply(bucket, args);
      return {
        name: bucket.name,
        get: guard(bucket.get),
        put: guard(bucket.put),
        create: guard(bucket.create),
        update: guard(bucket.update),
        delete: guard(bucket.delete),
        keys: guard(bucket.keys),
        watch: guard(bucket.watch),
      };
    },
    publish: (subject, data) => state.publish(subject, data),
    subscribe: (subject, handler) => state.subscribe(subject, handler),
    close: () => state.close(),
  };
  const { queues: [a], close } = await replicas(1, { shared: flaky });
  try {
    const request = await a.file(INPUT);
    down = true;
    await assert.rejects(
      a.file({ ...INPUT, argumentsHash: "d".repeat(64) }),
      (e: GatewayError) => e.code === "internal" && /bucket agent33_approvals/.test(e.message),
    );
    assert.equal(await codeOf(a.approve(request.id, by("operator-1"))), "internal");
    assert.equal(await codeOf(a.reject(request.id, by("operator-1"))), "internal");
  } finally {
    close();
  }
});

Deno.test("a shared queue refuses the local-only entry points", async () => {
  const { queues: [a], close } = await replicas(1);
  try {
    assert.throws(() => a.request(INPUT), /use|written through file\(\)/);
    const request = await a.file(INPUT);
    assert.throws(() => a.deny(request.id, by("operator-1")), /reject\(\)/);
  } finally {
    close();
  }
});
