import assert from "node:assert/strict";
import { exportJWK, generateKeyPair, type JWTPayload, jwtVerify, SignJWT } from "jose";
import { sha256, toHex } from "./digest.ts";
import {
  createJwtVerifier,
  DEFAULT_CLOCK_TOLERANCE_SECONDS,
  DISCOVERY_RETRY_MS,
  looksLikeJwt,
  VERIFIED_TTL_MS,
} from "./jwt_verifier.ts";
import { samePrincipal } from "./token_payload.ts";

const SECRET = "s3cret-s3cret-s3cret-s3cret-s3cret";
const NOW = Date.UTC(2030, 0, 1);
const nowSec = NOW / 1000;
const now = () => NOW;

function hs256(claims: JWTPayload, secret = SECRET): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt(nowSec)
    .setExpirationTime(nowSec + 300)
    .sign(new TextEncoder().encode(secret));
}

Deno.test("looksLikeJwt accepts three base64url parts and nothing else", () => {
  assert.equal(looksLikeJwt("eyJh.eyJz.c2ln"), true);
  assert.equal(looksLikeJwt("opaque-token"), false);
  assert.equal(looksLikeJwt("a.b"), false);
  assert.equal(looksLikeJwt("a.b."), false);
  assert.equal(looksLikeJwt("a+b.c.d"), false);
});

Deno.test("JWT verifier needs a secret or a JWKS URL", () => {
  assert.throws(
    () => createJwtVerifier({ issuer: "x" }),
    /needs a secret, a JWKS URL or an OAuth issuer/,
  );
});

Deno.test("JWT verifier reads tenant, space-delimited scope and sub from an HS256 token", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const verdict = await verify(
    await hs256({ tenant: "acme", scope: "mcp operator", sub: "alice" }),
  );
  assert.deepEqual(verdict, {
    ok: true,
    payload: {
      tenant: "acme",
      scopes: ["mcp", "operator"],
      subject: "alice",
      principal: '["jwt","secret","","alice"]',
      kind: "jwt",
      audience: [],
    },
  });
});

Deno.test("JWT verifier reads scopes from a `scopes` array", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const token = await hs256({ tenant: "acme", scopes: ["mcp"], sub: "svc" });
  assert.deepEqual(await verify(token), {
    ok: true,
    payload: {
      tenant: "acme",
      scopes: ["mcp"],
      subject: "svc",
      principal: '["jwt","secret","","svc"]',
      kind: "jwt",
      audience: [],
    },
  });
});

Deno.test("a JWT without sub is its own identity: two such tokens are never one caller", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const first = await hs256({ tenant: "acme", scope: "mcp", jti: "1" });
  const second = await hs256({ tenant: "acme", scope: "mcp", jti: "2" });
  const subjectOf = async (token: string) => {
    const verdict = await verify(token);
    assert.ok(verdict.ok);
    return verdict.payload.subject;
  };
  assert.equal(await subjectOf(first), `jwt:${toHex(sha256(first)).slice(0, 16)}`);
  assert.notEqual(await subjectOf(first), await subjectOf(second));
  assert.equal(await subjectOf(first), await subjectOf(first), "the same token, the same caller");
});

Deno.test("the same sub from two issuers is two callers", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const payload = async (claims: JWTPayload) => {
    const verdict = await verify(await hs256({ tenant: "acme", sub: "alice", ...claims }));
    assert.ok(verdict.ok);
    return verdict.payload;
  };
  const a = await payload({ iss: "https://idp-a.example" });
  const b = await payload({ iss: "https://idp-b.example" });
  const none = await payload({});
  assert.equal(a.subject, b.subject);
  assert.equal(samePrincipal(a, b), false, "OIDC subjects are unique per issuer only");
  assert.equal(samePrincipal(a, none), false, "an issuer and none are not one");
  assert.equal(samePrincipal(a, await payload({ iss: "https://idp-a.example" })), true);
});

Deno.test("the same iss and sub under the HS256 secret and under the JWKS are two callers", async () => {
  // Whoever holds the secret can write any iss: it vouches for no caller of the JWKS's provider.
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    () => Response.json({ keys: [jwk] }),
  );
  try {
    const verify = createJwtVerifier({
      secret: SECRET,
      jwksUrl: `http://127.0.0.1:${server.addr.port}/jwks`,
      audience: "agent33",
    }, { now });
    const claims = { tenant: "acme", sub: "alice", iss: "https://idp.example", aud: "agent33" };
    const viaKeys = await verify(
      await new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setExpirationTime(nowSec + 60).sign(privateKey),
    );
    const viaSecret = await verify(await hs256(claims));
    assert.ok(viaKeys.ok && viaSecret.ok);
    assert.equal(samePrincipal(viaKeys.payload, viaSecret.payload), false);
  } finally {
    await server.shutdown();
  }
});

