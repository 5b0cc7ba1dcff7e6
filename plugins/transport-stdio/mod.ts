/**
 * Inbound stdio transport: newline-delimited JSON-RPC on the process's stdin and stdout.
 *
 * stdout carries only protocol frames; every log line goes to stderr. The parent process is the
 * trust boundary, so the session's tenant comes from MCP_STDIO_TENANT.
 * @module
 */
import { definePlugin, principalOf, StreamTransport } from "../../core/plugin_api/mod.ts";

export default definePlugin({
  name: "transport-stdio",
  version: "1.0.0",
  kind: "transport",
  transport: "stdio",
  description: "MCP over the gateway's own stdin/stdout",
  permissions: {},
  create(ctx) {
    const transport = new StreamTransport(ctx.stdio.stdin, ctx.stdio.stdout, {
      maxMessageBytes: ctx.settings.maxMessageBytes,
    });
    let session: { close(): Promise<void> } | undefined;
    return {
      mode: "stdio",
      async start() {
        session = await ctx.serve(transport, {
          transport: "stdio",
          auth: {
            tenant: ctx.settings.stdioTenant,
            scopes: ["admin"],
            subject: "stdio-parent",
            principal: principalOf("stdio", "stdio-parent"),
          },
        }, [{ error: (error) => ctx.logger.warn("bad frame on stdin", { error: error.message }) }]);
      },
      get done() {
        return transport.finished;
      },
      async close() {
        await session?.close();
        await transport.close();
      },
    };
  },
});
