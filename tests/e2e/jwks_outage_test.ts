/**
 * The gateway's key set under a provider outage, against a real key-set server on 127.0.0.1:
 * tokens with made-up key ids must not turn a provider's rate limit into a stream of requests.
 */
import assert from "node:assert/strict";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import type { Clock } from "../../core/support/clock.ts";
import { systemClock } from "../../core/support/clock.ts";
import { initializeRequest, mcpHeaders, startGateway } from "../support/gateway.ts";

Deno.test("a rate-limited key set is fetched once per cooldown, however many junk key ids arrive, and its keys are used once it recovers", async () => {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "real", alg: "ES256" };
  const provider = { fetches: 0, limited: true };
  const jwks = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    provider.fetches++;
    return provider.limited
      ? new Response("slow down", { status: 429 })
      : Response.json({ keys: [jwk] });
  });
  let offset = 0;
  const clock: Clock = { now: () => Date.now() + offset, setTimeout: systemClock.setTimeout };
  const gateway = await startGateway({
    MCP_AUTH_JWKS_URL: `http://127.0.0.1:${jwks.addr.port}/jwks`,
    MCP_AUTH_JWT_AUDIENCE: "agent33",
  }, { clock });
  const sign = (kid: string) =>
    new SignJWT({ tenant: "acme", scope: "mcp", sub: "svc" })
      .setProtectedHeader({ alg: "ES256", kid })
      .setAudience("agent33")
      .setExpirationTime(Math.floor(clock.now() / 1000) + 300)
      .sign(privateKey);
  const initialize = async (token: string) => {
    const response = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers: mcpHeaders(token),
      body: JSON.stringify(initializeRequest("2025-11-25")),
    });
    await response.body?.cancel();
    return response.status;
  };
  try {
    const junk = await Promise.all(Array.from({ length: 40 }, (_, i) => sign(`junk-${i}`)));
    for (const token of junk) assert.equal(await initialize(token), 401);
    assert.equal(provider.fetches, 1, "one fetch for 40 tokens while the provider limits");

    provider.limited = false;
    assert.equal(await initialize(await sign("real")), 401, "within the cooldown: not fetched");
    assert.equal(provider.fetches, 1);
    offset = 31_000;
    assert.equal(await initialize(await sign("real")), 200, "after the cooldown the keys are read");
    assert.equal(provider.fetches, 2);
  } finally {
    await gateway.stop();
    await jwks.shutdown();
  }
});
