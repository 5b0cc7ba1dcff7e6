import assert from "node:assert/strict";
import { IDENTITY_SCOPE_MAP, mapScopes, parseScopeMap, providerScopeFor } from "./scope_map.ts";

function parsed(text: string) {
  const result = parseScopeMap(text);
  assert.ok(result.ok, result.ok ? "" : result.message);
  return result.map;
}

Deno.test("A scope map grants only the gateway scopes its listed provider scopes map to", () => {
  const map = parsed("mcp:tools=mcp,gw.admin=admin");
  assert.deepEqual(mapScopes(map, ["openid", "mcp:tools", "profile"]), ["mcp"]);
  assert.deepEqual(mapScopes(map, ["mcp", "admin"]), [], "unlisted names grant nothing");
});

Deno.test("A provider scope listed twice grants both gateway scopes", () => {
  const map = parsed("oncall=operator, oncall=approver");
  assert.deepEqual(mapScopes(map, ["oncall"]), ["operator", "approver"]);
});

Deno.test("The default scope map is the identity on the four gateway scopes", () => {
  assert.deepEqual(mapScopes(IDENTITY_SCOPE_MAP, ["admin", "mcp", "email"]), ["admin", "mcp"]);
});

Deno.test("A scope map entry must be provider=gateway with a known gateway scope", () => {
  for (
    const [text, message] of [
      ["mcp", /"mcp" is not provider_scope=gateway_scope/],
      ["=mcp", /"=mcp" is not provider_scope=gateway_scope/],
      ["a b=mcp", /is not provider_scope=gateway_scope/],
      ["tools=tool", /maps to "tool", which is not a gateway scope; use one of mcp, approver/],
      [" , ", /is empty/],
    ] as const
  ) {
    const result = parseScopeMap(text);
    assert.equal(result.ok, false, text);
    assert.match(!result.ok ? result.message : "", message);
  }
});

Deno.test("The provider scope named for a gateway scope is the first mapped to it, else admin's", () => {
  const map = parsed("gw.read=operator,gw.tools=mcp,gw.all=admin");
  assert.equal(providerScopeFor(map, "mcp"), "gw.tools");
  assert.equal(providerScopeFor(map, "approver"), "gw.all");
  assert.equal(providerScopeFor(parsed("gw.tools=mcp"), "approver"), undefined);
});
