/**
 * Builds the context a forwarded call carries back to its inbound client: progress with the
 * inbound progress token, log messages at the session's level, and server→client requests
 * (sampling, elicitation, roots) relayed on the same request.
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  ListRootsResultSchema,
  type LoggingLevel,
  LoggingLevelSchema,
  McpError,
  type ProgressToken,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { RelayedRequest, UpstreamCallContext } from "../proxy/child_server_handle.ts";
import type { PassthroughBearer } from "../proxy/passthrough_bearer.ts";

const SEVERITY = new Map(LoggingLevelSchema.options.map((level, i) => [level, i]));

/** Per-session state the context reads. */
export interface InboundSession {
  server: Server;
  /** The level the client set with logging/setLevel; messages below it are not sent. */
  logLevel?: LoggingLevel;
  /** The caller's tenant and the session's id, which decide what upstream traffic may reach it. */
  tenant?: string;
  sessionId?: string;
  /** The caller's bearer token for an upstream that forwards it (`auth: passthrough`), else undefined. */
  bearerFor?: (upstreamId: string) => PassthroughBearer | undefined;
}

const FEATURE: Record<RelayedRequest["method"], "sampling" | "elicitation" | "roots"> = {
  "sampling/createMessage": "sampling",
  "elicitation/create": "elicitation",
  "roots/list": "roots",
};

/**
 * Server→client requests one forwarded call may make: each is a prompt a person may have to read
 * or a model call someone pays for, and an upstream sending thousands in one call is a flood.
 */
export const MAX_RELAYED_PER_CALL = 100;

/**
 * A sampling request's params as the client gets them: without `includeContext`. The client sees
 * the gateway as one server, so even `thisServer` would hand one upstream the context of every
 * other upstream (and a client that never declared `sampling.context` must not get it at all).
 */
function withoutContext(params: Record<string, unknown>): Record<string, unknown> {
  if (!("includeContext" in params)) return params;
  const { includeContext: _dropped, ...rest } = params;
  return rest;
}

/** The context of one forwarded request. */
export function upstreamCallContext(
  session: InboundSession,
  extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  progressToken: ProgressToken | undefined,
  upstreamId: string,
): UpstreamCallContext {
  const notify = (notification: ServerNotification) =>
    extra.sendNotification(notification).catch(() => {/* the client left; nothing to do */});
  const pass = session.bearerFor?.(upstreamId);
  let relayed = 0;
  return {
    signal: extra.signal,
    ...(session.tenant === undefined ? {} : { tenant: session.tenant }),
    ...(session.sessionId === undefined ? {} : { sessionId: session.sessionId }),
    ...(pass === undefined ? {} : "bearer" in pass ? { bearer: pass.bearer } : {
      bearerRefused: pass.refused,
    }),
    ...(progressToken === undefined ? {} : {
      onProgress: (progress) =>
        void notify({ method: "notifications/progress", params: { ...progress, progressToken } }),
    }),
    onLog: (params) => {
      const level = params.level as LoggingLevel;
      const floor = session.logLevel;
      if (floor && (SEVERITY.get(level) ?? 0) < (SEVERITY.get(floor) ?? 0)) return;
      void notify({ method: "notifications/message", params: { ...params, level } });
    },
    relay: async (request, signal) => {
      const feature = FEATURE[request.method];
      const capabilities = session.server.getClientCapabilities() ?? {};
      if (!capabilities[feature]) {
        throw new McpError(
          ErrorCode.MethodNotFound,
          `Upstream "${upstreamId}" asked for ${request.method}, but the connected client does not ` +
            `declare the "${feature}" capability`,
        );
      }
      if (++relayed > MAX_RELAYED_PER_CALL) {
        throw new McpError(
          ErrorCode.InvalidRequest,
          `Upstream "${upstreamId}" asked for more than ${MAX_RELAYED_PER_CALL} sampling, ` +
            "elicitation or roots requests in one call; the rest are refused",
        );
      }
      const sampling = request.method === "sampling/createMessage";
      const schema = sampling
        ? CreateMessageResultSchema
        : request.method === "elicitation/create"
        ? ElicitResultSchema
        : ListRootsResultSchema;
      const params = request.params ?? {};
      return await extra.sendRequest(
        {
          method: request.method,
          params: sampling ? withoutContext(params) : params,
        } as ServerRequest,
        schema,
        { signal },
      ) as Record<string, unknown>;
    },
  };
}
