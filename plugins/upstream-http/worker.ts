/**
 * The Streamable HTTP relay worker: the SDK's StreamableHTTPClientTransport between the worker's
 * port and the upstream URL. It runs with `net` for that URL's host:port only.
 * @module
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runHttpRelay } from "./relay.ts";

runHttpRelay({
  create: (url, headers) => new StreamableHTTPClientTransport(url, { requestInit: { headers } }),
  // Its own errors concern the optional GET stream, which the SDK reconnects; a dead server
  // surfaces as a failed send, which ends the session.
  isFatal: () => false,
});
