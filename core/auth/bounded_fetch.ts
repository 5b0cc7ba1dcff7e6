/**
 * A fetch for documents the gateway reads from an identity provider (its metadata, its keys):
 * bounded in time and size, redirects not followed. Such a document is a few KiB; a provider that
 * stalls or streams without end must not hold a request or the gateway's memory.
 * @module
 */
import { type Clock, deadline } from "../support/clock.ts";
import { readBoundedBody } from "../support/bounded_body.ts";

/** Largest document read, in bytes (real metadata and key sets are a few KiB). */
export const MAX_DOCUMENT_BYTES = 256 * 1024;

/** A fetch that gives up after `timeoutMs` and reads at most {@link MAX_DOCUMENT_BYTES}. */
export function boundedFetch(inner: typeof fetch, timeoutMs: number, clock: Clock): typeof fetch {
  return async (input, init) => {
    const limit = deadline(clock, timeoutMs, new Error(`no answer within ${timeoutMs} ms`));
    try {
      // Redirects are not followed: the document is the provider's own, at its own URL.
      const response = await inner(input, {
        ...init,
        redirect: "manual",
        signal: limit.signal,
      });
      const body = await readBoundedBody(
        response,
        MAX_DOCUMENT_BYTES,
        () => new Error(`${String(input)} is larger than ${MAX_DOCUMENT_BYTES} bytes`),
      );
      return new Response(body, { status: response.status, headers: response.headers });
    } finally {
      limit.cancel();
    }
  };
}
