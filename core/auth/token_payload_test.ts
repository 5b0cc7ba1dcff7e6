import assert from "node:assert/strict";
import { hasScope, type TokenPayload } from "./token_payload.ts";

const payload: TokenPayload = { tenant: "acme", scopes: ["mcp", "operator"], subject: "ci-bot" };

Deno.test("hasScope is true when the payload holds any one of the scopes", () => {
  assert.equal(hasScope(payload, "admin", "operator"), true);
});

Deno.test("hasScope is false when the payload holds none of the scopes", () => {
  assert.equal(hasScope(payload, "admin"), false);
});

Deno.test("hasScope is false when asked for no scopes", () => {
  assert.equal(hasScope(payload), false);
});
