/**
 * Upstream adapter for MCP servers on stdio: one relay worker per server spawns the server's
 * process and pipes newline-delimited JSON-RPC; the SDK client stays in the kernel.
 *
 * The worker may run only the server's one command. With `sandbox: "deno"` the server itself runs
 * under `deno run --no-prompt` with exactly the permissions of its `permissions` block, and each
 * start is refused when the entry's module graph imports a file it may not read
 * (module_graph_check.ts: Deno loads imported files without the read check).
 * @module
 */
import { definePlugin, type UpstreamAdapter } from "../../core/plugin_api/mod.ts";
import type { UpstreamPreflight } from "../../core/plugin_api/upstream_preflight.ts";
import { planStdio } from "./command_plan.ts";
import { checkModuleGraph } from "./module_graph_check.ts";
import { createStdioRelay } from "./relay.ts";

export default definePlugin({
  name: "upstream-stdio",
  version: "1.0.0",
  kind: "upstream",
  description:
    "Upstream MCP servers over stdio, each relayed by a worker that may run only its command",
  // Spawns configured commands (through its workers) and kills their process groups on close.
  permissions: { run: true },
  create(ctx) {
    const adapter: UpstreamAdapter & UpstreamPreflight = {
      transport: "stdio",
      workerUrl: new URL("./worker.ts", import.meta.url).href,
      inlineRelay: createStdioRelay,
      plan(server, options) {
        const grants = Object.values(server.permissions).some((g) =>
          g === true || (Array.isArray(g) && g.length > 0)
        );
        if (server.sandbox === "none" && grants) {
          ctx.logger.warn(
            "permissions are enforced only with sandbox: deno; this server runs unrestricted",
            { server: server.id },
          );
        }
        return planStdio(server, options);
      },
      preflight: (server, plan) => checkModuleGraph(server, plan, ctx.clock),
    };
    return adapter;
  },
});
