import assert from "node:assert/strict";
import { GatewayError } from "../support/errors.ts";
import { SessionAdmission, sessionLimitResponse } from "./session_admission.ts";

const refusedFor = (limit: string) => (error: unknown) =>
  error instanceof GatewayError && error.code === "session_limit" && error.data.limit === limit;

Deno.test("Sessions past the total limit are refused with session_limit naming MCP_MAX_SESSIONS", () => {
  const admission = new SessionAdmission({ maxSessions: 2, maxSessionsPerTenant: 10 });
  admission.admit("a");
  admission.admit("b");
  assert.throws(() => admission.admit("c"), refusedFor("MCP_MAX_SESSIONS"));
  assert.equal(admission.open, 2);
});

Deno.test("A tenant past its limit is refused while other tenants are admitted", () => {
  const admission = new SessionAdmission({ maxSessions: 10, maxSessionsPerTenant: 1 });
  admission.admit("a");
  assert.throws(() => admission.admit("a"), refusedFor("MCP_MAX_SESSIONS_PER_TENANT"));
  admission.admit("b");
});

Deno.test("Releasing a session frees its place once, however often it is called", () => {
  const admission = new SessionAdmission({ maxSessions: 1, maxSessionsPerTenant: 1 });
  const release = admission.admit("a");
  release();
  release();
  assert.equal(admission.open, 0);
  admission.admit("a");
  assert.throws(() => admission.admit("a"));
});

Deno.test("A session_limit refusal answers HTTP 503 with JSON-RPC error -32000 and Retry-After", async () => {
  const admission = new SessionAdmission({ maxSessions: 0, maxSessionsPerTenant: 1 });
  let error: unknown;
  try {
    admission.admit("a");
  } catch (e) {
    error = e;
  }
  const response = sessionLimitResponse(error as GatewayError);
  assert.equal(response.status, 503);
  assert.equal(response.headers.get("retry-after"), "5");
  const body = await response.json();
  assert.equal(body.error.code, -32000);
  assert.equal(body.error.data.code, "session_limit");
  assert.equal(body.id, null);
});
