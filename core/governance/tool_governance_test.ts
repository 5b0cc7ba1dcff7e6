import assert from "node:assert/strict";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { ManualClock } from "../support/clock.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { silentLogger } from "../support/logger.ts";
import { ApprovalQueue } from "./approval_queue.ts";
import { ApprovalTokens } from "./approval_tokens.ts";
import { AuditLog } from "./audit_log.ts";
import { MemoryNonceStore } from "./nonce_store.ts";
import { DEFAULT_POLICY, parsePolicies } from "./policy_loader.ts";
import { RateLimiter } from "./rate_limiter.ts";
import {
  type CallContext,
  effectClassOf,
  MAX_ARGUMENT_DEPTH,
  ToolGovernance,
  type ToolTarget,
  untrustedHints,
  type Verdict,
} from "./tool_governance.ts";
import { approver as by } from "../../tests/support/deciders.ts";

const POLICY = `
tenants:
  "*":
    approval: [destructive]
  acme:
    allow: ["gh__*", "fs__*", "system_status"]
    deny: ["gh__delete_*"]
    effects:
      "gh__create_*": write
      "fs__read_*": read
      "fs__wipe": destructive
    approval: [destructive]
    arguments:
      "fs__read_file":
        path: { pattern: "^/data/" }
    rate_limits:
      "gh__search": { per_minute: 2 }
connectors:
  gh:
    tenants: [acme]
    effects: [read, write, destructive]
  fs:
    tenants: "*"
    effects: [read, write]
`;

function setup(policy = POLICY, maxSchemaWork?: number) {
  const clock = new ManualClock(Date.parse("2026-11-29T12:00:00Z"));
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => events.push(e));
  const tokens = new ApprovalTokens({
    secret: "0123456789abcdef0123456789abcdef",
    clock,
    nonces: new MemoryNonceStore({ clock }),
  });
  const approvals = new ApprovalQueue({ clock, bus, tokens });
  const audit = new AuditLog({ bus, clock, logger: silentLogger });
  const governance = new ToolGovernance({
    policies: parsePolicies([{ path: "policies/test.yaml", text: policy }]),
    tokens,
    approvals,
    rateLimiter: new RateLimiter({ clock }),
    audit,
    clock,
    ...(maxSchemaWork === undefined ? {} : { maxSchemaWork }),
  });
  return { governance, approvals, tokens, clock, events, audit };
}

const acme: CallContext = { tenant: "acme", subject: "alice" };

const tool = (name: string, extra: Partial<ToolTarget> = {}): ToolTarget => ({
  name,
  ...(name.includes("__") ? { server: name.split("__")[0]! } : {}),
  descriptor: { inputSchema: { type: "object" } },
  ...extra,
});

function denied(verdict: Verdict, code: string): void {
  assert.equal(verdict.action, "deny", JSON.stringify(verdict));
  assert.equal((verdict as { code: string }).code, code);
}

Deno.test("ToolGovernance allows a call the policy allows, naming the allow rule", async () => {
  const { governance } = setup();
  const verdict = await governance.check(acme, tool("gh__list_issues"), {});
  assert.equal(verdict.action, "allow");
  assert.match((verdict as { rule: string }).rule, /policies\/test\.yaml:\d+ allow "gh__\*"/);
});

Deno.test("ToolGovernance denies an unknown tenant with unknown_tenant when no * entry exists", async () => {
  const { governance } = setup("tenants:\n  acme:\n    allow: ['*']\n");
  denied(
    await governance.check({ tenant: "nobody", subject: "x" }, tool("x"), {}),
    "unknown_tenant",
  );
});

Deno.test("ToolGovernance denies a deny glob with tool_denied naming file:line", async () => {
  const { governance } = setup();
  const verdict = await governance.check(acme, tool("gh__delete_repo"), {});
  denied(verdict, "tool_denied");
  assert.match(
    (verdict as { reason: string }).reason,
    /policies\/test\.yaml:\d+ deny "gh__delete_\*"/,
  );
});

Deno.test("ToolGovernance denies a tool outside the allowlist with not_allowed", async () => {
  const { governance } = setup();
  denied(await governance.check(acme, tool("other__thing"), {}), "not_allowed");
});

