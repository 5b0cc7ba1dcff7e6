/**
 * Resolves a request's bearer token to a {@link TokenPayload}, trying the static tokens (the
 * client token and the admin token), then the tokens file, then JWT; and renders refusals as
 * RFC 6750 responses.
 * @module
 */
import { sha256, timingSafeEqual, toHex } from "./digest.ts";
import {
  createJwtVerifier,
  type DiscoveryListener,
  type JwtOptions,
  type JwtVerifier,
  looksLikeJwt,
} from "./jwt_verifier.ts";
import { principalOf, type TokenPayload } from "./token_payload.ts";
import { loadTokensFile } from "./tokens_file.ts";

/** Credential sources and injected effects for {@link createAuthenticator}. */
export interface AuthenticatorOptions {
  /** MCP_SERVER_AUTH_TOKEN: the shared client token. */
  staticToken?: string;
  /** Tenant the static tokens act for; "default" when unset. */
  staticTenant?: string;
  /** MCP_SERVER_AUTH_SCOPES: what the static token may do; `["mcp"]` when unset. */
  staticScopes?: string[];
  /** MCP_ADMIN_TOKEN: a second static token with scope `admin`, identity `admin-token`. */
  adminToken?: string;
  /** Path to a YAML or JSON tokens file. */
  tokensFile?: string;
  /** JWT verification by HS256 secret or remote JWKS. */
  jwt?: JwtOptions;
  /** Reads the tokens file; Deno.readTextFile by default. */
  readTextFile?: (path: string) => Promise<string>;
  /** Fetches the JWKS; global fetch by default. */
  fetch?: typeof fetch;
  /** Clock (ms since epoch) for JWT exp/nbf checks. */
  now?: () => number;
  /** Told whether an OAuth issuer's metadata could be read. */
  onDiscovery?: DiscoveryListener;
}

/** A resolved payload, or an RFC 6750 refusal. */
export type AuthResult =
  | { ok: true; payload: TokenPayload }
  | {
    ok: false;
    status: 401 | 403;
    error: "invalid_request" | "invalid_token" | "insufficient_scope";
    description: string;
    /** The request carried no Authorization header at all (RFC 6750 §3.1: no error code then). */
    noCredentials?: true;
  };

/** Turns requests into caller identities. */
export interface Authenticator {
  /** True when at least one credential source is configured. */
  readonly configured: boolean;
  /** Resolves the request's `Authorization: Bearer …` header to a payload, never throws. */
  authenticate(request: Request): Promise<AuthResult>;
}

type Failure = Extract<AuthResult, { ok: false }>;

/** The identity (subject) of MCP_SERVER_AUTH_TOKEN, or of the generated client token. */
export const STATIC_SUBJECT = "static-token";
/** The identity (subject) of MCP_ADMIN_TOKEN, or of the generated admin token. */
export const ADMIN_SUBJECT = "admin-token";

const fail = (error: Failure["error"], description: string): Failure => ({
  ok: false,
  status: error === "insufficient_scope" ? 403 : 401,
  error,
  description,
});

