/**
 * A session's `logging/setLevel`: the level below which upstream log messages relayed to this
 * client are dropped (upstream_context.ts applies it).
 * @module
 */
import { SetLevelRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { SessionContext } from "./session_context.ts";

/** What the logging handler needs of the session. */
export type LoggingHandlersContext = Pick<SessionContext, "handle" | "inbound" | "info">;

/** Installs logging/setLevel on the session. */
export function registerLoggingHandlers(ctx: LoggingHandlersContext): void {
  ctx.handle(SetLevelRequestSchema, async (request) => {
    ctx.inbound.logLevel = request.params.level;
    // Cluster mode: the other replicas' copies of the session learn the level too.
    await ctx.info.state?.changed({ logLevel: request.params.level });
    return {};
  });
}
