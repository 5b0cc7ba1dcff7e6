import assert from "node:assert/strict";
import { principalOf } from "../auth/token_payload.ts";
import { methodNotAllowed, pathParams, refuseScope } from "./admin_scope.ts";

const caller = (...scopes: string[]) => ({
  tenant: "t",
  subject: "sam",
  principal: principalOf("tokens_file", "sam"),
  scopes,
});

Deno.test("Operators of every tenant may read and operate; only admins may change", () => {
  assert.equal(refuseScope(caller("operator", "all_tenants"), "read", "GET /x"), undefined);
  assert.equal(
    refuseScope(caller("operator", "all_tenants"), "operate", "POST /x/restart"),
    undefined,
  );
  assert.equal(refuseScope(caller("admin"), "read", "GET /x"), undefined);
  assert.equal(refuseScope(caller("admin"), "admin", "POST /x"), undefined);
  assert.ok(refuseScope(caller("operator", "all_tenants"), "admin", "POST /x"));
  assert.ok(refuseScope(caller("mcp"), "read", "GET /x"));
  assert.ok(
    refuseScope(caller("all_tenants"), "read", "GET /x"),
    "all_tenants alone grants nothing",
  );
});

Deno.test("An operator of one tenant may observe its events but not read or operate the whole gateway", async () => {
  assert.equal(refuseScope(caller("operator"), "observe", "/v1/events"), undefined);
  const read = refuseScope(caller("operator"), "read", "GET /metrics")!;
  assert.equal(read.status, 403);
  assert.match(read.headers.get("www-authenticate")!, /scope="operator all_tenants"/);
  assert.match(
    (await read.json()).error.message,
    /"sam" is an operator of tenant "t" only, and GET \/metrics covers every tenant; use a token that also holds scope all_tenants/,
  );
  assert.ok(refuseScope(caller("operator"), "operate", "POST /x/restart"));
});

Deno.test("A refusal is a 403 naming the caller, the missing scope and the request", async () => {
  const response = refuseScope(caller("operator"), "admin", "POST /v1/mcp/enable")!;
  assert.equal(response.status, 403);
  assert.match(response.headers.get("www-authenticate")!, /insufficient_scope/);
  const body = await response.json();
  assert.equal(body.error.code, "forbidden");
  assert.match(body.error.message, /"sam" lacks scope admin, which POST \/v1\/mcp\/enable needs/);
  const read = await refuseScope(caller("mcp"), "read", "GET /v1/mcp/status")!.json();
  assert.match(read.error.message, /lacks scope admin or operator/);
});

Deno.test("A 405 lists the methods served", async () => {
  const response = methodNotAllowed("PUT", "/v1/x", ["GET", "POST"]);
  assert.equal(response.status, 405);
  assert.equal(response.headers.get("allow"), "GET, POST");
  assert.match((await response.json()).error.message, /PUT is not supported on \/v1\/x/);
});

Deno.test("Path params decode once; traversal, encoded slashes, control characters and bad encodings are a 400", async () => {
  assert.deepEqual(pathParams("/v1/x/one/enable", "/v1/x"), ["one", "enable"]);
  assert.deepEqual(pathParams("/v1/x/caf%C3%A9", "/v1/x"), ["café"]);
  for (
    const path of [
      "/v1/x/..",
      "/v1/x/%2e%2E",
      "/v1/x/a%2Fb",
      "/v1/x/a%5Cb",
      "/v1/x/a%00",
      "/v1/x/%0d%0a",
      "/v1/x/%E0%A4%A",
      "/v1/x/%",
    ]
  ) {
    const refused = pathParams(path, "/v1/x");
    assert.ok(refused instanceof Response, path);
    assert.equal(refused.status, 400);
    assert.equal((await refused.json()).error.code, "invalid_path");
  }
});
