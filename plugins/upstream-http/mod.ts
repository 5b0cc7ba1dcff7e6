/**
 * Upstream adapter for MCP servers over Streamable HTTP: one relay worker per server holds the
 * SDK's client transport and may reach only the server's host and port.
 * @module
 */
import { definePlugin } from "../../core/plugin_api/mod.ts";
import { planUrl } from "./url_plan.ts";

export default definePlugin({
  name: "upstream-http",
  version: "1.0.0",
  kind: "upstream",
  description:
    "Upstream MCP servers over Streamable HTTP, each relayed by a worker limited to its host",
  // Its workers connect to the configured hosts; each worker gets only its own one.
  permissions: { net: true },
  create() {
    return {
      transport: "http",
      workerUrl: new URL("./worker.ts", import.meta.url).href,
      plan: (server, options) => planUrl(server, options, "http"),
    };
  },
});
