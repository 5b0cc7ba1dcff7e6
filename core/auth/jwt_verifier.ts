/**
 * JWT bearer tokens, verified with a shared HS256 secret or a remote JWKS.
 *
 * Hygiene a stolen or mis-issued token cannot talk its way past: every token must carry `exp`
 * (checked with a small clock tolerance), a JWKS-verified token must be meant for this gateway
 * (an audience is required, or any token the identity provider ever issued for another service
 * would do), and an HS256 secret shorter than 32 bytes is refused, since it can be brute-forced
 * from one captured token.
 *
 * With `discoverKeys` (MCP_AUTH_OAUTH_ISSUER) the keys come from the issuer's own metadata
 * (`jwks_uri`), the audience is the gateway's resource URL, and the provider's scopes are mapped
 * to the gateway's; it is the same verification, with the key source looked up first.
 * @module
 */
import { errors, type JWSAlgorithm, type JWTPayload, jwtVerify, type JWTVerifyGetKey } from "jose";
import { sha256, toHex } from "./digest.ts";
import { discoverJwksUri } from "./issuer_metadata.ts";
import { keySet } from "./key_set.ts";
import { mapScopes, type ScopeMap } from "./scope_map.ts";
import { principalOf, type TokenPayload } from "./token_payload.ts";

/** Where JWT keys come from and which claims must match. */
export interface JwtOptions {
  secret?: string;
  jwksUrl?: string;
  issuer?: string;
  /** Required `aud`: one value, or several of which the token must carry one. */
  audience?: string | string[];
  tenantClaim?: string;
  /** The tenant of a token without the tenant claim; such a token is refused when unset. */
  tenantFallback?: string;
  /** Find the JWKS through the issuer's metadata (needs `issuer` and `audience`). */
  discoverKeys?: boolean;
  /** Provider scope → gateway scopes; unset = the token's scopes as they are. */
  scopeMap?: ScopeMap;
  /** Claims the scopes are read from; {@link DEFAULT_SCOPE_CLAIMS}. */
  scopeClaims?: readonly string[];
  /**
   * Seconds after one JWKS fetch, whatever its outcome, before a token with an unknown `kid` may
   * cause another (picks up key rotation without letting junk tokens hammer the provider);
   * {@link DEFAULT_JWKS_COOLDOWN_SECONDS}.
   */
  jwksCooldownSeconds?: number;
  /** Seconds of clock skew allowed on `exp` and `nbf`; {@link DEFAULT_CLOCK_TOLERANCE_SECONDS}. */
  clockToleranceSeconds?: number;
}

/** Default of MCP_AUTH_JWT_CLOCK_TOLERANCE, in seconds. */
export const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30;
/** Where scopes are read from unless told otherwise (MCP_AUTH_OAUTH_SCOPE_CLAIMS). */
export const DEFAULT_SCOPE_CLAIMS: readonly string[] = ["scope", "scp", "scopes"];
/** Default of MCP_AUTH_JWKS_COOLDOWN, in seconds (jose's own default). */
export const DEFAULT_JWKS_COOLDOWN_SECONDS = 30;
/** After the issuer's metadata could not be read, how long before it is tried again, in ms. */
export const DISCOVERY_RETRY_MS = 5_000;
/** Shortest HS256 secret accepted, in bytes (RFC 7518 §3.2: at least the hash's size). */
export const MIN_HS256_SECRET_BYTES = 32;

/** Injected effects, so tests control the network and the clock. */
export interface JwtVerifierDeps {
  fetch?: typeof fetch;
  now?: () => number;
  /** jose's `jwtVerify` (tests count the verifications). */
  verify?: typeof jwtVerify;
  /** Told each outcome of reading the issuer's metadata (for the operator's log). */
  onDiscovery?: DiscoveryListener;
}

/** Hears whether the issuer's metadata was read: its `jwks_uri`, or why not. */
export type DiscoveryListener = (
  outcome: { ok: true; issuer: string; jwksUri: string } | { ok: false; error: string },
) => void;

/**
 * How long a verified token is taken on trust (never past its `exp`). Clients send the same JWT
 * on every request, and each verification is an async WebCrypto signature check; a key removed
 * from the JWKS stops being honoured within this window.
 */
export const VERIFIED_TTL_MS = 30_000;
/** Verified tokens remembered at most (the oldest goes first). */
const MAX_VERIFIED = 1024;

/** The outcome of verifying one JWT: a payload, or why it was refused. */
export type JwtVerdict = { ok: true; payload: TokenPayload } | { ok: false; description: string };

/** Verifies one compact JWT; never throws. */
export type JwtVerifier = (token: string) => Promise<JwtVerdict>;

// Asymmetric only: accepting HS* with JWKS would let a public key be used as an HMAC secret.
const JWKS_ALGORITHMS: JWSAlgorithm[] = ["RS256", "ES256", "EdDSA", "PS256"];

