import assert from "node:assert/strict";
import {
  hasScope,
  principalOf,
  sameCaller,
  samePrincipal,
  type TokenPayload,
} from "./token_payload.ts";

const payload: TokenPayload = {
  tenant: "acme",
  scopes: ["mcp", "operator"],
  subject: "ci-bot",
  principal: principalOf("tokens_file", "ci-bot"),
};

Deno.test("hasScope is true when the payload holds any one of the scopes", () => {
  assert.equal(hasScope(payload, "admin", "operator"), true);
});

Deno.test("hasScope is false when the payload holds none of the scopes", () => {
  assert.equal(hasScope(payload, "admin"), false);
});

Deno.test("hasScope is false when asked for no scopes", () => {
  assert.equal(hasScope(payload), false);
});

Deno.test("a JWT whose sub names a static token is another caller", () => {
  const staticToken = { tenant: "default", principal: principalOf("static", "static-token") };
  const jwt = {
    tenant: "default",
    principal: principalOf("jwt", "keys", "https://idp", "static-token"),
  };
  assert.equal(samePrincipal(staticToken, jwt), false);
  assert.equal(sameCaller(staticToken, jwt), false);
  const file = { tenant: "default", principal: principalOf("tokens_file", "static-token") };
  assert.equal(samePrincipal(staticToken, file), false, "nor is a tokens-file entry of that name");
});

Deno.test("the same caller is the same principal in the same tenant; the same person needs only the principal", () => {
  const alice = principalOf("tokens_file", "alice");
  assert.equal(
    sameCaller({ tenant: "acme", principal: alice }, { tenant: "acme", principal: alice }),
    true,
  );
  assert.equal(
    sameCaller({ tenant: "acme", principal: alice }, { tenant: "ops", principal: alice }),
    false,
  );
  assert.equal(samePrincipal({ principal: alice }, { principal: alice }), true);
});

Deno.test("a record without a principal matches no caller, not even another such record", () => {
  const alice = { tenant: "acme", principal: principalOf("tokens_file", "alice") };
  const old = { tenant: "acme" }; // written by a replica from before principals
  assert.equal(sameCaller(old, alice), false);
  assert.equal(sameCaller(alice, old), false);
  assert.equal(sameCaller(old, old), false);
  assert.equal(samePrincipal({ principal: "" }, { principal: "" }), false);
});

Deno.test("no choice of names makes the parts of one principal read as another's", () => {
  assert.notEqual(
    principalOf("jwt", "keys", 'a","b', "c"),
    principalOf("jwt", "keys", "a", 'b","c'),
  );
  assert.notEqual(principalOf("jwt", "keys", "a:b", "c"), principalOf("jwt", "keys", "a", "b:c"));
  assert.notEqual(principalOf("static", "x"), principalOf("tokens_file", "x"));
});
