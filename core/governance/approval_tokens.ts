/**
 * Approval tokens: an operator's "yes" to one exact call, carried back by the caller.
 *
 * A token is `v1.<base64url(JSON payload)>.<base64url(HMAC-SHA256)>`; the MAC covers
 * `v1.<payload>`. The payload binds tenant, tool and arguments hash, expires, and carries a
 * 128-bit nonce that a {@link NonceStore} lets be redeemed once. Verification never parses an
 * unauthenticated payload and never echoes the secret or the token's bindings to a caller
 * they do not belong to.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import { toHex } from "../auth/digest.ts";
import type { NonceStore } from "./nonce_store.ts";

/** Default lifetime of an approval token: ten minutes. */
export const DEFAULT_APPROVAL_TOKEN_TTL_MS = 10 * 60 * 1000;

/** Options for {@link ApprovalTokens}. */
export interface ApprovalTokensOptions {
  /** The HMAC key: at least 32 bytes (a string counts as its UTF-8 bytes). Shared by replicas. */
  secret: string | Uint8Array;
  clock: Clock;
  /** Token lifetime in milliseconds; default {@link DEFAULT_APPROVAL_TOKEN_TTL_MS}. */
  ttlMs?: number;
  /** Where redeemed nonces are remembered. */
  nonces: NonceStore;
}

/** What an approval grants: one call by a tenant to a tool with exact arguments. */
export interface ApprovalGrant {
  tenant: string;
  tool: string;
  /** {@link argumentsHash} of the approved arguments. */
  argumentsHash: string;
  /** The approval request this token answers. */
  requestId: string;
}

/** The call a presented token must match. */
export interface ApprovalExpectation {
  tenant: string;
  tool: string;
  argumentsHash: string;
}

/** Why a token was refused. */
export type ApprovalTokenFailureCode =
  | "approval_invalid"
  | "approval_expired"
  | "approval_replayed"
  | "approval_mismatch";

/** The outcome of {@link ApprovalTokens.verify}. */
export type ApprovalVerification =
  | { ok: true; requestId: string; redemption: Redemption }
  | { ok: false; code: ApprovalTokenFailureCode; reason: string };

/** What redeeming a verified token uses up: its nonce, remembered until the token expires. */
export interface Redemption {
  nonce: string;
  expiresAt: number;
}

/** Options of {@link ApprovalTokens.verify}. */
export interface VerifyOptions {
  /**
   * Consume the nonce once everything else holds (default true). With false the caller redeems
   * it with {@link ApprovalTokens.redeem} when the call is actually made, so a call refused or
   * never sent afterwards leaves the token usable.
   */
  consume?: boolean;
}

/** The signed payload; short keys keep tokens short. */
interface Payload {
  t: string;
  tool: string;
  h: string;
  exp: number;
  n: string;
  r: string;
}

const VERSION = "v1";
const MIN_SECRET_BYTES = 32;
const MAC_BYTES = 32;
const NONCE_BYTES = 16;
/** Far above any real token (a few hundred bytes); stops work on absurd input early. */
const MAX_TOKEN_CHARS = 4096;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
const NONCE = /^[0-9a-f]{32}$/;
const RENEW = "request a new approval";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Issues and verifies HMAC-SHA256 approval tokens. */
export class ApprovalTokens {
  readonly #key: Promise<CryptoKey>;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #nonces: NonceStore;

