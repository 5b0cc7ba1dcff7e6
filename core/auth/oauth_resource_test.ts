import assert from "node:assert/strict";
import { ProtectedResource } from "./oauth_resource.ts";
import { IDENTITY_SCOPE_MAP, parseScopeMap } from "./scope_map.ts";

const resource = new ProtectedResource({
  resource: "https://gw.example.com/mcp",
  issuer: "https://idp.example.com/realms/agents",
  scopeMap: IDENTITY_SCOPE_MAP,
});

function refusal(status: number, challenge: string): Response {
  return Response.json({ error: { code: "x", message: "y" } }, {
    status,
    headers: { "www-authenticate": challenge },
  });
}

Deno.test("Protected resource metadata sits at the well-known path followed by the resource's path", () => {
  assert.equal(
    resource.metadataUrl,
    "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
  );
  assert.deepEqual(resource.paths, [
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource",
  ]);
  const root = new ProtectedResource({
    resource: "https://gw.example.com/",
    issuer: "https://idp.example.com",
    scopeMap: IDENTITY_SCOPE_MAP,
  });
  assert.deepEqual(root.paths, ["/.well-known/oauth-protected-resource"]);
});

Deno.test("Protected resource metadata names the resource, its issuer, scopes and header bearer tokens", async () => {
  const response = resource.respond(
    new Request("https://gw.example.com/.well-known/oauth-protected-resource/mcp"),
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("access-control-allow-origin"), "*");
  assert.deepEqual(await response.json(), {
    resource: "https://gw.example.com/mcp",
    authorization_servers: ["https://idp.example.com/realms/agents"],
    scopes_supported: ["mcp"],
    bearer_methods_supported: ["header"],
    resource_name: "AGENT-33 MCP gateway",
  });
});

Deno.test("Protected resource metadata answers a CORS preflight and refuses other methods", async () => {
  const url = "https://gw.example.com/.well-known/oauth-protected-resource";
  const preflight = resource.respond(new Request(url, { method: "OPTIONS" }));
  assert.equal(preflight.status, 204);
  assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /mcp-protocol-version/);
  const post = resource.respond(new Request(url, { method: "POST", body: "{}" }));
  assert.equal(post.status, 405);
  assert.equal((await post.json()).error.code, "method_not_allowed");
});

Deno.test("A 401 challenge gains resource_metadata pointing to the metadata", () => {
  const answered = resource.challenge(refusal(401, 'Bearer realm="agent33"'), "/v1/status");
  assert.equal(
    answered.headers.get("www-authenticate"),
    'Bearer realm="agent33", resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"',
  );
  assert.equal(answered.status, 401);
});

Deno.test("A 401 for the MCP endpoint asks for the scope that grants mcp, not every scope", () => {
  const mapped = new ProtectedResource({
    resource: "https://gw.example.com/mcp",
    issuer: "https://idp.example.com",
    scopeMap: (parseScopeMap("gw.admin=admin,mcp:tools=mcp") as { ok: true; map: never }).map,
  });
  for (const path of ["/mcp", "/mcp/github"]) {
    const answered = mapped.challenge(refusal(401, 'Bearer realm="agent33"'), path);
    assert.match(
      answered.headers.get("www-authenticate") ?? "",
      /, scope="mcp:tools", resource_metadata=/,
    );
  }
  const elsewhere = mapped.challenge(refusal(401, 'Bearer realm="agent33"'), "/mcpx");
  assert.doesNotMatch(elsewhere.headers.get("www-authenticate") ?? "", /scope=/);
});

Deno.test("A 403 insufficient_scope challenge names the provider scope that grants the gateway's", () => {
  const mapped = new ProtectedResource({
    resource: "https://gw.example.com/mcp",
    issuer: "https://idp.example.com",
    scopeMap: (parseScopeMap("mcp:tools=mcp,gw.admin=admin") as { ok: true; map: never }).map,
  });
  const answered = mapped.challenge(
    refusal(403, 'Bearer realm="agent33", error="insufficient_scope", scope="mcp"'),
    "/mcp",
  );
  assert.match(
    answered.headers.get("www-authenticate") ?? "",
    /scope="mcp:tools", resource_metadata=/,
  );
});

Deno.test("Responses other than a Bearer 401/403 pass through unchanged", () => {
  const ok = new Response("fine");
  assert.equal(resource.challenge(ok, "/mcp"), ok);
  const plain = Response.json({}, { status: 403 });
  assert.equal(resource.challenge(plain, "/mcp"), plain);
  const basic = refusal(401, 'Basic realm="x"');
  assert.equal(resource.challenge(basic, "/mcp"), basic);
});
