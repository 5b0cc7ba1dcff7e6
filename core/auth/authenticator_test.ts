import assert from "node:assert/strict";
import { SignJWT } from "jose";
import {
  type AuthResult,
  createAuthenticator,
  unauthorizedResponse,
  wwwAuthenticate,
} from "./authenticator.ts";
import { sha256, toHex } from "./digest.ts";
import { sameCaller, samePrincipal } from "./token_payload.ts";

const SECRET = "jwt-secret-jwt-secret-jwt-secret!";
const NOW = Date.UTC(2030, 0, 1);

function bearer(authorization?: string): Request {
  const headers = authorization === undefined ? undefined : { authorization };
  return new Request("http://127.0.0.1:8787/mcp", { method: "POST", headers });
}

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "auth_test_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function jwt(claims: Record<string, unknown>, expSeconds = NOW / 1000 + 60): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setExpirationTime(expSeconds)
    .sign(new TextEncoder().encode(SECRET));
}

Deno.test("Authenticator is not configured when no credential source is set", async () => {
  const auth = await createAuthenticator({ staticToken: "", jwt: { secret: undefined } });
  assert.equal(auth.configured, false);
});

Deno.test("Authenticator refuses a jwt block with claims but no key source", async () => {
  await assert.rejects(
    createAuthenticator({ jwt: { issuer: "https://idp.example" } }),
    /needs a secret, a JWKS URL or an OAuth issuer/,
  );
});

Deno.test("Authenticator resolves the static token to a client (mcp) payload for the static tenant", async () => {
  const auth = await createAuthenticator({ staticToken: "tok-123", staticTenant: "acme" });
  assert.equal(auth.configured, true);
  assert.deepEqual(await auth.authenticate(bearer("Bearer tok-123")), {
    ok: true,
    payload: {
      tenant: "acme",
      scopes: ["mcp"],
      subject: "static-token",
      principal: '["static","static-token"]',
      kind: "static",
    },
  });
});

Deno.test("Authenticator gives the static token the configured scopes", async () => {
  const auth = await createAuthenticator({
    staticToken: "tok-123",
    staticScopes: ["mcp", "operator"],
  });
  const result = await auth.authenticate(bearer("Bearer tok-123"));
  assert.deepEqual(result.ok && result.payload.scopes, ["mcp", "operator"]);
});

Deno.test("Authenticator resolves the admin token to scope admin under its own identity", async () => {
  const auth = await createAuthenticator({ staticToken: "client", adminToken: "operator" });
  assert.deepEqual(await auth.authenticate(bearer("Bearer operator")), {
    ok: true,
    payload: {
      tenant: "default",
      scopes: ["admin"],
      subject: "admin-token",
      principal: '["static","admin-token"]',
      kind: "static",
    },
  });
  const client = await auth.authenticate(bearer("Bearer client"));
  assert.deepEqual(client.ok && client.payload, {
    tenant: "default",
    scopes: ["mcp"],
    subject: "static-token",
    principal: '["static","static-token"]',
    kind: "static",
  });
});

Deno.test("Authenticator puts the static token in the default tenant when none is set", async () => {
  const auth = await createAuthenticator({ staticToken: "tok-123" });
  const result = await auth.authenticate(bearer("bearer   tok-123"));
  assert.equal(result.ok && result.payload.tenant, "default");
});

Deno.test("Authenticator rejects a wrong token with 401 invalid_token unknown token", async () => {
  const auth = await createAuthenticator({ staticToken: "tok-123" });
  assert.deepEqual(await auth.authenticate(bearer("Bearer tok-124")), {
    ok: false,
    status: 401,
    error: "invalid_token",
    description: "unknown token",
  });
});

Deno.test("Authenticator rejects a missing Authorization header with 401 invalid_request", async () => {
  const auth = await createAuthenticator({ staticToken: "tok-123" });
  assert.deepEqual(await auth.authenticate(bearer()), {
    ok: false,
    status: 401,
    error: "invalid_request",
    description: "missing bearer token",
    noCredentials: true,
  });
});

Deno.test("Authenticator rejects a non-Bearer scheme with 401 invalid_request", async () => {
  const auth = await createAuthenticator({ staticToken: "tok-123" });
  const result = await auth.authenticate(bearer(`Basic ${btoa("u:tok-123")}`));
  assert.equal(!result.ok && result.error, "invalid_request");
  assert.equal(!result.ok && result.status, 401);
});

Deno.test("Authenticator rejects an empty bearer token with 401 invalid_request", async () => {
  const auth = await createAuthenticator({ staticToken: "tok-123" });
  const result = await auth.authenticate(bearer("Bearer "));
  assert.deepEqual(result, {
    ok: false,
    status: 401,
    error: "invalid_request",
    description: "empty bearer token",
  });
});