  constructor(options: ApprovalTokensOptions) {
    const secret = typeof options.secret === "string"
      ? encoder.encode(options.secret)
      : new Uint8Array(options.secret);
    if (secret.byteLength < MIN_SECRET_BYTES) {
      throw new RangeError(
        `The approval token secret is ${secret.byteLength} bytes; it needs at least ` +
          `${MIN_SECRET_BYTES} (generate one with: openssl rand -base64 48)`,
      );
    }
    const ttlMs = options.ttlMs ?? DEFAULT_APPROVAL_TOKEN_TTL_MS;
    if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
      throw new RangeError(`ttlMs must be a positive integer of milliseconds, got ${ttlMs}`);
    }
    this.#key = crypto.subtle.importKey(
      "raw",
      secret,
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    this.#clock = options.clock;
    this.#ttlMs = ttlMs;
    this.#nonces = options.nonces;
  }

  /** How long issued tokens live, in milliseconds. */
  get ttlMs(): number {
    return this.#ttlMs;
  }

  /** Signs a single-use token for exactly this grant, valid for the configured lifetime. */
  async issue(grant: ApprovalGrant): Promise<{ token: string; expiresAt: number }> {
    for (const field of ["tenant", "tool", "argumentsHash", "requestId"] as const) {
      if (typeof grant[field] !== "string" || grant[field] === "") {
        throw new TypeError(`An approval grant needs a non-empty ${field}`);
      }
    }
    const expiresAt = this.#clock.now() + this.#ttlMs;
    const payload: Payload = {
      t: grant.tenant,
      tool: grant.tool,
      h: grant.argumentsHash,
      exp: expiresAt,
      n: toHex(crypto.getRandomValues(new Uint8Array(NONCE_BYTES))),
      r: grant.requestId,
    };
    const signingInput = `${VERSION}.${toBase64Url(encoder.encode(JSON.stringify(payload)))}`;
    const mac = await this.#sign(signingInput);
    return { token: `${signingInput}.${toBase64Url(mac)}`, expiresAt };
  }

  /**
   * Checks a presented token against the call it is presented with, in this order: well-formed
   * and genuinely signed (else approval_invalid), unexpired (approval_expired), bound to this
   * tenant, tool and arguments (approval_mismatch), not redeemed before (approval_replayed).
   * Only a token that passes everything consumes its nonce, so presenting a token with the
   * wrong call does not burn it. Rejects only if the nonce store fails (fail closed).
   */
  async verify(
    token: string,
    expected: ApprovalExpectation,
    options: VerifyOptions = {},
  ): Promise<ApprovalVerification> {
    const parsed = await this.#authenticate(token);
    if ("code" in parsed) return parsed;
    const payload = parsed.payload;

    if (this.#clock.now() >= payload.exp) {
      return fail(
        "approval_expired",
        `The approval token expired at ${new Date(payload.exp).toISOString()}; ${RENEW} ` +
          `for "${expected.tool}"`,
      );
    }
    if (payload.t !== expected.tenant) {
      // The token's own tenant is not named: it belongs to someone else.
      return fail(
        "approval_mismatch",
        `The approval token was issued for a different tenant; ${RENEW} as tenant ` +
          `"${expected.tenant}"`,
      );
    }
    if (payload.tool !== expected.tool) {
      return fail(
        "approval_mismatch",
        `The approval token was issued for tool "${payload.tool}"; ${RENEW} for ` +
          `"${expected.tool}"`,
      );
    }
    if (payload.h !== expected.argumentsHash) {
      return fail(
        "approval_mismatch",
        `The approval token was issued for different arguments to "${expected.tool}"; retry ` +
          `with exactly the approved arguments or ${RENEW} for these`,
      );
    }
    const redemption = { nonce: payload.n, expiresAt: payload.exp };
    if (options.consume !== false && !(await this.redeem(redemption))) {
      return replayed(expected.tool);
    }
    return { ok: true, requestId: payload.r, redemption };
  }

  /** Uses up a verified token's nonce: true the first time only (rejects if the store fails). */
  async redeem(redemption: Redemption): Promise<boolean> {
    return await this.#nonces.consume(redemption.nonce, redemption.expiresAt);
  }

  /** Shape, encoding and signature; the payload is parsed only once the signature holds. */
  async #authenticate(
    token: unknown,
  ): Promise<{ payload: Payload } | Extract<ApprovalVerification, { ok: false }>> {
    if (typeof token !== "string" || token === "") {
      return invalid("The approval token is empty");
    }
    if (token.length > MAX_TOKEN_CHARS) {
      return invalid(`The approval token is longer than ${MAX_TOKEN_CHARS} characters`);
    }
    const parts = token.split(".");
    if (parts[0] !== VERSION) {
      return invalid(
        `The approval token does not start with "${VERSION}."; pass the token exactly as issued`,
      );
    }
    if (parts.length !== 3) {
      return invalid(
        `The approval token has ${parts.length} dot-separated parts instead of 3: it is ` +
          "truncated or not an approval token; pass the token exactly as issued",
      );
    }
    const [, body = "", signature = ""] = parts;
    if (!BASE64URL.test(body) || !BASE64URL.test(signature)) {
      return invalid(
        "The approval token contains characters outside base64url; it was altered or mangled " +
          "in transit; pass the token exactly as issued",
      );
    }
    const mac = fromBase64Url(signature);
    if (!mac || mac.byteLength !== MAC_BYTES) {
      return invalid(
        "The approval token's signature is truncated or corrupt; pass the token exactly as issued",
      );
    }
    const actual = await this.#sign(`${VERSION}.${body}`);
    if (!constantTimeEqual(actual, mac)) {
      return invalid(
        "The approval token's signature does not match: it was altered after issue, or signed " +
          `by a gateway with a different secret; ${RENEW}`,
      );
    }
    const payload = decodePayload(body);
    if (!payload) {
      // Correctly signed yet unreadable: only a gateway bug could produce this.
      return invalid(`The approval token's payload is unreadable; ${RENEW}`);
    }
    return { payload };
  }

  async #sign(input: string): Promise<Uint8Array> {
    const mac = await crypto.subtle.sign("HMAC", await this.#key, encoder.encode(input));
    return new Uint8Array(mac);
  }
}

function fail(
  code: ApprovalTokenFailureCode,
  reason: string,
): Extract<ApprovalVerification, { ok: false }> {
  return { ok: false, code, reason };
}

/** The refusal of a token whose nonce was used before. */
export function replayed(tool: string): Extract<ApprovalVerification, { ok: false }> {
  return fail(
    "approval_replayed",
    `The approval token was already used; an approval is good for one call, so ${RENEW} ` +
      `for "${tool}"`,
  );
}

function invalid(reason: string): Extract<ApprovalVerification, { ok: false }> {
  return fail("approval_invalid", reason);
}

function decodePayload(body: string): Payload | undefined {
  const bytes = fromBase64Url(body);
  if (!bytes) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes));
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const p = value as Record<string, unknown>;
  const ok = typeof p.t === "string" && typeof p.tool === "string" && typeof p.h === "string" &&
    typeof p.r === "string" && typeof p.n === "string" && NONCE.test(p.n) &&
    typeof p.exp === "number" && Number.isFinite(p.exp);
  return ok ? (p as unknown as Payload) : undefined;
}

/** Compares every byte whatever the first difference, so timing reveals nothing. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  let diff = 0;
  for (let i = 0; i < a.byteLength; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** Strict decode: only canonical unpadded base64url, so each token has exactly one spelling. */
function fromBase64Url(text: string): Uint8Array | undefined {
  if (text.length % 4 === 1) return undefined;
  let binary: string;
  try {
    binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  } catch {
    return undefined;
  }
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return toBase64Url(bytes) === text ? bytes : undefined;
}
