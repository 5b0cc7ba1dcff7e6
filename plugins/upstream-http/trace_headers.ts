/**
 * W3C trace context on the wire to a Streamable HTTP upstream: the gateway puts its span's
 * `traceparent` (and `tracestate`) in a request's `_meta`, as MCP clients do; an HTTP server's
 * tracing (an OTel HTTP instrumentation, a proxy, a collector's sidecar) reads headers, so this
 * fetch also sends them as `traceparent` / `tracestate` headers on that request's POST.
 * @module
 */

/** W3C `traceparent`, version 00 (the gateway sends nothing else). */
const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
/** The W3C limit on `tracestate`; printable ASCII only, so it cannot split a header. */
const TRACESTATE = /^[\x20-\x7e]{1,512}$/;

/** A fetch that copies `_meta.traceparent`/`tracestate` of a POSTed request into its headers. */
export function traceHeadersFetch(base: typeof fetch = fetch): typeof fetch {
  return (input, init) => {
    const body = init?.body;
    // Most bodies carry no trace context: a substring test keeps them from being parsed.
    if (init?.method !== "POST" || typeof body !== "string" || !body.includes('"traceparent"')) {
      return base(input, init);
    }
    const context = traceContextOf(body);
    if (context === undefined) return base(input, init);
    const headers = new Headers(init.headers);
    headers.set("traceparent", context.traceparent);
    if (context.tracestate !== undefined) headers.set("tracestate", context.tracestate);
    return base(input, { ...init, headers });
  };
}

/** The well-formed trace context in a JSON-RPC request's `params._meta`, or undefined. */
export function traceContextOf(
  body: string,
): { traceparent: string; tracestate?: string } | undefined {
  let meta: unknown;
  try {
    meta = (JSON.parse(body) as { params?: { _meta?: unknown } } | null)?.params?._meta;
  } catch {
    return undefined;
  }
  if (meta === null || typeof meta !== "object") return undefined;
  const { traceparent, tracestate } = meta as Record<string, unknown>;
  if (typeof traceparent !== "string" || !TRACEPARENT.test(traceparent)) return undefined;
  return typeof tracestate === "string" && TRACESTATE.test(tracestate)
    ? { traceparent, tracestate }
    : { traceparent };
}
