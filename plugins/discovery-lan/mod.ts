/**
 * Discovery on the local network: MCP servers announcing `_mcp._tcp.local` over mDNS (with TXT
 * `path=` and `transport=`). `MCP_PLUGIN_DISCOVERY_LAN_LISTEN_MS` sets how long to listen
 * (default 2000).
 * @module
 */
import { definePlugin, type DiscoverySource } from "../../core/plugin_api/mod.ts";
import { LanSource } from "./lan_source.ts";

export default definePlugin({
  name: "discovery-lan",
  version: "1.0.0",
  kind: "discovery",
  description: "Proposes MCP servers announced over mDNS (_mcp._tcp.local)",
  permissions: { net: true, sys: ["networkInterfaces"] },
  create(ctx): DiscoverySource {
    const listenMs = Number(ctx.config.listen_ms ?? 2000);
    if (!(listenMs > 0)) {
      throw new Error(
        `MCP_PLUGIN_DISCOVERY_LAN_LISTEN_MS must be a positive number of milliseconds, received "${ctx.config.listen_ms}"`,
      );
    }
    return new LanSource({ listenMs, clock: ctx.clock, logger: ctx.logger });
  },
});
