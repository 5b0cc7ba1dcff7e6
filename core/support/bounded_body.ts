/**
 * A response body read no further than a bound: what comes from a registry, an identity provider
 * or any server outside the gateway may stream without end.
 * @module
 */
import { concatBytes } from "./concat_bytes.ts";

/**
 * The body's bytes (null when there is none); past `max` bytes the stream is cancelled and
 * `tooLarge()` thrown, nothing more read. Once `signal` aborts, the stream is cancelled and its
 * reason thrown (a body that trickles is otherwise read for as long as it trickles).
 */
export async function readBoundedBody(
  response: Response,
  max: number,
  tooLarge: () => Error,
  signal?: AbortSignal,
): Promise<Uint8Array<ArrayBuffer> | null> {
  if (!response.body) return null;
  const reader = response.body.getReader();
  const stop = () => void reader.cancel().catch(() => {});
  signal?.addEventListener("abort", stop, { once: true });
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      signal?.throwIfAborted();
      const { value, done } = await reader.read();
      signal?.throwIfAborted();
      if (done) break;
      size += value.length;
      if (size > max) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
  } finally {
    signal?.removeEventListener("abort", stop);
  }
  // A fetch's chunks are ArrayBuffer-backed, as a Response body must be.
  return concatBytes(chunks, size) as Uint8Array<ArrayBuffer>;
}