Deno.test("ToolGovernance enforces the connector boundary's tenants with connector_denied", async () => {
  const { governance } = setup();
  denied(
    await governance.check({ tenant: "globex", subject: "bob" }, tool("gh__list_issues"), {}),
    "connector_denied",
  );
});

Deno.test("ToolGovernance enforces the connector boundary's effect classes with effect_not_allowed", async () => {
  const { governance } = setup();
  denied(await governance.check(acme, tool("fs__wipe"), {}), "effect_not_allowed");
});

Deno.test("ToolGovernance validates arguments against the schema and the policy, listing every path", async () => {
  const { governance } = setup();
  const target = tool("fs__read_file", {
    descriptor: {
      inputSchema: {
        type: "object",
        properties: { path: { type: "string" }, limit: { type: "number" } },
        required: ["path"],
      },
    },
  });
  const verdict = await governance.check(acme, target, { path: "/etc/passwd", limit: "ten" });
  denied(verdict, "invalid_arguments");
  const reason = (verdict as { reason: string }).reason;
  assert.match(reason, /\/limit must be number/);
  assert.match(reason, /\/path must match pattern "\^\/data\/"/);
  assert.equal((await governance.check(acme, target, { path: "/data/x" })).action, "allow");
});

Deno.test("ToolGovernance validates 2020-12 input schemas", async () => {
  const { governance } = setup();
  const target = tool("gh__create_issue", {
    descriptor: {
      inputSchema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { labels: { type: "array", prefixItems: [{ type: "string" }] } },
      },
    },
  });
  denied(await governance.check(acme, target, { labels: [1] }), "invalid_arguments");
});

Deno.test("ToolGovernance refuses arguments whose check would pass maxSchemaWork with invalid_arguments", async () => {
  const target = tool("gh__tag", {
    descriptor: {
      inputSchema: {
        type: "object",
        properties: { tags: { type: "array", items: { type: "number" } } },
      },
    },
  });
  const args = { tags: Array.from({ length: 1_000 }, (_, i) => i) };
  assert.equal((await setup().governance.check(acme, target, args)).action, "allow");
  const verdict = await setup(POLICY, 500).governance.check(acme, target, args);
  denied(verdict, "invalid_arguments");
  assert.match((verdict as { reason: string }).reason, /more than 500 units of work/);
});

/** `levels` objects, each holding the next under `child`. */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { child: value };
  return value;
}

Deno.test("ToolGovernance refuses arguments nested past MAX_ARGUMENT_DEPTH with invalid_arguments, and audits the decision", async () => {
  const { governance, events, audit } = setup();
  // 5,000 levels overflowed the check's recursive steps: a policy_error, and nothing audited.
  const verdict = await governance.check(acme, tool("gh__list_issues"), nested(5_000));
  denied(verdict, "invalid_arguments");
  assert.match(
    (verdict as { reason: string }).reason,
    new RegExp(`nested more than ${MAX_ARGUMENT_DEPTH} levels deep; flatten them`),
  );
  await audit.flush();
  const decision = events.find((e) => e.type === "governance.decision") as Record<string, unknown>;
  assert.equal(decision.code, "invalid_arguments");
});

Deno.test("ToolGovernance checks arguments nested to MAX_ARGUMENT_DEPTH, under a recursive schema too", async () => {
  const { governance } = setup();
  const target = tool("gh__tree", {
    descriptor: {
      inputSchema: {
        type: "object",
        $defs: { node: { type: "object", properties: { child: { $ref: "#/$defs/node" } } } },
        $ref: "#/$defs/node",
      },
    },
  });
  const verdict = await governance.check(acme, target, nested(MAX_ARGUMENT_DEPTH));
  assert.equal(verdict.action, "allow", JSON.stringify(verdict));
});