Deno.test("Authenticator resolves a tokens-file hit to its tenant, scopes and subject", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/tokens.yaml`;
    const hash = toHex(await sha256("ci-token"));
    await Deno.writeTextFile(
      path,
      `tokens:\n  - sha256: ${hash}\n    tenant: acme\n    scopes: [mcp, operator]\n    subject: ci-bot\n`,
    );
    const auth = await createAuthenticator({ tokensFile: path });
    assert.deepEqual(await auth.authenticate(bearer("Bearer ci-token")), {
      ok: true,
      payload: {
        tenant: "acme",
        scopes: ["mcp", "operator"],
        subject: "ci-bot",
        principal: '["tokens_file","ci-bot"]',
        kind: "tokens_file",
      },
    });
    const miss = await auth.authenticate(bearer("Bearer other-token"));
    assert.equal(!miss.ok && miss.description, "unknown token");
  });
});

Deno.test("Authenticator hands out copies so callers cannot alter stored scopes", async () => {
  const hash = toHex(await sha256("ci-token"));
  const auth = await createAuthenticator({
    tokensFile: "t.yaml",
    readTextFile: () =>
      Promise.resolve(`tokens:\n  - {sha256: ${hash}, tenant: a, scopes: [mcp]}\n`),
  });
  const first = await auth.authenticate(bearer("Bearer ci-token"));
  if (first.ok) first.payload.scopes.push("admin");
  const second = await auth.authenticate(bearer("Bearer ci-token"));
  assert.deepEqual(second.ok && second.payload.scopes, ["mcp"]);
});

Deno.test("Authenticator creation fails on a bad tokens file naming the file and line", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/tokens.yaml`;
    await Deno.writeTextFile(
      path,
      [
        "tokens:",
        `  - sha256: ${"a".repeat(64)}`,
        "    tenant: acme",
        "    scopes: [mcp]",
        "",
        "  - tenant: beta",
        "    sha256: 1234",
        "",
      ].join("\n"),
    );
    await assert.rejects(createAuthenticator({ tokensFile: path }), {
      message: `Cannot load tokens file "${path}": tokens[1].sha256 (line 7) must be 64 hex ` +
        "characters — hash the token with: printf %s TOKEN | sha256sum",
    });
  });
});

