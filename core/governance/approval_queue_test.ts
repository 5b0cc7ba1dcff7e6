import assert from "node:assert/strict";
import { principalOf } from "../auth/token_payload.ts";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import { type GatewayEvent, subjectOf } from "../bus/events.ts";
import { ApprovalQueue, type ApprovalRequestInput } from "./approval_queue.ts";
import { ApprovalTokens } from "./approval_tokens.ts";
import { MemoryNonceStore } from "./nonce_store.ts";
import { approver as by } from "../../tests/support/deciders.ts";

const SECRET = "an-approval-secret-that-is-at-least-32-bytes-long";
const HASH = "c".repeat(64);
const MINUTE = 60_000;

const INPUT: ApprovalRequestInput = {
  tenant: "acme",
  subject: "alice",
  principal: principalOf("tokens_file", "alice"),
  tool: "fs__delete",
  server: "fs",
  effect: "destructive",
  arguments: { path: "/srv/data", secret: "hunter2" },
  argumentsHash: HASH,
};
const ALICE = { tenant: "acme", principal: principalOf("tokens_file", "alice") };

function setup(
  options: {
    ttlMs?: number;
    maxPending?: number;
    maxPendingPerTenant?: number;
    maxPendingPerPrincipal?: number;
    tokenTtlMs?: number;
  } = {},
) {
  const clock = new ManualClock(1_700_000_000_000);
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((event) => events.push(event));
  const tokens = new ApprovalTokens({
    secret: SECRET,
    clock,
    nonces: new MemoryNonceStore({ clock }),
    ...(options.tokenTtlMs === undefined ? {} : { ttlMs: options.tokenTtlMs }),
  });
  const queue = new ApprovalQueue({
    clock,
    bus,
    tokens,
    ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }),
    ...(options.maxPending === undefined ? {} : { maxPending: options.maxPending }),
    ...(options.maxPendingPerTenant === undefined
      ? {}
      : { maxPendingPerTenant: options.maxPendingPerTenant }),
    ...(options.maxPendingPerPrincipal === undefined
      ? {}
      : { maxPendingPerPrincipal: options.maxPendingPerPrincipal }),
  });
  return { clock, bus, events, tokens, queue };
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    return error.code;
  }
  throw new Error("expected a GatewayError");
}

async function asyncCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    return error.code;
  }
  throw new Error("expected a GatewayError");
}

function hashOf(n: number): string {
  return n.toString(16).padStart(64, "0");
}

/** The approval_queue_full refusal `file` throws. */
function queueFull(file: () => unknown): GatewayError {
  try {
    file();
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    assert.equal(error.code, "approval_queue_full");
    return error;
  }
  throw new Error("expected approval_queue_full");
}

Deno.test("a request is pending with an id, a creation time and a ten-minute expiry", () => {
  const { queue, clock } = setup();
  const request = queue.request(INPUT);
  assert.match(request.id, /^[0-9a-f-]{36}$/);
  assert.equal(request.status, "pending");
  assert.equal(request.createdAt, clock.now());
  assert.equal(request.expiresAt, clock.now() + 10 * MINUTE);
  assert.deepEqual(request.arguments, INPUT.arguments, "the approver sees the arguments");
  assert.deepEqual(queue.get(request.id), request);
  assert.deepEqual(queue.list({ status: "pending" }), [request]);
});

Deno.test("approval.requested is published without the raw arguments", () => {
  const { queue, events } = setup();
  const request = queue.request(INPUT);
  assert.deepEqual(events, [{
    type: "approval.requested",
    id: request.id,
    tenant: "acme",
    subject: "alice",
    tool: "fs__delete",
    server: "fs",
    effect: "destructive",
    argumentsHash: HASH,
    expiresAt: request.expiresAt,
  }]);
  assert.ok(!JSON.stringify(events).includes("hunter2"));
});

Deno.test("an identical pending request returns the existing one instead of piling up", () => {
  const { queue, events } = setup();
  const first = queue.request(INPUT);
  const again = queue.request({ ...INPUT, arguments: { ...INPUT.arguments } });
  assert.equal(again.id, first.id);
  assert.equal(queue.list().length, 1);
  assert.equal(events.length, 1, "announced once");
  const otherCaller = queue.request({
    ...INPUT,
    subject: "bob",
    principal: principalOf("tokens_file", "bob"),
  });
  // Of the same name, but another caller: it must not be handed alice's pending request.
  const namesake = queue.request({
    ...INPUT,
    principal: principalOf("jwt", "keys", "https://idp.example", "alice"),
  });
  const otherTool = queue.request({ ...INPUT, tool: "fs__rm" });
  const otherArgs = queue.request({ ...INPUT, argumentsHash: "d".repeat(64) });
  const otherTenant = queue.request({ ...INPUT, tenant: "globex" });
  const ids = new Set(
    [first, otherCaller, namesake, otherTool, otherArgs, otherTenant].map((r) => r.id),
  );
  assert.equal(ids.size, 6, "any difference is a separate request");
});

