/**
 * The legacy HTTP+SSE relay worker: the SDK's SSEClientTransport between the worker's port and
 * the upstream URL. It runs with `net` for that URL's host:port only.
 * @module
 */
import { SSEClientTransport, SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import { runHttpRelay } from "../upstream-http/relay.ts";

runHttpRelay({
  create: (url, headers, fetch) => new SSEClientTransport(url, { requestInit: { headers }, fetch }),
  // The session lives on the GET stream: once that fails, the server has forgotten the session.
  isFatal: (error) => error instanceof SseError,
});
