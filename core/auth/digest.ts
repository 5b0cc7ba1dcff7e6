/**
 * SHA-256 digests and their constant-time comparison, shared by every token source.
 * @module
 */

/** The SHA-256 digest of a string's UTF-8 bytes. */
export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
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