Deno.test("a JWT whose iss is not a string is refused", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  assert.deepEqual(await verify(await hs256({ tenant: "acme", iss: 7 } as unknown as JWTPayload)), {
    ok: false,
    description: 'JWT "iss" claim must be a string',
  });
});

Deno.test("a JWT whose sub is not a non-empty string is refused", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  for (const sub of ["", 7, ["a"]] as unknown[]) {
    assert.deepEqual(
      await verify(await hs256({ tenant: "acme", scope: "mcp", sub } as JWTPayload)),
      {
        ok: false,
        description: 'JWT "sub" claim must be a non-empty string',
      },
    );
  }
});

Deno.test("JWT verifier reads the tenant from a configured claim", async () => {
  const verify = createJwtVerifier({ secret: SECRET, tenantClaim: "org" }, { now });
  const verdict = await verify(await hs256({ org: "acme" }));
  assert.equal(verdict.ok && verdict.payload.tenant, "acme");
});

Deno.test("JWT verifier rejects a token signed with another secret", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const verdict = await verify(await hs256({ tenant: "acme" }, "another-secret-another-secret-00"));
  assert.deepEqual(verdict, { ok: false, description: "JWT signature verification failed" });
});

Deno.test("JWT verifier rejects an expired token saying it expired", async () => {
  const past = NOW + 300_000 + DEFAULT_CLOCK_TOLERANCE_SECONDS * 1000 + 1000;
  const verify = createJwtVerifier({ secret: SECRET }, { now: () => past });
  const verdict = await verify(await hs256({ tenant: "acme" }));
  assert.equal(verdict.ok, false);
  assert.match(!verdict.ok ? verdict.description : "", /^JWT expired at 2030-01-01T00:05:00\.000Z/);
});

Deno.test("JWT verifier allows the configured clock tolerance past exp, and no more", async () => {
  const token = await hs256({ tenant: "acme" });
  const justAfter = () => NOW + 310_000;
  assert.equal((await createJwtVerifier({ secret: SECRET }, { now: justAfter })(token)).ok, true);
  const strict = createJwtVerifier({ secret: SECRET, clockToleranceSeconds: 0 }, {
    now: justAfter,
  });
  assert.equal((await strict(token)).ok, false);
});

Deno.test("JWT verifier refuses a token without exp", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const token = await new SignJWT({ tenant: "acme", sub: "alice" })
    .setProtectedHeader({ alg: "HS256" })
    .sign(new TextEncoder().encode(SECRET));
  assert.deepEqual(await verify(token), {
    ok: false,
    description: 'JWT has no "exp" claim; the gateway accepts only tokens that expire',
  });
});

Deno.test("JWT verifier reads scopes from `scp`, as a string or a list", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const fromString = await verify(await hs256({ tenant: "acme", scp: "mcp approver" }));
  assert.deepEqual(fromString.ok && fromString.payload.scopes, ["mcp", "approver"]);
  const fromList = await verify(await hs256({ tenant: "acme", scp: ["operator"], scope: "mcp" }));
  assert.deepEqual(fromList.ok && fromList.payload.scopes, ["mcp", "operator"]);
});

Deno.test("JWT verifier refuses an HS256 secret shorter than 32 bytes, naming the variable", () => {
  assert.throws(
    () => createJwtVerifier({ secret: "0123456789abcdef" }),
    /MCP_AUTH_JWT_SECRET is 16 bytes; an HS256 secret needs at least 32 bytes/,
  );
  assert.doesNotThrow(() => createJwtVerifier({ secret: "x".repeat(32) }));
});

Deno.test("JWT verifier refuses a JWKS without an audience", () => {
  assert.throws(
    () => createJwtVerifier({ jwksUrl: "https://idp.example/jwks" }),
    /MCP_AUTH_JWKS_URL is set without MCP_AUTH_JWT_AUDIENCE/,
  );
});

Deno.test("JWT verifier rejects a token from the wrong issuer", async () => {
  const verify = createJwtVerifier({ secret: SECRET, issuer: "https://idp.example" }, { now });
  const verdict = await verify(await hs256({ tenant: "acme", iss: "https://evil.example" }));
  assert.deepEqual(verdict, {
    ok: false,
    description: 'JWT rejected: unexpected "iss" claim value',
  });
});

Deno.test("JWT verifier rejects a token for the wrong audience", async () => {
  const verify = createJwtVerifier({ secret: SECRET, audience: "agent33" }, { now });
  const verdict = await verify(await hs256({ tenant: "acme", aud: "other" }));
  assert.deepEqual(verdict, {
    ok: false,
    description: 'JWT rejected: unexpected "aud" claim value',
  });
});

