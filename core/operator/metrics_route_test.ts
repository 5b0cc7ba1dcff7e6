import assert from "node:assert/strict";
import { principalOf } from "../auth/token_payload.ts";
import { metricsRoute } from "./metrics_route.ts";

const request = new Request("http://127.0.0.1/metrics");
const route = metricsRoute({ render: () => "up 1\n" });

Deno.test("GET /metrics needs scope admin or operator: anyone else gets 403 with insufficient_scope", async () => {
  const response = await route.handle(request, {
    tenant: "t",
    subject: "bob",
    principal: principalOf("tokens_file", "bob"),
    scopes: ["mcp"],
  });
  assert.equal(response.status, 403);
  assert.match(response.headers.get("WWW-Authenticate") ?? "", /insufficient_scope/);
  const body = await response.json();
  assert.equal(body.error.code, "forbidden");
});

Deno.test("GET /metrics serves the exposition as text/plain version 0.0.4 to admins and operators of every tenant", async () => {
  for (const scopes of [["admin"], ["operator", "all_tenants"]]) {
    const response = await route.handle(request, {
      tenant: "t",
      subject: "p",
      principal: principalOf("tokens_file", "p"),
      scopes,
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    assert.equal(await response.text(), "up 1\n");
  }
  assert.deepEqual(route.methods, ["GET"]);
  assert.equal(route.path, "/metrics");
});

Deno.test("GET /metrics is refused to an operator of one tenant: it counts every tenant's calls", async () => {
  const response = await route.handle(request, {
    tenant: "t",
    subject: "p",
    principal: principalOf("tokens_file", "p"),
    scopes: ["operator"],
  });
  assert.equal(response.status, 403);
  assert.match((await response.json()).error.message, /scope all_tenants/);
});
