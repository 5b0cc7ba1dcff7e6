/**
 * JWT bearer tokens, verified with a shared HS256 secret or a remote JWKS.
 *
 * Hygiene a stolen or mis-issued token cannot talk its way past: every token must carry `exp`
 * (checked with a small clock tolerance), a JWKS-verified token must be meant for this gateway
 * (an audience is required, or any token the identity provider ever issued for another service
 * would do), and an HS256 secret shorter than 32 bytes is refused, since it can be brute-forced
 * from one captured token.
 * @module
 */
import {
  createRemoteJWKSet,
  customFetch,
  errors,
  type JWSAlgorithm,
  type JWTPayload,
  jwtVerify,
  type JWTVerifyGetKey,
} from "jose";
import type { TokenPayload } from "./token_payload.ts";

/** Where JWT keys come from and which claims must match. */
export interface JwtOptions {
  secret?: string;
  jwksUrl?: string;
  issuer?: string;
  audience?: string;
  tenantClaim?: string;
  /** Seconds of clock skew allowed on `exp` and `nbf`; {@link DEFAULT_CLOCK_TOLERANCE_SECONDS}. */
  clockToleranceSeconds?: number;
}

/** Default of MCP_AUTH_JWT_CLOCK_TOLERANCE, in seconds. */
export const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30;
/** Shortest HS256 secret accepted, in bytes (RFC 7518 §3.2: at least the hash's size). */
export const MIN_HS256_SECRET_BYTES = 32;

/** Injected effects, so tests control the network and the clock. */
export interface JwtVerifierDeps {
  fetch?: typeof fetch;
  now?: () => number;
  /** jose's `jwtVerify` (tests count the verifications). */
  verify?: typeof jwtVerify;
}

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
  const { secret, jwksUrl, issuer, audience, tenantClaim = "tenant" } = options;
  const clockTolerance = options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS;
  if (!secret && !jwksUrl) {
    throw new Error("JWT auth needs a secret or a JWKS URL");
  }
  const secretKey = secret ? new TextEncoder().encode(secret) : undefined;
  if (secretKey && secretKey.length < MIN_HS256_SECRET_BYTES) {
    throw new Error(hs256SecretTooShort(secretKey.length));
  }
  if (jwksUrl && !audience) throw new Error(JWKS_NEEDS_AUDIENCE);
  const fetchImpl = deps.fetch;
  const jwks = jwksUrl
    ? createRemoteJWKSet(
      parseUrl(jwksUrl),
      fetchImpl ? { [customFetch]: (url, init) => fetchImpl(url, init) } : undefined,
    )
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
  const now = deps.now ?? Date.now;
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
    try {
      ({ payload: claims } = await verify(token, getKey, {
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
    const tenant = claims[tenantClaim];
    if (tenant === undefined || tenant === "") {
      return { ok: false, description: `JWT has no "${tenantClaim}" claim` };
    }
    if (typeof tenant !== "string") {
      return { ok: false, description: `JWT "${tenantClaim}" claim must be a string` };
    }
    const payload = { tenant, scopes: scopesOf(claims), subject: claims.sub ?? "jwt" };
    // requiredClaims made jose check that `exp` is there and a number.
    remember(token, { ...payload, scopes: [...payload.scopes] }, claims.exp!);
    return { ok: true, payload };
  };
}

/**
 * Scopes from OAuth's space-delimited `scope` (RFC 8693 §4.2), `scp` (a string or an array, as
 * Azure AD and Okta send it) and/or a `scopes` array, de-duplicated.
 */
function scopesOf(claims: JWTPayload): string[] {
  const listed = (value: unknown): unknown[] =>
    typeof value === "string" ? value.split(" ") : Array.isArray(value) ? value : [];
  const all = [...listed(claims.scope), ...listed(claims.scp), ...listed(claims.scopes)].filter((
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
