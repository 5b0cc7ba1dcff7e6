/**
 * Joins byte chunks read from a stream into one array.
 * @module
 */

/** `chunks` laid end to end (`size` is their total length); a single chunk is returned as is. */
export function concatBytes(chunks: readonly Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}