Deno.test("approving issues a token bound to the request's tenant, tool and hash", async () => {
  const { queue, tokens, clock } = setup();
  const request = queue.request(INPUT);
  const { token, expiresAt } = await queue.approve(request.id, by("operator-1"));
  assert.equal(expiresAt, clock.now() + 10 * MINUTE);
  const approved = queue.get(request.id)!;
  assert.equal(approved.status, "approved");
  assert.equal(approved.decidedBy, "operator-1");
  assert.equal(approved.decidedAt, clock.now());
  assert.equal(approved.tokenExpiresAt, expiresAt);
  assert.ok(!("token" in approved), "snapshots never carry the token");
  const verified = await tokens.verify(token, {
    tenant: "acme",
    tool: "fs__delete",
    argumentsHash: HASH,
  });
  assert.ok(verified.ok);
  assert.equal(verified.requestId, request.id);
});

Deno.test("approval.approved is published with the approver and without the token", async () => {
  const { queue, events } = setup();
  const request = queue.request(INPUT);
  const { token, expiresAt } = await queue.approve(request.id, by("operator-1"));
  const last = events.at(-1)!;
  assert.deepEqual(last, {
    type: "approval.approved",
    id: request.id,
    tenant: "acme",
    subject: "alice",
    tool: "fs__delete",
    server: "fs",
    effect: "destructive",
    argumentsHash: HASH,
    expiresAt,
    by: "operator-1",
  });
  assert.ok(!JSON.stringify(events).includes(token));
  assert.ok(!JSON.stringify(events).includes("hunter2"));
});

Deno.test("approving twice is approval_not_pending", async () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  await queue.approve(request.id, by("operator-1"));
  assert.equal(
    await asyncCode(queue.approve(request.id, by("operator-2"))),
    "approval_not_pending",
  );
  assert.equal(code(() => queue.deny(request.id, by("operator-2"))), "approval_not_pending");
});

Deno.test("two concurrent approvals of one request: exactly one issues a token", async () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  const results = await Promise.allSettled([
    queue.approve(request.id, by("operator-1")),
    queue.approve(request.id, by("operator-2")),
  ]);
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
  const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
  assert.equal((rejected.reason as GatewayError).code, "approval_not_pending");
});

Deno.test("an expired request cannot be approved or denied", async () => {
  const { queue, clock } = setup({ ttlMs: MINUTE });
  const request = queue.request(INPUT);
  clock.advance(MINUTE);
  assert.equal(queue.get(request.id)?.status, "expired");
  assert.equal(await asyncCode(queue.approve(request.id, by("operator-1"))), "approval_expired");
  assert.equal(code(() => queue.deny(request.id, by("operator-1"))), "approval_expired");
});

Deno.test("an unknown request is not_found", async () => {
  const { queue } = setup();
  assert.equal(await asyncCode(queue.approve("nope", by("operator-1"))), "not_found");
  assert.equal(code(() => queue.deny("nope", by("operator-1"))), "not_found");
  assert.equal(code(() => queue.tokenFor("nope", ALICE)), "not_found");
  assert.equal(queue.get("nope"), undefined);
});

Deno.test("denying records the reason and publishes approval.denied", () => {
  const { queue, events } = setup();
  const request = queue.request(INPUT);
  const denied = queue.deny(request.id, by("operator-1"), "production data");
  assert.equal(denied.status, "denied");
  assert.equal(denied.reason, "production data");
  assert.deepEqual(events.at(-1), {
    type: "approval.denied",
    id: request.id,
    tenant: "acme",
    subject: "alice",
    tool: "fs__delete",
    server: "fs",
    effect: "destructive",
    argumentsHash: HASH,
    expiresAt: request.expiresAt,
    by: "operator-1",
    reason: "production data",
  });
});

Deno.test("a decision needs the approver's identity", async () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  await assert.rejects(queue.approve(request.id, by(" ")), TypeError);
  assert.throws(() => queue.deny(request.id, by("")), TypeError);
  assert.equal(queue.get(request.id)?.status, "pending");
});

Deno.test("the requester fetches its token once approved", async () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  assert.equal(code(() => queue.tokenFor(request.id, ALICE)), "approval_pending");
  const issued = await queue.approve(request.id, by("operator-1"));
  assert.deepEqual(queue.tokenFor(request.id, ALICE), issued);
  assert.deepEqual(queue.tokenFor(request.id, ALICE), issued, "fetching again is harmless");
});

