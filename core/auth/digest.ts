/**
 * SHA-256 digests and their constant-time comparison, shared by every token source.
 * @module
 */
import { createHash } from "node:crypto";

/**
 * The SHA-256 digest of a string's UTF-8 bytes. Synchronous (node:crypto): every authenticated
 * request hashes its token, and WebCrypto's digest is an async op on another thread (~10× the
 * cost, and a thread hop per request).
 */
export function sha256(text: string): Uint8Array {
  const digest = createHash("sha256").update(text, "utf8").digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

/** Lowercase hex of bytes, the form `sha256sum` prints. */
export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether two digests are equal, taking the same time wherever they differ. */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  // Lengths are public (both are digests), so only the contents need a branch-free compare.
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}