Deno.test("ToolGovernance applies rate limits per tenant and tool with rate_limited and retryAfterMs", async () => {
  const { governance, clock } = setup();
  assert.equal((await governance.check(acme, tool("gh__search"), {})).action, "allow");
  assert.equal((await governance.check(acme, tool("gh__search"), {})).action, "allow");
  const third = await governance.check(acme, tool("gh__search"), {});
  denied(third, "rate_limited");
  assert.ok(((third as { retryAfterMs: number }).retryAfterMs) > 0);
  clock.advance(60_000);
  assert.equal((await governance.check(acme, tool("gh__search"), {})).action, "allow");
});

Deno.test("ToolGovernance counts calls with invalid arguments against the rate limit", async () => {
  const { governance } = setup();
  const strict = tool("gh__search", {
    descriptor: { inputSchema: { type: "object", required: ["q"] } },
  });
  denied(await governance.check(acme, strict, {}), "invalid_arguments");
  denied(await governance.check(acme, strict, {}), "invalid_arguments");
  // Before, invalid calls took no token: a caller could send them without end, each validated.
  denied(await governance.check(acme, strict, {}), "rate_limited");
});

Deno.test("ToolGovernance refuses a call over its rate limit without reading its arguments", async () => {
  const { governance, events } = setup();
  await governance.check(acme, tool("gh__search"), {});
  await governance.check(acme, tool("gh__search"), {});
  // Arguments JSON cannot carry fail the hash (policy_error) whenever they are read.
  const unreadable = { when: new Date(0) } as Record<string, unknown>;
  denied(await governance.check(acme, tool("gh__search"), unreadable), "rate_limited");
  const decisions = events.filter((e) => e.type === "governance.decision");
  const last = decisions.at(-1) as { argumentsHash: string; code?: string };
  assert.equal(last.code, "rate_limited");
  assert.notEqual(last.argumentsHash, (decisions[0] as { argumentsHash: string }).argumentsHash);
});