Deno.test("only the requester (same tenant and principal) can fetch the token", async () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  await queue.approve(request.id, by("operator-1"));
  assert.equal(
    code(() =>
      queue.tokenFor(request.id, { tenant: "acme", principal: principalOf("tokens_file", "bob") })
    ),
    "not_found",
  );
  assert.equal(
    code(() =>
      queue.tokenFor(request.id, {
        tenant: "globex",
        principal: principalOf("tokens_file", "alice"),
      })
    ),
    "not_found",
  );
});

Deno.test("the requester of a denied request learns it was denied and why", () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  queue.deny(request.id, by("operator-1"), "production data");
  assert.throws(() => queue.tokenFor(request.id, ALICE), (error: GatewayError) => {
    assert.equal(error.code, "approval_denied");
    assert.match(error.message, /was denied: production data/);
    return true;
  });
});

Deno.test("a token not fetched before it expires is approval_expired, later pruned", async () => {
  const { queue, clock } = setup({ ttlMs: MINUTE, tokenTtlMs: MINUTE });
  const request = queue.request(INPUT);
  await queue.approve(request.id, by("operator-1"));
  clock.advance(MINUTE - 1);
  assert.ok(queue.tokenFor(request.id, ALICE).token);
  clock.advance(1);
  assert.equal(code(() => queue.tokenFor(request.id, ALICE)), "approval_expired");
  clock.advance(MINUTE);
  assert.equal(code(() => queue.tokenFor(request.id, ALICE)), "not_found");
  assert.equal(queue.list().length, 0);
});

Deno.test("a lapsed request shows as expired, then is pruned; a new identical one starts fresh", () => {
  const { queue, clock } = setup({ ttlMs: MINUTE });
  const first = queue.request(INPUT);
  clock.advance(MINUTE);
  assert.deepEqual(queue.list({ status: "pending" }), []);
  assert.equal(queue.get(first.id)?.status, "expired");
  const second = queue.request(INPUT);
  assert.notEqual(second.id, first.id);
  assert.equal(second.status, "pending");
  clock.advance(MINUTE);
  assert.equal(queue.get(first.id), undefined, "the lapsed one is gone");
  assert.equal(queue.get(second.id)?.status, "expired");
});

Deno.test("a denied request stays visible as denied for a while, then is pruned", () => {
  const { queue, clock } = setup({ ttlMs: MINUTE });
  const request = queue.request(INPUT);
  clock.advance(MINUTE / 2);
  queue.deny(request.id, by("operator-1"));
  clock.advance(MINUTE - 1);
  assert.equal(code(() => queue.tokenFor(request.id, ALICE)), "approval_denied");
  clock.advance(1);
  assert.equal(queue.get(request.id), undefined);
});

Deno.test("the queue is bounded: beyond maxPending, requests are refused with approval_queue_full", () => {
  const { queue } = setup({ maxPending: 3 });
  for (let i = 0; i < 3; i++) queue.request({ ...INPUT, argumentsHash: hashOf(i) });
  const full = queueFull(() => queue.request({ ...INPUT, argumentsHash: hashOf(3) }));
  assert.match(full.message, /3 approval requests are already waiting/);
  assert.equal(full.toMcpError().code, -32600);
  assert.equal(
    queue.request({ ...INPUT, argumentsHash: hashOf(0) }).status,
    "pending",
    "dedup still works",
  );
});

Deno.test("a full queue makes room by dropping lapsed requests first", () => {
  const { queue, clock } = setup({ maxPending: 2, ttlMs: MINUTE });
  const old = queue.request({ ...INPUT, argumentsHash: hashOf(0) });
  clock.advance(MINUTE / 2);
  const young = queue.request({ ...INPUT, argumentsHash: hashOf(1) });
  clock.advance(MINUTE / 2);
  const fresh = queue.request({ ...INPUT, argumentsHash: hashOf(2) });
  assert.equal(queue.get(old.id)?.status, "expired");
  assert.deepEqual(queue.list({ status: "pending" }).map((r) => r.id), [young.id, fresh.id]);
  assert.equal(
    code(() => queue.request({ ...INPUT, argumentsHash: hashOf(3) })),
    "approval_queue_full",
    "live requests are never dropped to make room",
  );
});

