/**
 * A response body read no further than a bound: what comes from a registry, an identity provider
 * or any server outside the gateway may stream without end.
 * @module
 */
import { concatBytes } from "./concat_bytes.ts";

/**
 * The body's bytes (null when there is none); past `max` bytes the stream is cancelled and
 * `tooLarge()` thrown, nothing more read.
 */
export async function readBoundedBody(
  response: Response,
  max: number,
  tooLarge: () => Error,
): Promise<Uint8Array<ArrayBuffer> | null> {
  if (!response.body) return null;
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  // A fetch's chunks are ArrayBuffer-backed, as a Response body must be.
  return concatBytes(chunks, size) as Uint8Array<ArrayBuffer>;
}