Deno.test("ToolGovernance asks for approval of a destructive call, then honours its token exactly once", async () => {
  const { governance, approvals } = setup();
  const target = tool("gh__drop_table", {
    descriptor: { inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  });
  const first = await governance.check(acme, target, { table: "users" });
  assert.equal(first.action, "approval_required");
  const { request } = first as Extract<Verdict, { action: "approval_required" }>;
  assert.equal(request.tool, "gh__drop_table");
  assert.equal(approvals.get(request.id)?.status, "pending");
  const { token } = await approvals.approve(request.id, by("operator"));
  const second = await governance.check(acme, target, { table: "users" }, { approvalToken: token });
  assert.equal(second.action, "allow");
  denied(
    await governance.check(acme, target, { table: "users" }, { approvalToken: token }),
    "approval_replayed",
  );
});

Deno.test("ToolGovernance refuses a token for other arguments with approval_mismatch", async () => {
  const { governance, approvals } = setup();
  const target = tool("gh__drop_table", {
    descriptor: { inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  });
  const first = await governance.check(acme, target, { table: "users" }) as Extract<
    Verdict,
    { action: "approval_required" }
  >;
  const { token } = await approvals.approve(first.request.id, by("operator"));
  denied(
    await governance.check(acme, target, { table: "orders" }, { approvalToken: token }),
    "approval_mismatch",
  );
});

Deno.test("ToolGovernance refuses a tampered token with approval_invalid and an expired one with approval_expired", async () => {
  const { governance, approvals, clock } = setup();
  const target = tool("gh__drop_table", {
    descriptor: { inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  });
  const first = await governance.check(acme, target, {}) as Extract<
    Verdict,
    { action: "approval_required" }
  >;
  const { token } = await approvals.approve(first.request.id, by("operator"));
  denied(
    await governance.check(acme, target, {}, { approvalToken: token.slice(0, -3) + "AAA" }),
    "approval_invalid",
  );
  denied(
    await governance.check(acme, target, {}, { approvalToken: "v1.garbage" }),
    "approval_invalid",
  );
  clock.advance(11 * 60_000);
  denied(await governance.check(acme, target, {}, { approvalToken: token }), "approval_expired");
});

/** The effect class of `name` with `annotations`, from upstream `server` (none: the gateway's own). */
function effectOf(
  name: string,
  annotations: Tool["annotations"] | undefined,
  server?: string,
): { effect: string; rule: string } {
  const { governance } = setup();
  const policy = governance.policies.tenants.get("acme");
  return effectClassOf({ name, annotations, server }, governance.policies, policy);
}

Deno.test("effectClassOf: a policy override, else annotations, else write; annotations only make it stricter", () => {
  assert.equal(effectOf("x", undefined).effect, "write");
  assert.equal(effectOf("x", { readOnlyHint: true }).effect, "read");
  assert.equal(effectOf("x", { destructiveHint: true }).effect, "destructive");
  assert.equal(effectOf("fs__read_file", undefined).effect, "read");
  assert.equal(effectOf("fs__read_file", { destructiveHint: true }).effect, "destructive");
  assert.equal(effectOf("fs__wipe", { readOnlyHint: true }).effect, "destructive");
});

Deno.test("effectClassOf: an untrusted upstream's readOnlyHint is no hint, and the rule says how to trust it", () => {
  const lying = effectOf("notes__tidy", { readOnlyHint: true }, "notes");
  assert.equal(lying.effect, "write");
  assert.match(
    lying.rule,
    /readOnlyHint of notes is not trusted: list notes under trusted_annotations/,
  );
  const wipe = effectOf("notes__x", { destructiveHint: true }, "notes");
  assert.equal(wipe.effect, "destructive", "a hint that makes it stricter still counts");
  assert.equal(effectOf("fs__read_file", undefined, "fs").effect, "read");
});

Deno.test("untrustedHints: an upstream's hints are untrusted unless trusted_annotations lists it; the gateway's own tools are trusted", () => {
  const policies = { ...DEFAULT_POLICY };
  assert.equal(untrustedHints(policies, "notes"), "notes");
  assert.equal(untrustedHints(policies, undefined), undefined);
  assert.equal(
    untrustedHints({ ...policies, trustedAnnotations: new Set(["fs"]) }, "fs"),
    undefined,
  );
  assert.equal(
    untrustedHints({ ...policies, trustedAnnotations: new Set(["fs"]) }, "notes"),
    "notes",
  );
  assert.equal(untrustedHints({ ...policies, trustedAnnotations: "*" }, "notes"), undefined);
});

Deno.test("ToolGovernance.visible hides what the tenant may not call, without arguments", () => {
  const { governance } = setup();
  assert.equal(governance.visible(acme, tool("gh__list_issues")), true);
  assert.equal(governance.visible(acme, tool("gh__delete_repo")), false);
  assert.equal(governance.visible(acme, tool("other__thing")), false);
  assert.equal(
    governance.visible({ tenant: "globex", subject: "b" }, tool("gh__list_issues")),
    false,
  );
});

Deno.test("ToolGovernance audits every decision with the arguments' hash and publishes it", async () => {
  const { governance, events, audit } = setup();
  await governance.check(acme, tool("gh__delete_repo"), { repo: "x" });
  await audit.flush();
  const decision = events.find((e) => e.type === "governance.decision") as Record<string, unknown>;
  assert.equal(decision.verdict, "deny");
  assert.equal(decision.code, "tool_denied");
  assert.match(String(decision.argumentsHash), /^[0-9a-f]{64}$/);
  assert.equal(decision.arguments, undefined, "raw arguments never reach the bus");
});

Deno.test("ToolGovernance.check with dryRun decides without creating requests or using rate limits", async () => {
  const { governance, approvals } = setup();
  const target = tool("gh__drop", {
    descriptor: { inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  });
  assert.equal(
    (await governance.check(acme, target, {}, { dryRun: true })).action,
    "approval_required",
  );
  assert.equal(approvals.list().length, 0);
  for (let i = 0; i < 5; i++) {
    assert.equal(
      (await governance.check(acme, tool("gh__search"), {}, { dryRun: true })).action,
      "allow",
    );
  }
});

Deno.test("ToolGovernance keeps an approval token when a rate limit refuses the approved call", async () => {
  const { governance, approvals, clock } = setup(POLICY.replace(
    '"gh__search": { per_minute: 2 }',
    '"gh__drop_*": { per_minute: 1 }',
  ));
  const target = tool("gh__drop_table", {
    descriptor: { inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  });
  const first = await governance.check(acme, target, { table: "users" }); // uses the one call
  const { request } = first as Extract<Verdict, { action: "approval_required" }>;
  const { token } = await approvals.approve(request.id, by("operator"));
  denied(
    await governance.check(acme, target, { table: "users" }, { approvalToken: token }),
    "rate_limited",
  );
  clock.advance(60_000);
  const retried = await governance.check(acme, target, { table: "users" }, {
    approvalToken: token,
  });
  assert.equal(retried.action, "allow", "the token survives a refusal for another reason");
});

Deno.test("ToolGovernance with deferRedeem redeems the token only through redeem(), once", async () => {
  const { governance, approvals } = setup();
  const target = tool("gh__drop_table", {
    descriptor: { inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
  });
  const args = { table: "users" };
  const first = await governance.check(acme, target, args);
  const { request } = first as Extract<Verdict, { action: "approval_required" }>;
  const { token } = await approvals.approve(request.id, by("operator"));
  const options = { approvalToken: token, deferRedeem: true };
  const a = await governance.check(acme, target, args, options);
  const b = await governance.check(acme, target, args, options);
  assert.ok(a.action === "allow" && b.action === "allow" && a.redemption, "checks use nothing");
  assert.equal(await governance.redeem(acme, target, a, args), undefined);
  denied((await governance.redeem(acme, target, b, args))!, "approval_replayed");
});

Deno.test("ToolGovernance governs a scanner-escalated tool as destructive and names the finding", async () => {
  const { governance } = setup();
  const target = tool("gh__list", {
    descriptor: { inputSchema: { type: "object" }, annotations: { readOnlyHint: true } },
    escalation: "scanner finding hidden-instructions (high)",
  });
  const verdict = await governance.check(acme, target, {});
  assert.equal(verdict.action, "approval_required");
  assert.match(
    (verdict as { reason: string }).reason,
    /destructive \(scanner escalation: scanner finding hidden-instructions \(high\)\)/,
  );
  // Through a connector that lets no destructive call pass, the finding is the reason given.
  const fs = await governance.check(acme, { ...target, name: "fs__list", server: "fs" }, {});
  denied(fs, "effect_not_allowed");
  assert.match((fs as { reason: string }).reason, /scanner escalation/);
});

Deno.test("ToolGovernance.access applies resources:/prompts: globs and the connector boundary", () => {
  const { governance } = setup(`
tenants:
  acme:
    resources: { allow: ["proxy://gh/*", "agent33://*"], deny: ["proxy://gh/secret/*"] }
    prompts: ["gh__*"]
  globex: {}
connectors:
  gh: { tenants: [acme], effects: [read] }
`);
  const globex = { tenant: "globex", subject: "g" };
  const access = (ctx: CallContext, kind: "resource" | "prompt", name: string, server?: string) =>
    governance.access(ctx, { kind, name, ...(server ? { server } : {}) });
  assert.equal(access(acme, "resource", "proxy://gh/readme", "gh").action, "allow");
  denied(access(acme, "resource", "proxy://gh/secret/key", "gh"), "tool_denied");
  denied(access(acme, "resource", "proxy://fs/x", "fs"), "not_allowed");
  denied(access(acme, "prompt", "fs__summarize", "fs"), "not_allowed");
  assert.equal(access(acme, "prompt", "gh__triage", "gh").action, "allow");
  const boundary = access(globex, "resource", "proxy://gh/readme", "gh");
  denied(boundary, "connector_denied");
  assert.match((boundary as { reason: string }).reason, /policies\/test\.yaml:\d+ connector gh/);
  denied(access({ tenant: "nobody", subject: "n" }, "prompt", "x"), "unknown_tenant");
});

Deno.test("ToolGovernance.use audits a resource or prompt use with its surface", async () => {
  const { governance, events } = setup(`
tenants:
  acme:
    prompts: { deny: ["gh__secret_*"] }
`);
  const denied_ = await governance.use(
    acme,
    { kind: "prompt", name: "gh__secret_plan", server: "gh" },
    "prompts/get",
    { topic: "x" },
  );
  denied(denied_, "tool_denied");
  const line = events.find((e) => e.type === "governance.decision");
  assert.ok(line && line.type === "governance.decision");
  assert.equal(line.surface, "prompts/get");
  assert.equal(line.tool, "gh__secret_plan");
  assert.equal(line.code, "tool_denied");
});

const ITEM_LIMITS = `
tenants:
  acme:
    rate_limits: { "gh__*": { per_minute: 1 } }
    resources:
      deny: ["proxy://gh/secret/*"]
      rate_limits: { "proxy://gh/*": { per_minute: 2 } }
    prompts: { rate_limits: { "gh__*": { per_minute: 1 } } }
  globex:
    resources: { rate_limits: { "proxy://gh/*": { per_minute: 2 } } }
`;

const readOf = (governance: ToolGovernance, ctx: CallContext, uri: string) =>
  governance.use(ctx, { kind: "resource", name: uri, server: "gh" }, "resources/read", { uri });

Deno.test("ToolGovernance.use applies item rate limits per tenant and rule, whatever URI is read", async () => {
  const { governance, clock } = setup(ITEM_LIMITS);
  assert.equal((await readOf(governance, acme, "proxy://gh/a")).action, "allow");
  assert.equal((await readOf(governance, acme, "proxy://gh/b")).action, "allow");
  // A fresh URI is no fresh bucket: clients choose URIs freely, so the rule is the bucket.
  const third = await readOf(governance, acme, "proxy://gh/c?nonce=3");
  denied(third, "rate_limited");
  assert.ok((third as { retryAfterMs: number }).retryAfterMs > 0);
  assert.match(
    (third as { reason: string }).reason,
    /Tenant "acme" exceeded the rate limit for resources matching "proxy:\/\/gh\/\*" \(policies\/test\.yaml:7 resources rate_limit proxy:\/\/gh\/\* 2\/min burst 2\); retry in 30 s/,
  );
  const globex = { tenant: "globex", subject: "g" };
  assert.equal((await readOf(governance, globex, "proxy://gh/a")).action, "allow");
  clock.advance(30_000);
  assert.equal((await readOf(governance, acme, "proxy://gh/d")).action, "allow");
});

Deno.test("ToolGovernance.use keeps prompt, resource and tool rate limits in separate buckets", async () => {
  const { governance } = setup(ITEM_LIMITS);
  const prompt = (name: string) =>
    governance.use(acme, { kind: "prompt", name, server: "gh" }, "prompts/get");
  assert.equal((await governance.check(acme, tool("gh__search"), {})).action, "allow");
  assert.equal((await prompt("gh__triage")).action, "allow", "the tool's bucket is its own");
  denied(await prompt("gh__plan"), "rate_limited");
  assert.equal((await readOf(governance, acme, "proxy://gh/a")).action, "allow");
});

Deno.test("ToolGovernance takes no item rate limit token for a denied use or a listing", async () => {
  const { governance } = setup(ITEM_LIMITS);
  for (let i = 0; i < 3; i++) {
    denied(await readOf(governance, acme, "proxy://gh/secret/key"), "tool_denied");
    assert.equal(
      governance.access(acme, { kind: "resource", name: "proxy://gh/a" }).action,
      "allow",
    );
  }
  assert.equal((await readOf(governance, acme, "proxy://gh/a")).action, "allow");
  assert.equal((await readOf(governance, acme, "proxy://gh/b")).action, "allow");
});

Deno.test("ToolGovernance.use refuses a use over its rate limit without reading its arguments", async () => {
  const { governance, events } = setup(ITEM_LIMITS);
  await readOf(governance, acme, "proxy://gh/a");
  await readOf(governance, acme, "proxy://gh/b");
  const unreadable = { when: new Date(0) } as Record<string, unknown>;
  const verdict = await governance.use(
    acme,
    { kind: "resource", name: "proxy://gh/c", server: "gh" },
    "resources/read",
    unreadable,
  );
  denied(verdict, "rate_limited");
  // Arguments JSON cannot carry fail the hash, which would leave the use unaudited.
  const last = events.filter((e) => e.type === "governance.decision").at(-1) as { code?: string };
  assert.equal(last.code, "rate_limited");
});
