/**
 * `GET /metrics` on a real in-process gateway with a real upstream: calls, denials and the fleet's
 * state show up in the Prometheus exposition; only admins and operators may scrape it.
 */
import assert from "node:assert/strict";
import { faultServer } from "../support/fleet.ts";
import { connectHttp, type TestGateway } from "../support/gateway.ts";
import { policyJwt, withPolicyGateway } from "../support/policy_gateway.ts";

const FLEET = `proxy_servers:${faultServer("faults")}`;

const POLICY = `
tenants:
  "*":
    deny: ["faults__crash"]
`;

const withGateway = (fn: (gateway: TestGateway) => Promise<void>) =>
  withPolicyGateway(FLEET, POLICY, fn);

const jwt = (scope: string) => policyJwt("acme", "scraper", scope);

function scrape(gateway: TestGateway, token?: string): Promise<Response> {
  return fetch(`${gateway.url}/metrics`, {
    headers: token === undefined ? {} : { Authorization: `Bearer ${token}` },
  });
}

/** The value of the one sample line that starts with `series ` (name and labels, exactly). */
function valueOf(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

Deno.test("/metrics counts an ok call, a denied call and its decision, and shows the upstream READY", async () => {
  await withGateway(async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const ok = await client.callTool({ name: "faults__ok", arguments: {} });
      assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
      await assert.rejects(client.callTool({ name: "faults__crash", arguments: {} }));

      const response = await scrape(gateway, gateway.token);
      assert.equal(response.status, 200);
      assert.equal(
        response.headers.get("Content-Type"),
        "text/plain; version=0.0.4; charset=utf-8",
      );
      const text = await response.text();
      const series = (s: string) => valueOf(text, s);
      assert.equal(
        series('agent33_tool_calls_total{server="faults",tool="faults__ok",outcome="ok"}'),
        1,
      );
      assert.equal(
        series('agent33_tool_calls_total{server="faults",tool="faults__crash",outcome="denied"}'),
        1,
      );
      assert.equal(
        series('agent33_tool_call_duration_seconds_count{server="faults",outcome="ok"}'),
        1,
      );
      assert.equal(
        series('agent33_tool_call_duration_seconds_bucket{server="faults",outcome="ok",le="+Inf"}'),
        1,
      );
      assert.equal(series('agent33_governance_decisions_total{verdict="allow",code=""}'), 1);
      assert.equal(
        series('agent33_governance_decisions_total{verdict="deny",code="tool_denied"}'),
        1,
      );
      assert.equal(series('agent33_upstream_state{server="faults",state="READY"}'), 1);
      assert.equal(series('agent33_upstream_state{server="faults",state="FAILED"}'), 0);
      assert.equal(series('agent33_upstream_breaker_state{server="faults",state="CLOSED"}'), 1);
      assert.equal(series('agent33_upstream_tools{server="faults"}'), 16);
      assert.equal(series('agent33_sessions{transport="streamable-http"}'), 1);
      assert.equal(series("agent33_approvals_pending"), 0);
      assert.ok(series("agent33_process_resident_memory_bytes")! > 0);
      assert.ok(series("agent33_uptime_seconds")! > 0);
      // The in-process bus has no NATS counters.
      assert.doesNotMatch(text, /agent33_nats_/);
    } finally {
      await client.close();
    }
  });
});

Deno.test("/metrics needs credentials (401) and scope admin, or operator of every tenant (403)", async () => {
  await withGateway(async (gateway) => {
    const anonymous = await scrape(gateway);
    assert.equal(anonymous.status, 401);
    await anonymous.body?.cancel();

    const mcpOnly = await scrape(gateway, await jwt("mcp"));
    assert.equal(mcpOnly.status, 403);
    await mcpOnly.body?.cancel();

    const oneTenant = await scrape(gateway, await jwt("operator"));
    assert.equal(oneTenant.status, 403, "its labels count every tenant's calls");
    await oneTenant.body?.cancel();

    const operator = await scrape(gateway, await jwt("operator all_tenants"));
    assert.equal(operator.status, 200);
    assert.match(await operator.text(), /^# TYPE agent33_upstream_state gauge$/m);
  });
});
