/**
 * The Streamable HTTP relay worker: the SDK's StreamableHTTPClientTransport between the worker's
 * port and the upstream URL. It runs with `net` for that URL's host:port only.
 * @module
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { markingFetch, streamMarkKey } from "./related_streams.ts";
import { runHttpRelay } from "./relay.ts";
import { traceHeadersFetch } from "./trace_headers.ts";

const markKey = streamMarkKey();

runHttpRelay({
  create: (url, headers, base) =>
    new StreamableHTTPClientTransport(url, {
      requestInit: { headers },
      // Marks what arrives on each request's own response stream with that request's id, and
      // sends a request's trace context (its `_meta.traceparent`) as headers too.
      fetch: markingFetch(markKey, traceHeadersFetch(base)),
    }),
  streamMarkKey: markKey,
  // Its own errors concern the optional GET stream, which the SDK reconnects; a dead server
  // surfaces as a failed send, which ends the session.
  isFatal: () => false,
});