Deno.test("deciding frees a slot, and decided requests kept for pickup are bounded too", async () => {
  const { queue } = setup({ maxPending: 2 });
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const request = queue.request({ ...INPUT, argumentsHash: hashOf(i) });
    ids.push(request.id);
    if (i % 2 === 0) await queue.approve(request.id, by("operator-1"));
    else queue.deny(request.id, by("operator-1"));
  }
  // At most maxPending settled requests are kept, plus the one filed last (now denied).
  assert.equal(queue.list().length, 3);
  assert.equal(queue.get(ids[0]!), undefined, "the oldest decided request went first");
  assert.equal(queue.get(ids[5]!)?.status, "denied");
});

Deno.test("approval events go on agent33.mcp.approvals.<requested|approved|denied>", async () => {
  const { queue, events } = setup();
  await queue.approve(queue.request(INPUT).id, by("operator-1"));
  queue.deny(queue.request({ ...INPUT, argumentsHash: hashOf(1) }).id, by("operator-1"));
  assert.deepEqual(events.map(subjectOf), [
    "agent33.mcp.approvals.requested",
    "agent33.mcp.approvals.approved",
    "agent33.mcp.approvals.requested",
    "agent33.mcp.approvals.denied",
  ]);
});

Deno.test("list filters by status, oldest first", async () => {
  const { queue } = setup();
  const a = queue.request({ ...INPUT, argumentsHash: hashOf(1) });
  const b = queue.request({ ...INPUT, argumentsHash: hashOf(2) });
  const c = queue.request({ ...INPUT, argumentsHash: hashOf(3) });
  await queue.approve(b.id, by("operator-1"));
  queue.deny(c.id, by("operator-1"));
  assert.deepEqual(queue.list().map((r) => r.id), [a.id, b.id, c.id]);
  assert.deepEqual(queue.list({ status: "pending" }).map((r) => r.id), [a.id]);
  assert.deepEqual(queue.list({ status: "approved" }).map((r) => r.id), [b.id]);
  assert.deepEqual(queue.list({ status: "denied" }).map((r) => r.id), [c.id]);
});

Deno.test("snapshots are copies: changing one changes nothing in the queue", () => {
  const { queue } = setup();
  const request = queue.request(INPUT);
  (request as { status: string }).status = "approved";
  assert.equal(queue.get(request.id)?.status, "pending");
});

Deno.test("a request needs a well-formed arguments hash and identity", () => {
  const { queue } = setup();
  assert.throws(() => queue.request({ ...INPUT, argumentsHash: "nope" }), TypeError);
  assert.throws(() => queue.request({ ...INPUT, subject: "" }), TypeError);
});

Deno.test("the requester of an approval cannot approve or deny it, whatever its scopes", async () => {
  const { queue } = setup();
  const { id } = queue.request(INPUT);
  await assert.rejects(queue.approve(id, by("alice")), (error: GatewayError) => {
    assert.equal(error.code, "self_approval");
    assert.match(error.message, /"alice" asked for approval request .* cannot approve it/);
    return true;
  });
  assert.equal(code(() => queue.deny(id, by("alice"))), "self_approval");
  assert.equal(queue.get(id)?.status, "pending");
  const { token } = await queue.approve(id, by("bob"));
  assert.equal(queue.tokenFor(id, ALICE).token, token);
});

Deno.test("a JWT whose sub names the requester is another caller: it cannot fetch the token, and it may decide", async () => {
  const { queue } = setup();
  const { id } = queue.request({
    ...INPUT,
    subject: "static-token",
    principal: principalOf("static", "static-token"),
  });
  const namesake = {
    tenant: "acme",
    scopes: ["approver"],
    subject: "static-token",
    principal: principalOf("jwt", "keys", "https://idp.example", "static-token"),
  };
  const { token } = await queue.approve(id, namesake);
  assert.equal(queue.get(id)?.decidedBy, "static-token", "recorded under its name");
  assert.equal(code(() => queue.tokenFor(id, namesake)), "not_found");
  const requester = { tenant: "acme", principal: principalOf("static", "static-token") };
  assert.equal(queue.tokenFor(id, requester).token, token);
});

Deno.test("the same sub from two issuers: the requester's namesake of another issuer may decide, its own issuer's may not", async () => {
  const { queue } = setup();
  const alice = (iss: string) => ({
    subject: "alice",
    principal: principalOf("jwt", "keys", iss, "alice"),
    tenant: "acme",
    scopes: ["approver"],
  });
  const { id } = queue.request({ ...INPUT, principal: alice("https://a.example").principal });
  assert.equal(await asyncCode(queue.approve(id, alice("https://a.example"))), "self_approval");
  await queue.approve(id, alice("https://b.example"));
  assert.equal(queue.get(id)?.status, "approved");
});

