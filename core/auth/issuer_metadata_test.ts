import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { MAX_DOCUMENT_BYTES } from "./bounded_fetch.ts";
import { discoverJwksUri } from "./issuer_metadata.ts";

/** Serves `documents` (path → body, or a handler) on 127.0.0.1 and counts requests. */
function issuerServer(
  documents: (issuer: string) => Record<string, unknown | ((r: Request) => Promise<Response>)>,
) {
  const requests: string[] = [];
  let issuer = "";
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const { pathname } = new URL(request.url);
    requests.push(pathname);
    const entry = documents(issuer)[pathname];
    if (entry === undefined) return new Response("not found", { status: 404 });
    if (typeof entry === "function") return entry(request);
    return Response.json(entry);
  });
  issuer = `http://127.0.0.1:${server.addr.port}`;
  return { issuer, requests, [Symbol.asyncDispose]: () => server.shutdown() };
}

Deno.test("The JWKS URL comes from the issuer's OpenID configuration", async () => {
  await using idp = issuerServer((issuer) => ({
    "/.well-known/openid-configuration": {
      issuer,
      authorization_endpoint: `${issuer}/auth`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/keys`,
      response_types_supported: ["code"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["ES256"],
    },
  }));
  assert.equal((await discoverJwksUri(idp.issuer)).href, `${idp.issuer}/keys`);
});

Deno.test("The JWKS URL comes from RFC 8414 metadata, inserted before the issuer's path", async () => {
  await using idp = issuerServer((origin) => ({
    "/.well-known/oauth-authorization-server/tenant-a": {
      issuer: `${origin}/tenant-a`,
      authorization_endpoint: `${origin}/tenant-a/auth`,
      token_endpoint: `${origin}/tenant-a/token`,
      jwks_uri: `${origin}/tenant-a/jwks`,
      response_types_supported: ["code"],
    },
  }));
  const url = await discoverJwksUri(`${idp.issuer}/tenant-a`);
  assert.equal(url.href, `${idp.issuer}/tenant-a/jwks`);
});

Deno.test("Issuer metadata naming another issuer is refused", async () => {
  await using idp = issuerServer(() => ({
    "/.well-known/openid-configuration": {
      issuer: "https://evil.example.com",
      authorization_endpoint: "https://evil.example.com/auth",
      token_endpoint: "https://evil.example.com/token",
      jwks_uri: "https://evil.example.com/keys",
      response_types_supported: ["code"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["RS256"],
    },
  }));
  await assert.rejects(
    discoverJwksUri(idp.issuer),
    /names the issuer "https:\/\/evil\.example\.com"; set MCP_AUTH_OAUTH_ISSUER to exactly that/,
  );
});

Deno.test("A jwks_uri over plain http to another host is refused", async () => {
  await using idp = issuerServer((issuer) => ({
    "/.well-known/oauth-authorization-server": {
      issuer,
      authorization_endpoint: `${issuer}/auth`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: "http://keys.example.com/jwks",
      response_types_supported: ["code"],
    },
  }));
  await assert.rejects(discoverJwksUri(idp.issuer), /keys are fetched only over https/);
});

Deno.test("An issuer that serves no metadata is named with the fix", async () => {
  await using idp = issuerServer(() => ({}));
  await assert.rejects(
    discoverJwksUri(idp.issuer),
    /serves neither \/\.well-known\/oauth-authorization-server nor \/\.well-known\/openid-configuration/,
  );
  assert.deepEqual(idp.requests, [
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
  ]);
});

Deno.test("An oversized metadata document is refused", async () => {
  await using idp = issuerServer(() => ({
    "/.well-known/oauth-authorization-server": () =>
      Promise.resolve(new Response("x".repeat(MAX_DOCUMENT_BYTES + 1))),
  }));
  await assert.rejects(discoverJwksUri(idp.issuer), /is larger than 262144 bytes/);
});

Deno.test("An issuer that does not answer in time is given up on", async () => {
  const { promise: released, resolve: release } = Promise.withResolvers<void>();
  const { promise: arrived, resolve: arrive } = Promise.withResolvers<void>();
  await using idp = issuerServer(() => ({
    "/.well-known/oauth-authorization-server": async () => {
      arrive();
      await released;
      return new Response("late");
    },
  }));
  const clock = new ManualClock();
  try {
    const asking = discoverJwksUri(idp.issuer, { timeoutMs: 50, clock });
    await arrived;
    clock.advance(50);
    await assert.rejects(asking, /no answer within 50 ms/);
  } finally {
    release();
  }
});

Deno.test("Metadata that is not metadata is refused naming the field", async () => {
  await using idp = issuerServer(() => ({
    "/.well-known/oauth-authorization-server": { issuer: 42 },
  }));
  await assert.rejects(discoverJwksUri(idp.issuer), /not valid metadata \(issuer: /);
});