/** Whether a token has the JWS compact shape: three dot-separated base64url parts. */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}

/**
 * Builds a verifier for the configured key source; throws, naming the variable, when there is
 * none, when the HS256 secret is too short, or when a JWKS comes without an audience.
 */
export function createJwtVerifier(options: JwtOptions, deps: JwtVerifierDeps = {}): JwtVerifier {
  const { secret, jwksUrl, issuer, audience, tenantClaim = "tenant", discoverKeys } = options;
  const clockTolerance = options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS;
  if (!secret && !jwksUrl && !discoverKeys) {
    throw new Error("JWT auth needs a secret, a JWKS URL or an OAuth issuer");
  }
  if (discoverKeys && (!issuer || !audience?.length)) {
    throw new Error("OAuth token verification needs the issuer and the resource URL (audience)");
  }
  const secretKey = secret ? new TextEncoder().encode(secret) : undefined;
  if (secretKey && secretKey.length < MIN_HS256_SECRET_BYTES) {
    throw new Error(hs256SecretTooShort(secretKey.length));
  }
  if (jwksUrl && !audience?.length) throw new Error(JWKS_NEEDS_AUDIENCE);
  const fetchImpl = deps.fetch;
  const cooldownMs = (options.jwksCooldownSeconds ?? DEFAULT_JWKS_COOLDOWN_SECONDS) * 1000;
  const now = deps.now ?? Date.now;
  const remote = (url: URL) =>
    keySet({ url, cooldownMs, now, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
  const jwks: JWTVerifyGetKey | undefined = jwksUrl
    ? remote(parseUrl(jwksUrl))
    : discoverKeys
    ? discoveredKeys(issuer!, remote, { fetch: fetchImpl, now, onDiscovery: deps.onDiscovery })
    : undefined;
  const algorithms: JWSAlgorithm[] = [
    ...(secretKey ? ["HS256" as const] : []),
    ...(jwks ? JWKS_ALGORITHMS : []),
  ];
  // jose checks `algorithms` before asking for a key, so HS256 here implies a secret.
  const getKey: JWTVerifyGetKey = (header, token) => {
    if (header.alg === "HS256" && secretKey) return secretKey;
    if (jwks) return jwks(header, token);
    throw new errors.JOSEAlgNotAllowed(`"${header.alg}" is not accepted`);
  };

  const verify = deps.verify ?? jwtVerify;
  const verified = new Map<string, { payload: TokenPayload; until: number }>();
  const remember = (token: string, payload: TokenPayload, exp: number) => {
    const until = Math.min(exp * 1000, now() + VERIFIED_TTL_MS);
    if (until <= now()) return;
    if (verified.size >= MAX_VERIFIED) verified.delete(verified.keys().next().value!);
    verified.set(token, { payload, until });
  };

  return async (token) => {
    const known = verified.get(token);
    if (known && now() < known.until) {
      return { ok: true, payload: { ...known.payload, scopes: [...known.payload.scopes] } };
    }
    verified.delete(token);
    let claims: JWTPayload;
    let alg: string | undefined;
    try {
      ({ payload: claims, protectedHeader: { alg } } = await verify(token, getKey, {
        algorithms,
        issuer,
        audience,
        requiredClaims: ["exp"],
        clockTolerance,
        currentDate: deps.now ? new Date(deps.now()) : undefined,
      }));
    } catch (e) {
      return { ok: false, description: describe(e) };
    }
    const tenant = claims[tenantClaim] ?? options.tenantFallback;
    if (tenant === undefined || tenant === "") {
      return { ok: false, description: `JWT has no "${tenantClaim}" claim` };
    }
    if (typeof tenant !== "string") {
      return { ok: false, description: `JWT "${tenantClaim}" claim must be a string` };
    }
    if (claims.sub !== undefined && (typeof claims.sub !== "string" || claims.sub === "")) {
      return { ok: false, description: 'JWT "sub" claim must be a non-empty string' };
    }
    if (claims.iss !== undefined && typeof claims.iss !== "string") {
      return { ok: false, description: 'JWT "iss" claim must be a string' };
    }
    const listed = scopesOf(claims, options.scopeClaims ?? DEFAULT_SCOPE_CLAIMS);
    const scopes = options.scopeMap ? mapScopes(options.scopeMap, listed) : listed;
    const aud = claims.aud === undefined ? [] : [claims.aud].flat();
    // Without `sub`, the token itself is the identity: two sub-less callers are never one caller.
    const subject = claims.sub ?? `jwt:${toHex(sha256(token)).slice(0, 16)}`;
    const payload: TokenPayload = {
      tenant,
      scopes,
      subject,
      principal: jwtPrincipal(alg, claims.iss, subject),
      kind: "jwt",
      audience: aud,
    };
    // requiredClaims made jose check that `exp` is there and a number.
    remember(token, { ...payload, scopes: [...payload.scopes] }, claims.exp!);
    return { ok: true, payload };
  };
}

/**
 * A JWT caller's principal. A `sub` is unique only for its issuer (OIDC Core §2), and whoever holds
 * the HS256 secret can write any `iss`: so the key source that vouched for the token and the
 * issuer are part of who the caller is, beside the subject.
 */
function jwtPrincipal(alg: string | undefined, iss: string | undefined, subject: string): string {
  return principalOf("jwt", alg === "HS256" ? "secret" : "keys", iss ?? "", subject);
}

/**
 * The keys of an issuer found through its metadata: looked up on first use (so the gateway starts
 * while the provider is down), kept once found, and after a failure tried again only after
 * {@link DISCOVERY_RETRY_MS}, so a burst of tokens does not become a burst of requests.
 */
function discoveredKeys(
  issuer: string,
  remote: (url: URL) => JWTVerifyGetKey,
  deps: {
    fetch: typeof fetch | undefined;
    now: () => number;
    onDiscovery: DiscoveryListener | undefined;
  },
): JWTVerifyGetKey {
  let keys: JWTVerifyGetKey | undefined;
  let pending: Promise<JWTVerifyGetKey> | undefined;
  let failed: { error: Error; until: number } | undefined;
  const resolve = (): Promise<JWTVerifyGetKey> => {
    if (keys) return Promise.resolve(keys);
    if (failed && deps.now() < failed.until) return Promise.reject(failed.error);
    pending ??= discoverJwksUri(issuer, deps.fetch ? { fetch: deps.fetch } : {}).then(
      (url) => {
        deps.onDiscovery?.({ ok: true, issuer, jwksUri: url.href });
        return (keys = remote(url));
      },
      (e: Error) => {
        failed = { error: e, until: deps.now() + DISCOVERY_RETRY_MS };
        deps.onDiscovery?.({ ok: false, error: e.message });
        throw e;
      },
    ).finally(() => (pending = undefined));
    return pending;
  };
  return async (header, token) => (await resolve())(header, token);
}

/**
 * Scopes from the named claims, de-duplicated: each a space-delimited string (OAuth's `scope`,
 * RFC 8693 §4.2; `scp` as Azure AD and Okta send it) or an array (`scp`, `scopes`, Entra's app
 * `roles`, Auth0's `permissions`).
 */
function scopesOf(claims: JWTPayload, names: readonly string[]): string[] {
  const listed = (value: unknown): unknown[] =>
    typeof value === "string" ? value.split(" ") : Array.isArray(value) ? value : [];
  const all = names.flatMap((name) => listed(claims[name])).filter((
    s,
  ): s is string => typeof s === "string" && s !== "");
  return [...new Set(all)];
}

/** Why a short HS256 secret is refused, naming the variable and the fix. */
export function hs256SecretTooShort(bytes: number): string {
  return `MCP_AUTH_JWT_SECRET is ${bytes} bytes; an HS256 secret needs at least ` +
    `${MIN_HS256_SECRET_BYTES} bytes (a shorter one can be guessed from a single token); ` +
    "generate one with: openssl rand -hex 32";
}

/** Why a JWKS without an audience is refused. */
export const JWKS_NEEDS_AUDIENCE =
  "MCP_AUTH_JWKS_URL is set without MCP_AUTH_JWT_AUDIENCE; set the audience your identity " +
  "provider puts in tokens for this gateway (the `aud` claim), or any token it issued for " +
  "another service would be accepted here";

function describe(e: unknown): string {
  if (e instanceof errors.JWTExpired) {
    const exp = typeof e.payload.exp === "number"
      ? ` at ${new Date(e.payload.exp * 1000).toISOString()}`
      : "";
    return `JWT expired${exp}; request a fresh token`;
  }
  if (e instanceof errors.JWTClaimValidationFailed) {
    if (e.claim === "exp" && e.reason === "missing") {
      return 'JWT has no "exp" claim; the gateway accepts only tokens that expire';
    }
    return `JWT rejected: ${e.message}`;
  }
  if (e instanceof errors.JWSSignatureVerificationFailed) {
    return "JWT signature verification failed";
  }
  if (e instanceof errors.JOSEAlgNotAllowed) return "JWT algorithm is not accepted";
  if (e instanceof errors.JWKSNoMatchingKey) return "JWT was not signed by a key in the JWKS";
  if (e instanceof errors.JWSInvalid || e instanceof errors.JWTInvalid) return "malformed JWT";
  if (e instanceof errors.JOSENotSupported) return `JWT rejected: ${e.message}`;
  // What is left (JWKS timeout, network error, bad JWKS document) is the key source's fault.
  return `JWT could not be verified: ${e instanceof Error ? e.message : String(e)}`;
}

function parseUrl(url: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new Error(`JWT JWKS URL is not a valid URL: "${url}"`);
  }
}