Deno.test("JWT verifier accepts a matching issuer and audience", async () => {
  const verify = createJwtVerifier(
    { secret: SECRET, issuer: "https://idp.example", audience: "agent33" },
    { now },
  );
  const verdict = await verify(
    await hs256({ tenant: "acme", iss: "https://idp.example", aud: "agent33" }),
  );
  assert.equal(verdict.ok, true);
});

Deno.test("JWT verifier rejects a token without the tenant claim", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const verdict = await verify(await hs256({ sub: "alice" }));
  assert.deepEqual(verdict, { ok: false, description: 'JWT has no "tenant" claim' });
});

Deno.test("JWT verifier rejects an unsigned (alg none) token", async () => {
  const verify = createJwtVerifier({ secret: SECRET }, { now });
  const b64 = (o: unknown) => btoa(JSON.stringify(o)).replace(/=+$/, "");
  const verdict = await verify(`${b64({ alg: "none" })}.${b64({ tenant: "acme" })}.`);
  assert.equal(verdict.ok, false);
});

Deno.test("JWT verifier checks ES256 tokens against a served JWKS and rejects other keys", async () => {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const other = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    () => Response.json({ keys: [jwk] }),
  );
  try {
    const verify = createJwtVerifier({
      jwksUrl: `http://127.0.0.1:${server.addr.port}/jwks`,
      audience: "agent33",
    }, { now });
    const sign = (key: CryptoKey) =>
      new SignJWT({ tenant: "acme", scope: "mcp", sub: "svc" })
        .setProtectedHeader({ alg: "ES256", kid: "k1" })
        .setAudience("agent33")
        .setExpirationTime(nowSec + 60)
        .sign(key);

    assert.deepEqual(await verify(await sign(privateKey)), {
      ok: true,
      payload: {
        tenant: "acme",
        scopes: ["mcp"],
        subject: "svc",
        principal: '["jwt","keys","","svc"]',
        kind: "jwt",
        audience: ["agent33"],
      },
    });
    assert.deepEqual(await verify(await sign(other.privateKey)), {
      ok: false,
      description: "JWT signature verification failed",
    });
  } finally {
    await server.shutdown();
  }
});

Deno.test("JWT verifier with a JWKS refuses HS256 tokens", async () => {
  const verify = createJwtVerifier({ jwksUrl: "http://127.0.0.1:9/jwks", audience: "agent33" }, {
    now,
    fetch: () => Promise.reject(new Error("must not fetch")),
  });
  const verdict = await verify(await hs256({ tenant: "acme" }));
  assert.deepEqual(verdict, { ok: false, description: "JWT algorithm is not accepted" });
});

Deno.test("JWT verifier fetches the JWKS through the injected fetch", async () => {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), alg: "ES256" };
  const fetched: string[] = [];
  const verify = createJwtVerifier({ jwksUrl: "https://idp.example/jwks", audience: "agent33" }, {
    now,
    fetch: (input) => {
      fetched.push(String(input));
      return Promise.resolve(Response.json({ keys: [jwk] }));
    },
  });
  const token = await new SignJWT({ tenant: "acme" }).setProtectedHeader({ alg: "ES256" })
    .setAudience("agent33").setExpirationTime(nowSec + 60).sign(privateKey);
  assert.equal((await verify(token)).ok, true);
  assert.deepEqual(fetched, ["https://idp.example/jwks"]);
});

Deno.test("JWT verifier reports an unreachable JWKS without throwing", async () => {
  const { privateKey } = await generateKeyPair("ES256");
  const verify = createJwtVerifier({ jwksUrl: "https://idp.example/jwks", audience: "agent33" }, {
    now,
    fetch: () => Promise.resolve(new Response("down", { status: 503 })),
  });
  const token = await new SignJWT({ tenant: "acme" }).setProtectedHeader({ alg: "ES256" })
    .setAudience("agent33").setExpirationTime(nowSec + 60).sign(privateKey);
  const verdict = await verify(token);
  assert.match(!verdict.ok ? verdict.description : "", /^JWT could not be verified: /);
});

/** A verifier on a movable clock that counts jose's signature checks. */
function counted() {
  const clock = { now: NOW };
  const counter = { verifications: 0 };
  const verify = createJwtVerifier({ secret: SECRET }, {
    now: () => clock.now,
    verify: ((...args: Parameters<typeof jwtVerify>) => {
      counter.verifications++;
      return jwtVerify(...args);
    }) as typeof jwtVerify,
  });
  return { verify, clock, counter };
}

