import assert from "node:assert/strict";
import { type Decision, type Facts, precedence } from "./tool_governance.ts";

const base: Facts = {
  tenantKnown: true,
  connectorTenant: "none",
  connectorEffect: "none",
  denied: false,
  hasAllowList: false,
  allowed: false,
  invalidArguments: false,
  rateLimited: false,
  requiresApproval: false,
  token: "none",
};

// Each row: the facts that differ from `base`, and the decision. Read top to bottom, it is the
// policy's precedence: deny > require > allow > default (allowlist semantics once any allow exists).
const TABLE: [Partial<Facts>, Decision][] = [
  [{}, { action: "allow" }],
  [{ tenantKnown: false }, { action: "deny", code: "unknown_tenant" }],
  [{ tenantKnown: false, denied: true, allowed: true }, { action: "deny", code: "unknown_tenant" }],
  [{ connectorTenant: "denied" }, { action: "deny", code: "connector_denied" }],
  [{ connectorTenant: "denied", connectorEffect: "denied" }, {
    action: "deny",
    code: "connector_denied",
  }],
  [{ connectorTenant: "allowed", connectorEffect: "denied" }, {
    action: "deny",
    code: "effect_not_allowed",
  }],
  [{ connectorTenant: "allowed", connectorEffect: "allowed" }, { action: "allow" }],
  [{ denied: true }, { action: "deny", code: "tool_denied" }],
  [{ denied: true, hasAllowList: true, allowed: true }, { action: "deny", code: "tool_denied" }],
  [{ denied: true, requiresApproval: true, token: "valid" }, {
    action: "deny",
    code: "tool_denied",
  }],
  [{ connectorEffect: "denied", denied: true }, { action: "deny", code: "effect_not_allowed" }],
  [{ hasAllowList: true, allowed: false }, { action: "deny", code: "not_allowed" }],
  [{ hasAllowList: true, allowed: true }, { action: "allow" }],
  [{ hasAllowList: true, allowed: false, requiresApproval: true }, {
    action: "deny",
    code: "not_allowed",
  }],
  [{ invalidArguments: true }, { action: "deny", code: "invalid_arguments" }],
  [{ invalidArguments: true, requiresApproval: true }, {
    action: "deny",
    code: "invalid_arguments",
  }],
  [{ hasAllowList: true, allowed: false, invalidArguments: true }, {
    action: "deny",
    code: "not_allowed",
  }],
  [{ rateLimited: true }, { action: "deny", code: "rate_limited" }],
  [{ rateLimited: true, invalidArguments: true }, { action: "deny", code: "rate_limited" }],
  [{ requiresApproval: true }, { action: "approval_required" }],
  [{ requiresApproval: true, hasAllowList: true, allowed: true }, { action: "approval_required" }],
  [{ requiresApproval: true, token: "valid" }, { action: "allow" }],
  [{ requiresApproval: true, token: "invalid" }, { action: "deny", code: "token" }],
  [{ requiresApproval: false, token: "invalid" }, { action: "allow" }],
  [{ requiresApproval: true, rateLimited: true, token: "valid" }, {
    action: "deny",
    code: "rate_limited",
  }],
];

Deno.test("precedence follows its truth table: deny > require > allow > default", () => {
  for (const [facts, expected] of TABLE) {
    assert.deepEqual(precedence({ ...base, ...facts }), expected, JSON.stringify(facts));
  }
});