Deno.test("Authenticator creation fails on a duplicate hash in the tokens file", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/tokens.json`;
    const sha256 = "c".repeat(64);
    await Deno.writeTextFile(
      path,
      JSON.stringify({ tokens: [{ sha256, tenant: "a" }, { sha256, tenant: "b" }] }, null, 2),
    );
    await assert.rejects(createAuthenticator({ tokensFile: path }), {
      message: new RegExp(
        `^Cannot load tokens file "${path}": tokens\\[1\\]\\.sha256 \\(line \\d+\\) repeats`,
      ),
    });
  });
});

Deno.test("Authenticator prefers the static token over the tokens file", async () => {
  const hash = toHex(await sha256("shared"));
  const auth = await createAuthenticator({
    staticToken: "shared",
    tokensFile: "t.yaml",
    readTextFile: () => Promise.resolve(`tokens:\n  - {sha256: ${hash}, tenant: file}\n`),
  });
  const result = await auth.authenticate(bearer("Bearer shared"));
  assert.equal(result.ok && result.payload.subject, "static-token");
});

Deno.test("Authenticator resolves a valid JWT after the other sources miss", async () => {
  const auth = await createAuthenticator({
    staticToken: "tok-123",
    jwt: { secret: SECRET },
    now: () => NOW,
  });
  assert.deepEqual(
    await auth.authenticate(
      bearer(`Bearer ${await jwt({ tenant: "acme", scope: "mcp", sub: "svc" })}`),
    ),
    {
      ok: true,
      payload: {
        tenant: "acme",
        scopes: ["mcp"],
        subject: "svc",
        principal: '["jwt","secret","","svc"]',
        kind: "jwt",
        audience: [],
      },
    },
  );
});

Deno.test("a JWT whose sub names a static token, the admin token or a tokens-file subject is another caller", async () => {
  const hash = toHex(await sha256("file-token"));
  const auth = await createAuthenticator({
    staticToken: "client",
    adminToken: "operator",
    tokensFile: "t.yaml",
    readTextFile: () =>
      Promise.resolve(
        `tokens:\n  - {sha256: ${hash}, tenant: default, subject: ci-bot}\n` +
          `  - {sha256: ${"b".repeat(64)}, tenant: default}\n`,
      ),
    jwt: { secret: SECRET },
    now: () => NOW,
  });
  const payload = async (token: string) => {
    const result = await auth.authenticate(bearer(`Bearer ${token}`));
    assert.ok(result.ok, `${token} must authenticate`);
    return result.payload;
  };
  const named = [
    await payload("client"),
    await payload("operator"),
    await payload("file-token"),
    {
      tenant: "default",
      subject: `token:${"b".repeat(12)}`,
      principal: '["tokens_file","token:bbbbbbbbbbbb"]',
    },
  ];
  for (const other of named) {
    const impostor = await payload(await jwt({ tenant: "default", sub: other.subject }));
    assert.equal(impostor.subject, other.subject, "the same name, shown alike");
    assert.equal(samePrincipal(impostor, other), false, `a JWT sub "${other.subject}"`);
    assert.equal(sameCaller(impostor, other), false, `a JWT sub "${other.subject}"`);
  }
  // Each static token is its own identity; the same token is the same caller each time.
  assert.equal(samePrincipal(named[0]!, named[1]!), false);
  assert.equal(sameCaller(named[0]!, await payload("client")), true);
});

Deno.test("Authenticator rejects an expired JWT with 401 invalid_token", async () => {
  const auth = await createAuthenticator({ jwt: { secret: SECRET }, now: () => NOW });
  const result = await auth.authenticate(
    bearer(`Bearer ${await jwt({ tenant: "a" }, NOW / 1000 - 60)}`),
  );
  assert.equal(!result.ok && result.status, 401);
  assert.equal(!result.ok && result.error, "invalid_token");
  assert.match(!result.ok ? result.description : "", /expired/);
});

Deno.test("Authenticator rejects a forged JWT with 401 invalid_token", async () => {
  const auth = await createAuthenticator({ jwt: { secret: SECRET }, now: () => NOW });
  const token = await jwt({ tenant: "a" });
  const forged = token.slice(0, token.lastIndexOf(".") + 1) + "A".repeat(43);
  const result = await auth.authenticate(bearer(`Bearer ${forged}`));
  assert.deepEqual(result, {
    ok: false,
    status: 401,
    error: "invalid_token",
    description: "JWT signature verification failed",
  });
});

Deno.test("Authenticator rejects a JWT missing the tenant claim with 401 invalid_token", async () => {
  const auth = await createAuthenticator({ jwt: { secret: SECRET }, now: () => NOW });
  const result = await auth.authenticate(bearer(`Bearer ${await jwt({ sub: "x" })}`));
  assert.equal(!result.ok && result.description, 'JWT has no "tenant" claim');
});

Deno.test("Authenticator does not treat an opaque token as a JWT", async () => {
  const auth = await createAuthenticator({ jwt: { secret: SECRET }, now: () => NOW });
  const result = await auth.authenticate(bearer("Bearer not-a-jwt"));
  assert.equal(!result.ok && result.description, "unknown token");
});

const failure: Extract<AuthResult, { ok: false }> = {
  ok: false,
  status: 401,
  error: "invalid_token",
  description: 'JWT has no "tenant" claim',
};

Deno.test("wwwAuthenticate renders an RFC 6750 challenge with quotes escaped", () => {
  assert.equal(
    wwwAuthenticate(failure),
    'Bearer realm="agent33", error="invalid_token", error_description="JWT has no \\"tenant\\" claim"',
  );
});

Deno.test("wwwAuthenticate replaces characters a header cannot carry", () => {
  const header = wwwAuthenticate({ ...failure, description: "bad\r\ntoken — here" });
  assert.equal(header.endsWith('error_description="bad??token ? here"'), true);
});

Deno.test("unauthorizedResponse is a 401 JSON body with a challenge telling what to send", async () => {
  const response = unauthorizedResponse({
    ok: false,
    status: 401,
    error: "invalid_request",
    description: "missing bearer token",
    noCredentials: true,
  });
  assert.equal(response.status, 401);
  assert.equal(response.headers.get("content-type"), "application/json");
  // RFC 6750 §3.1: a request without credentials gets no error code.
  assert.equal(response.headers.get("www-authenticate"), 'Bearer realm="agent33"');
  assert.deepEqual(await response.json(), {
    error: {
      code: "unauthorized",
      message: 'Missing bearer token: send "Authorization: Bearer <token>"; the tokens are ' +
        "printed at start-up or set with MCP_SERVER_AUTH_TOKEN (clients) and MCP_ADMIN_TOKEN " +
        "(operators)",
    },
  });
});

Deno.test("unauthorizedResponse is a 403 forbidden for insufficient_scope", async () => {
  const response = unauthorizedResponse({
    ok: false,
    status: 403,
    error: "insufficient_scope",
    description: 'requires scope "operator"',
  });
  assert.equal(response.status, 403);
  const body = await response.json();
  assert.equal(body.error.code, "forbidden");
  assert.match(body.error.message, /required scope/);
});
