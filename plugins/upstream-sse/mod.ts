/**
 * Upstream adapter for MCP servers on the legacy HTTP+SSE transport (2024-11-05): one relay
 * worker per server holds the SDK's SSE client transport and may reach only the server's host
 * and port. Planning and relaying are shared with upstream-http; only the transport differs.
 * @module
 */
import { definePlugin } from "../../core/plugin_api/mod.ts";
import { planUrl } from "../upstream-http/url_plan.ts";

export default definePlugin({
  name: "upstream-sse",
  version: "1.0.0",
  kind: "upstream",
  description:
    "Upstream MCP servers over legacy HTTP+SSE, each relayed by a worker limited to its host",
  // Its workers connect to the configured hosts; each worker gets only its own one.
  permissions: { net: true },
  create() {
    return {
      transport: "sse",
      workerUrl: new URL("./worker.ts", import.meta.url).href,
      plan: (server, options) => planUrl(server, options, "sse"),
    };
  },
});
