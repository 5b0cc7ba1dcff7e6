/**
 * Runs an allowed native tool for an inbound session, with the context a tool receives: the
 * caller's auth, the call's abort signal and span, progress sent with the call's progress token,
 * and sampling relayed to the caller's own model when the client offers it.
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  type CallToolResult,
  CreateMessageResultWithToolsSchema,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import type { NativeTool, SessionInfo, ToolCallContext } from "../plugin_api/mod.ts";
import type { TraceSpan } from "../tracing/gateway_tracer.ts";
import type { HandlerExtra, ToolCallRequest } from "./tool_call_lane.ts";

/** What a native call needs of its session. */
export interface NativeCallSession {
  info: SessionInfo;
  server: Server;
  logger: Logger;
}

/** Runs `tool`; its own failure is an `isError` result, a GatewayError a wire error. */
export async function runNative(
  session: NativeCallSession,
  tool: NativeTool,
  request: ToolCallRequest,
  extra: HandlerExtra,
  span: TraceSpan | undefined,
): Promise<CallToolResult> {
  const { name } = request.params;
  const args = request.params.arguments ?? {};
  const progressToken = request.params._meta?.progressToken;
  const ctx: ToolCallContext = {
    auth: session.info.auth,
    signal: extra.signal,
    ...(request.params._meta === undefined ? {} : { meta: request.params._meta }),
    ...(span === undefined ? {} : { span }),
    // Engine agents may use the caller's own model; only when the client offers sampling.
    ...(session.server.getClientCapabilities()?.sampling
      ? {
        sample: async (params: Record<string, unknown>, signal?: AbortSignal) =>
          await extra.sendRequest(
            { method: "sampling/createMessage", params } as ServerRequest,
            CreateMessageResultWithToolsSchema,
            { signal: signal ?? extra.signal },
          ) as Record<string, unknown>,
      }
      : {}),
    progress: async (progress, total, message) => {
      if (progressToken === undefined) return;
      await extra.sendNotification({
        method: "notifications/progress",
        params: {
          progressToken,
          progress,
          ...(total === undefined ? {} : { total }),
          ...(message === undefined ? {} : { message }),
        },
      });
    },
  };
  try {
    return await tool.handler(args, ctx);
  } catch (error) {
    if (error instanceof GatewayError) throw error.toMcpError();
    // A tool's own failure is a result the model can read, not a protocol error.
    const message = error instanceof Error ? error.message : String(error);
    session.logger.warn("native tool failed", { tool: name, error: message });
    return {
      isError: true,
      content: [{ type: "text", text: `Tool "${name}" failed: ${message}` }],
    } satisfies CallToolResult;
  }
}