Deno.test("A verified JWT is taken on trust for 30 s, then its signature is checked again", async () => {
  const { verify, clock, counter } = counted();
  const token = await hs256({ tenant: "acme", scope: "mcp" });
  for (let i = 0; i < 5; i++) assert.equal((await verify(token)).ok, true);
  assert.equal(counter.verifications, 1);
  clock.now += VERIFIED_TTL_MS;
  assert.equal((await verify(token)).ok, true);
  assert.equal(counter.verifications, 2);
});

Deno.test("A remembered JWT is refused once it expires, even within the 30 s", async () => {
  const { verify, clock } = counted();
  const token = await new SignJWT({ tenant: "acme" })
    .setProtectedHeader({ alg: "HS256" })
    .setExpirationTime(nowSec + 10)
    .sign(new TextEncoder().encode(SECRET));
  assert.equal((await verify(token)).ok, true);
  clock.now += 10_000 + DEFAULT_CLOCK_TOLERANCE_SECONDS * 1000;
  const verdict = await verify(token);
  assert.equal(verdict.ok, false);
  assert.match(!verdict.ok ? verdict.description : "", /^JWT expired/);
});

Deno.test("A refused JWT is checked again every time, and each caller gets its own payload copy", async () => {
  const { verify, counter } = counted();
  const bad = await hs256({ tenant: "acme" }, "another-secret-another-secret-00");
  await verify(bad);
  await verify(bad);
  assert.equal(counter.verifications, 2);
  const token = await hs256({ tenant: "acme", scope: "mcp" });
  const first = await verify(token);
  if (first.ok) first.payload.scopes.push("admin");
  const second = await verify(token);
  assert.deepEqual(second.ok && second.payload.scopes, ["mcp"]);
});

Deno.test("JWT verifier with an OAuth issuer retries unreadable metadata only after a pause", async () => {
  let requests = 0;
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    requests++;
    return new Response("down for maintenance", { status: 404 });
  });
  const issuer = `http://127.0.0.1:${server.addr.port}`;
  let clock = NOW;
  const heard: unknown[] = [];
  const verify = createJwtVerifier(
    { discoverKeys: true, issuer, audience: "https://gw.example.com/mcp" },
    { now: () => clock, onDiscovery: (outcome) => heard.push(outcome) },
  );
  const { privateKey } = await generateKeyPair("ES256");
  const token = await new SignJWT({ tenant: "acme" })
    .setProtectedHeader({ alg: "ES256", kid: "k1" })
    .setIssuer(issuer)
    .setAudience("https://gw.example.com/mcp")
    .setExpirationTime(nowSec + 300)
    .sign(privateKey);
  const first = await verify(token);
  assert.equal(first.ok, false);
  assert.match(!first.ok ? first.description : "", /serves neither/);
  const tried = requests;
  assert.ok(tried > 0);
  await verify(token);
  assert.equal(requests, tried, "a second token within the pause asks nobody");
  clock += DISCOVERY_RETRY_MS;
  await verify(token);
  assert.equal(requests, 2 * tried, "after the pause the metadata is asked for again");
  assert.equal(heard.length, 2, "each attempt is reported, not each token");
  assert.match(String((heard[0] as { error: string }).error), /serves neither/);
});

Deno.test("JWT verifier needs the issuer and the audience to discover keys", () => {
  assert.throws(
    () => createJwtVerifier({ discoverKeys: true, issuer: "https://idp.example.com" }),
    /needs the issuer and the resource URL/,
  );
});

Deno.test("JWT verifier reads scopes from the configured claims and maps them", async () => {
  const verify = createJwtVerifier({
    secret: SECRET,
    scopeClaims: ["roles", "permissions"],
    scopeMap: new Map([["Gateway.Call", ["mcp"]], ["gateway:admin", ["admin"]]]),
  }, { now });
  const verdict = await verify(
    await hs256({
      tenant: "acme",
      sub: "svc",
      roles: ["Gateway.Call"],
      permissions: ["gateway:admin"],
      scope: "operator", // not a configured claim: ignored
    }),
  );
  assert.deepEqual(verdict, {
    ok: true,
    payload: {
      tenant: "acme",
      scopes: ["mcp", "admin"],
      subject: "svc",
      principal: '["jwt","secret","","svc"]',
      kind: "jwt",
      audience: [],
    },
  });
});

Deno.test("JWT verifier accepts any one of several configured audiences", async () => {
  const verify = createJwtVerifier({ secret: SECRET, audience: ["a", "b"] }, { now });
  assert.equal((await verify(await hs256({ tenant: "t", aud: "b" }))).ok, true);
  assert.equal((await verify(await hs256({ tenant: "t", aud: "c" }))).ok, false);
});
