import assert from "node:assert/strict";
import { connectorView, NO_CONNECTOR_POLICY } from "./admin_connector_routes.ts";

Deno.test("A destination without a connector policy says every tenant and every effect class pass", () => {
  const view = connectorView({ server: "web", configured: true, enabled: true, state: "READY" });
  assert.equal(view.policy, null);
  assert.equal(view.summary, NO_CONNECTOR_POLICY);
  assert.equal(view.breaker, "CLOSED");
});

Deno.test("A connector policy is shown with its tenants, effect classes and file:line", () => {
  const view = connectorView({
    server: "github",
    configured: false,
    enabled: false,
    policy: {
      server: "github",
      source: { file: "policies/default.yaml", line: 27, text: "connector github" },
      tenants: ["acme"],
      effects: new Set(["read", "write"] as const),
    },
  });
  assert.deepEqual(view.policy, {
    tenants: ["acme"],
    effects: ["read", "write"],
    source: "policies/default.yaml:27",
    rule: "connector github",
  });
  assert.equal(view.summary, "tenants acme; effect classes read, write (policies/default.yaml:27)");
  assert.equal(view.state, "STOPPED", "a destination nothing runs is STOPPED");
});
