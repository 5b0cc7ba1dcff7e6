/**
 * Discovery over Tailscale: online peers tagged for MCP. Configured with
 * `MCP_PLUGIN_DISCOVERY_TAILSCALE_PORTS` (comma-separated, default 8787), `_TAGS` (default
 * tag:mcp; `*` for every peer), `_PATH` (default /mcp), `_TRANSPORT` (http or sse), `_CLI` (default
 * tailscale) and `_SOCKET` (tailscaled's LocalAPI socket, used instead of the CLI).
 * @module
 */
import { definePlugin, type DiscoverySource } from "../../core/plugin_api/mod.ts";
import { TailscaleSource } from "./tailscale_source.ts";

export default definePlugin({
  name: "discovery-tailscale",
  version: "1.0.0",
  kind: "discovery",
  description: "Proposes tailnet peers tagged for MCP as upstream servers",
  permissions: { run: ["tailscale"], read: ["/var/run/tailscale"], write: ["/var/run/tailscale"] },
  create(ctx): DiscoverySource {
    const c = ctx.config as Record<string, string | undefined>;
    const list = (text: string | undefined) =>
      text?.split(",").map((s) => s.trim()).filter(Boolean);
    const ports = list(c.ports)?.map(Number);
    if (ports?.some((p) => !Number.isInteger(p) || p <= 0 || p > 65535)) {
      throw new Error(
        `MCP_PLUGIN_DISCOVERY_TAILSCALE_PORTS must be comma-separated ports, received "${c.ports}"`,
      );
    }
    return new TailscaleSource({
      ...(c.cli ? { cli: c.cli } : {}),
      ...(c.socket ? { socket: c.socket } : {}),
      ...(ports ? { ports } : {}),
      ...(list(c.tags) ? { tags: list(c.tags)! } : {}),
      ...(c.path ? { path: c.path } : {}),
      ...(c.transport === "sse" ? { transport: "sse" as const } : {}),
    });
  },
});