/** Builds an authenticator from the configured sources; throws on a bad tokens file. */
export async function createAuthenticator(options: AuthenticatorOptions): Promise<Authenticator> {
  const tenant = options.staticTenant || "default";
  // Each static token is its own identity, so one cannot approve what the other asked for.
  const statics: { digest: Uint8Array; payload: TokenPayload }[] = [];
  if (options.staticToken) {
    statics.push({
      digest: sha256(options.staticToken),
      payload: {
        tenant,
        scopes: options.staticScopes ?? ["mcp"],
        subject: STATIC_SUBJECT,
        principal: principalOf("static", STATIC_SUBJECT),
        kind: "static",
      },
    });
  }
  if (options.adminToken) {
    statics.push({
      digest: sha256(options.adminToken),
      payload: {
        tenant,
        scopes: ["admin"],
        subject: ADMIN_SUBJECT,
        principal: principalOf("static", ADMIN_SUBJECT),
        kind: "static",
      },
    });
  }
  const fileTokens = options.tokensFile
    ? await loadTokensFile(options.tokensFile, options.readTextFile)
    : undefined;
  const verifyJwt = jwtVerifierFor(options);

  return {
    configured: Boolean(statics.length || fileTokens || verifyJwt),
    async authenticate(request) {
      const header = request.headers.get("authorization");
      if (header === null) {
        return { ...fail("invalid_request", "missing bearer token"), noCredentials: true };
      }
      const match = /^(\S+)(?:\s+(.*))?$/.exec(header.trim());
      if (!match || match[1]?.toLowerCase() !== "bearer") {
        return fail("invalid_request", "Authorization scheme must be Bearer");
      }
      const token = match[2]?.trim() ?? "";
      if (token === "") return fail("invalid_request", "empty bearer token");

      try {
        const digest = sha256(token);
        for (const known of statics) {
          if (timingSafeEqual(digest, known.digest)) {
            return { ok: true, payload: copy(known.payload) };
          }
        }
        // A Map lookup may leak timing, but only of the hash, which reveals nothing of the token.
        const entry = fileTokens?.get(toHex(digest));
        if (entry) return { ok: true, payload: { ...copy(entry), kind: "tokens_file" } };
        if (verifyJwt && looksLikeJwt(token)) {
          const verdict = await verifyJwt(token);
          return verdict.ok ? verdict : fail("invalid_token", verdict.description);
        }
        return fail("invalid_token", "unknown token");
      } catch {
        return fail("invalid_token", "token could not be verified");
      }
    },
  };
}

/**
 * The WWW-Authenticate header value for a failed result (RFC 6750): a request that sent no
 * credentials gets the bare challenge, one whose token failed gets the error and why.
 */
export function wwwAuthenticate(result: Extract<AuthResult, { ok: false }>): string {
  if (result.noCredentials) return 'Bearer realm="agent33"';
  // Header values must be visible ASCII; quoted-string escapes `"` and `\`.
  const description = result.description
    .replace(/[^\x20-\x7e]/g, "?")
    .replace(/["\\]/g, "\\$&");
  return `Bearer realm="agent33", error="${result.error}", error_description="${description}"`;
}

/**
 * A 401/403 JSON Response for a failed result, telling the client what to send instead
 * (`tokenHint`: where tokens come from, when not the static tokens).
 */
export function unauthorizedResponse(
  result: Extract<AuthResult, { ok: false }>,
  tokenHint?: string,
): Response {
  const hint = result.error === "insufficient_scope"
    ? "use a token that carries the required scope"
    : tokenHint ??
      'send "Authorization: Bearer <token>"; the tokens are printed at start-up or set with ' +
        "MCP_SERVER_AUTH_TOKEN (clients) and MCP_ADMIN_TOKEN (operators)";
  const body = {
    error: {
      code: result.status === 403 ? "forbidden" : "unauthorized",
      message: `${capitalize(result.description)}: ${hint}`,
    },
  };
  return Response.json(body, {
    status: result.status,
    headers: { "www-authenticate": wwwAuthenticate(result) },
  });
}

function jwtVerifierFor(options: AuthenticatorOptions): JwtVerifier | undefined {
  const jwt = options.jwt;
  // An all-empty jwt block (e.g. unset env vars) means "off"; a half-filled one is a mistake that
  // would otherwise leave the gateway open, so createJwtVerifier throws on it.
  if (!jwt || Object.values(jwt).every((v) => v === undefined || v === "")) return undefined;
  return createJwtVerifier(jwt, {
    fetch: options.fetch,
    now: options.now,
    ...(options.onDiscovery ? { onDiscovery: options.onDiscovery } : {}),
  });
}

function copy(p: TokenPayload): TokenPayload {
  return { ...p, scopes: [...p.scopes] };
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
