/**
 * Upstream adapter for MCP servers on stdio: one relay worker per server spawns the server's
 * process and pipes newline-delimited JSON-RPC; the SDK client stays in the kernel.
 *
 * The worker may run only the server's one command. With `sandbox: "deno"` the server itself runs
 * under `deno run --no-prompt` with exactly the permissions of its `permissions` block.
 * @module
 */
import { definePlugin } from "../../core/plugin_api/mod.ts";
import { planStdio } from "./command_plan.ts";
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
    return {
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
    };
  },
});
