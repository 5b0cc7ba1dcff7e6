/**
 * Which of the gateway's requests an upstream's server→client message belongs to, as the upstream
 * transport tells it (a Streamable HTTP server answers a POST on that request's own stream).
 *
 * The WorkerTransport writes it into the message's `params._meta` under a key of the gateway's, and
 * removes that key from every message first, so an upstream cannot name a call itself; the handle
 * takes it out again before anything is relayed to an inbound client.
 * @module
 */

/** The `_meta` key carrying the id of the gateway request a message arrived with. */
export const RELATED_REQUEST_META_KEY = "agent33.dev/related-request";

/**
 * Sets (or, with `related` undefined, removes) the marker on a message from an upstream, in place.
 * Only messages with a method (requests and notifications) are marked.
 */
export function markRelated(message: unknown, related: string | number | undefined): void {
  if (message === null || typeof message !== "object") return;
  const m = message as { method?: unknown; params?: unknown };
  if (typeof m.method !== "string") return;
  const params = m.params;
  if (related === undefined) {
    const meta = isRecord(params) ? params._meta : undefined;
    if (isRecord(meta) && Object.hasOwn(meta, RELATED_REQUEST_META_KEY)) {
      delete meta[RELATED_REQUEST_META_KEY];
    }
    return;
  }
  const base = isRecord(params) ? params : {};
  const meta = isRecord(base._meta) ? base._meta : {};
  meta[RELATED_REQUEST_META_KEY] = related;
  base._meta = meta;
  m.params = base;
}

/** Splits the marker off a message's params: the request id it names, and params without it. */
export function takeRelated<P extends Record<string, unknown> | undefined>(
  params: P,
): { related: string | number | undefined; params: P } {
  const meta = params?._meta;
  if (!isRecord(meta) || !Object.hasOwn(meta, RELATED_REQUEST_META_KEY)) {
    return { related: undefined, params };
  }
  const { [RELATED_REQUEST_META_KEY]: value, ...rest } = meta;
  const related = typeof value === "string" || typeof value === "number" ? value : undefined;
  const { _meta: _, ...others } = params as Record<string, unknown>;
  const cleaned = Object.keys(rest).length === 0 ? others : { ...others, _meta: rest };
  return { related, params: cleaned as P };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
