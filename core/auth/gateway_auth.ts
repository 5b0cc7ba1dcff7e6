/**
 * How the HTTP listener authenticates, decided once at start from the server settings: refused
 * (`config_invalid`) when unsafe, anonymous on loopback with --no-auth, otherwise an
 * authenticator over the configured sources, generating the client and operator tokens a local
 * gateway lacks.
 * @module
 */
import { createAuthenticator } from "./authenticator.ts";
import { DISCOVERY_RETRY_MS, type JwtOptions } from "./jwt_verifier.ts";
import { isLoopbackHost } from "./host_guard.ts";
import type { TokenPayload } from "./token_payload.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import { ANONYMOUS } from "../http/http_listener.ts";

/** The listener's authentication, and the tokens generated for it. */
export interface PreparedAuth {
  /** Null with --no-auth: every caller is `anonymous`. */
  authenticator: Awaited<ReturnType<typeof createAuthenticator>> | null;
  /** Who every caller is with --no-auth. */
  anonymous?: TokenPayload;
  /** The client bearer token (scope `mcp`) generated because none was configured. */
  generatedToken?: string;
  /** The operator's bearer token (scope `admin`) generated because no source grants admin. */
  generatedAdminToken?: string;
}

/**
 * Decides the listener's authentication; `registerGenerated` is given generated tokens (for
 * redaction) before anything can log them.
 */
export async function prepareAuth(
  config: GatewayConfig,
  deps: { logger: Logger; clock: Clock; registerGenerated: (tokens: string[]) => void },
): Promise<PreparedAuth> {
  const { server } = config;
  const { logger, clock } = deps;
  const loopback = isLoopbackHost(server.host);
  if (server.authDisabled) {
    if (!loopback) {
      throw new GatewayError(
        "config_invalid",
        `--no-auth is only allowed on a loopback host, but MCP_SERVER_HOST is "${server.host}"; ` +
          "bind 127.0.0.1 or configure MCP_SERVER_AUTH_TOKEN",
      );
    }
    const admin = server.authDisabledAdmin;
    logger.warn(
      admin
        ? "AUTHENTICATION IS DISABLED (--no-auth --no-auth-admin): any local process can call every tool, decide approvals and change the gateway (add servers, i.e. run commands). Use only for development."
        : "AUTHENTICATION IS DISABLED (--no-auth): any local process can call every tool; the admin API and approval decisions are refused (add --no-auth-admin to open them). Use only for development and conformance tests.",
    );
    const anonymous: TokenPayload = {
      ...ANONYMOUS,
      scopes: admin ? ["mcp", "admin"] : ["mcp"],
    };
    return { authenticator: null, anonymous };
  }
  let generatedToken: string | undefined;
  let generatedAdminToken: string | undefined;
  let staticToken = server.authToken;
  let adminToken = server.adminToken;
  const jwt = server.jwt.secret !== undefined || server.jwt.jwksUrl !== undefined ||
    server.oauth !== undefined;
  const configured = staticToken !== undefined || adminToken !== undefined ||
    server.tokensFile !== undefined || jwt;
  if (!configured) {
    if (!loopback) {
      throw new GatewayError(
        "config_invalid",
        `Refusing to serve on non-loopback host "${server.host}" without authentication; ` +
          "set MCP_SERVER_AUTH_TOKEN, MCP_AUTH_TOKENS_FILE or MCP_AUTH_JWT_SECRET/MCP_AUTH_JWKS_URL",
      );
    }
    generatedToken = randomToken();
    staticToken = generatedToken;
  }
  // The client token holds `mcp` only; the operator's is a second token, so the caller that
  // asks for an approval is never the one that can grant it.
  const staticScopes = generatedToken ? ["mcp"] : server.authScopes;
  const adminSource = adminToken !== undefined || server.tokensFile !== undefined || jwt ||
    staticScopes.includes("admin");
  if (!adminSource) {
    generatedAdminToken = randomToken();
    adminToken = generatedAdminToken;
  }
  const generated = [generatedToken, generatedAdminToken].filter((t) => t !== undefined);
  if (generated.length) {
    deps.registerGenerated(generated);
  }
  const authenticator = await createAuthenticator({
    ...(staticToken === undefined ? {} : { staticToken, staticScopes }),
    ...(adminToken === undefined ? {} : { adminToken }),
    ...(server.tokensFile === undefined ? {} : { tokensFile: server.tokensFile }),
    ...(server.oauth ? { jwt: oauthJwtOptions(server) } : {}),
    ...(!server.oauth && (server.jwt.secret || server.jwt.jwksUrl) ? { jwt: server.jwt } : {}),
    now: () => clock.now(),
    onDiscovery: (outcome) => {
      const log = logger.child("oauth");
      if (outcome.ok) log.info(`keys of ${outcome.issuer} come from ${outcome.jwksUri}`);
      else {
        log.warn(
          `${outcome.error}; its tokens are refused until it can be read, tried again on a ` +
            `token after ${DISCOVERY_RETRY_MS / 1000} s`,
        );
      }
    },
  });
  return {
    authenticator,
    ...(generatedToken ? { generatedToken } : {}),
    ...(generatedAdminToken ? { generatedAdminToken } : {}),
  };
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replaceAll("=", "");
}

/** The JWT verification of an OAuth protected resource: the issuer's keys, its resource as `aud`. */
function oauthJwtOptions(server: GatewayConfig["server"]): JwtOptions {
  const oauth = server.oauth!;
  return {
    discoverKeys: true,
    issuer: oauth.issuer,
    audience: oauth.audience,
    scopeMap: oauth.scopeMap,
    scopeClaims: oauth.scopeClaims,
    tenantClaim: oauth.tenantClaim,
    ...(oauth.tenantFallback === undefined ? {} : { tenantFallback: oauth.tenantFallback }),
    ...(server.jwt.clockToleranceSeconds === undefined
      ? {}
      : { clockToleranceSeconds: server.jwt.clockToleranceSeconds }),
    ...(server.jwt.jwksCooldownSeconds === undefined
      ? {}
      : { jwksCooldownSeconds: server.jwt.jwksCooldownSeconds }),
  };
}
