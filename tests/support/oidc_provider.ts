/**
 * Test support: a real OpenID provider (`oidc-provider`, the certified Node implementation) on
 * 127.0.0.1, issuing JWT access tokens by client credentials for a resource indicator (RFC 8707),
 * with its signing keys rotatable while it runs.
 * @module
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import Provider from "oidc-provider";

/** A client registered with the provider: its credentials and what it may ask for. */
export interface TestClient {
  id: string;
  secret: string;
  /** Space-separated scopes the client may be granted. */
  scope: string;
  /** The `tenant` claim its tokens carry (none when unset). */
  tenant?: string;
}

/** A running provider. */
export interface TestProvider {
  /** The issuer URL, exactly as tokens carry it in `iss`. */
  issuer: string;
  /** The `kid` of the key tokens are signed with now. */
  readonly kid: string;
  /** Requests a client-credentials access token for `resource` (RFC 8707) with `scope`. */
  token(client: TestClient, options: { resource: string; scope: string }): Promise<string>;
  /** Replaces the signing key with a new one (the old one leaves the JWKS); returns its kid. */
  rotateKeys(): Promise<string>;
  stop(): Promise<void>;
}

/** Access-token lifetime, in seconds. */
export const ACCESS_TOKEN_TTL = 300;

async function signingKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: "ES256", use: "sig" };
}

/** Starts a provider on a free port of 127.0.0.1 knowing `clients`. */
export async function startProvider(clients: TestClient[]): Promise<TestProvider> {
  // The provider instance serving requests; replaced (same issuer, new keys) on rotation.
  let current: { callback: ReturnType<Provider["callback"]> } | undefined;
  const server: Server = createServer((req, res) => {
    if (current) current.callback(req, res);
    else res.writeHead(503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;
  const tenants = new Map(clients.map((c) => [c.id, c.tenant]));

  let generation = 0;
  const build = async (): Promise<string> => {
    const kid = `key-${++generation}`;
    const provider = new Provider(issuer, {
      jwks: { keys: [await signingKey(kid)] },
      clients: clients.map((c) => ({
        client_id: c.id,
        client_secret: c.secret,
        grant_types: ["client_credentials"],
        redirect_uris: [],
        response_types: [],
        scope: c.scope,
        id_token_signed_response_alg: "ES256",
      })),
      scopes: ["mcp", "approver", "operator", "admin", "gw.tools"],
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          // Every resource is a JWT-access-token resource server whose audience is itself.
          defaultResource: () => undefined,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: unknown, resource: string) => ({
            scope: "mcp approver operator admin gw.tools",
            audience: resource,
            accessTokenTTL: ACCESS_TOKEN_TTL,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          }),
        },
      },
      extraTokenClaims: (_ctx: unknown, token: { clientId?: string }) => {
        const tenant = token.clientId ? tenants.get(token.clientId) : undefined;
        return tenant ? { tenant } : undefined;
      },
    });
    current = { callback: provider.callback() };
    return kid;
  };
  let kid = await build();

  return {
    issuer,
    get kid() {
      return kid;
    },
    async token(client, { resource, scope }) {
      const response = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${btoa(`${client.id}:${client.secret}`)}`,
        },
        body: new URLSearchParams({ grant_type: "client_credentials", scope, resource }),
      });
      const body = await response.json();
      if (!response.ok) {
        throw new Error(`token endpoint: ${response.status} ${JSON.stringify(body)}`);
      }
      return body.access_token as string;
    },
    async rotateKeys() {
      kid = await build();
      return kid;
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e ? reject(e) : resolve()));
      }),
  };
}