Deno.test("a request without a principal (an older replica's) is no one's token, and its namesakes cannot decide it", async () => {
  const { queue } = setup();
  const { principal: _, ...old } = INPUT;
  const { id } = queue.request(old);
  assert.equal(
    await asyncCode(queue.approve(id, by("alice"))),
    "self_approval",
    "closed: a decider of the requester's name may be the requester",
  );
  await queue.approve(id, by("bob"));
  assert.equal(
    code(() => queue.tokenFor(id, ALICE)),
    "not_found",
    "closed: nobody can show it is theirs",
  );
});

Deno.test("an in-band decision (the caller's own user answering) is exempt from requester ≠ approver", async () => {
  const { queue } = setup();
  const first = queue.request(INPUT);
  await queue.approve(first.id, by("alice"), { inBand: true });
  assert.equal(queue.get(first.id)?.status, "approved");
  const second = queue.request({ ...INPUT, argumentsHash: "d".repeat(64) });
  queue.deny(second.id, by("alice"), "no", { inBand: true });
  assert.equal(queue.get(second.id)?.status, "denied");
});

Deno.test("one principal's pending requests are bounded, and the tenant's other principals still get theirs", () => {
  const { queue } = setup({ maxPendingPerTenant: 10, maxPendingPerPrincipal: 2 });
  const first = queue.request({ ...INPUT, argumentsHash: hashOf(1) });
  queue.request({ ...INPUT, argumentsHash: hashOf(2) });
  assert.match(
    queueFull(() => queue.request({ ...INPUT, argumentsHash: hashOf(3) })).message,
    /"alice" of tenant "acme" already has 2 .*MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL/,
  );
  // The identical request is still handed back: it takes no new slot.
  assert.equal(queue.request({ ...INPUT, argumentsHash: hashOf(1) }).id, first.id);
  const carol = { subject: "carol", principal: principalOf("tokens_file", "carol") };
  assert.equal(queue.request({ ...INPUT, ...carol, argumentsHash: hashOf(3) }).status, "pending");
  // A decision frees the principal's slot.
  queue.deny(first.id, by("bob"), "no");
  assert.equal(queue.request({ ...INPUT, argumentsHash: hashOf(3) }).status, "pending");
});

Deno.test("the per-principal bound is never more than the per-tenant bound", () => {
  const { queue } = setup({ maxPendingPerTenant: 1, maxPendingPerPrincipal: 5 });
  queue.request(INPUT);
  assert.match(
    queueFull(() => queue.request({ ...INPUT, argumentsHash: "d".repeat(64) })).message,
    /MCP_MAX_PENDING_APPROVALS_PER_TENANT/,
  );
});

Deno.test("one tenant's pending requests are bounded, and the other tenants still get theirs", async () => {
  const { queue } = setup({ maxPendingPerTenant: 2 });
  const first = queue.request({ ...INPUT, argumentsHash: hashOf(1) });
  queue.request({ ...INPUT, argumentsHash: hashOf(2) });
  assert.match(
    queueFull(() => queue.request({ ...INPUT, argumentsHash: hashOf(3) })).message,
    /Tenant "acme" already has 2 .*MCP_MAX_PENDING_APPROVALS_PER_TENANT/,
  );
  assert.equal(
    queue.request({ ...INPUT, tenant: "globex", argumentsHash: hashOf(3) }).status,
    "pending",
  );
  // A decision frees the tenant's slot.
  await queue.approve(first.id, by("bob"));
  assert.equal(queue.request({ ...INPUT, argumentsHash: hashOf(3) }).status, "pending");
});

Deno.test("an approver decides its own tenant's requests only; another tenant's are not_found to it", async () => {
  const { queue } = setup();
  const { id } = queue.request(INPUT);
  assert.equal(await asyncCode(queue.approve(id, by("bob", "globex"))), "not_found");
  assert.equal(code(() => queue.deny(id, by("bob", "globex"), "no")), "not_found");
  assert.equal(queue.get(id)?.status, "pending", "untouched");
  await queue.approve(id, by("carol", "acme"));
  assert.equal(queue.get(id)?.status, "approved");
});

Deno.test("an approver with all_tenants (or admin) decides every tenant's requests", async () => {
  const { queue } = setup();
  const first = queue.request(INPUT);
  const everyTenant = { ...by("bob", "ops"), scopes: ["approver", "all_tenants"] };
  await queue.approve(first.id, everyTenant);
  assert.equal(queue.get(first.id)?.status, "approved");
  const second = queue.request({ ...INPUT, argumentsHash: "d".repeat(64) });
  queue.deny(second.id, { ...by("root", "ops"), scopes: ["admin"] }, "no");
  assert.equal(queue.get(second.id)?.status, "denied");
});
