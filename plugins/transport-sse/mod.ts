/**
 * Inbound legacy HTTP+SSE transport for older clients: `GET /sse` opens a session,
 * `POST /messages?sessionId=…` delivers the client's messages.
 * @module
 */
import {
  bearerToken,
  definePlugin,
  GatewayError,
  isJsonRpcMessage,
  jsonRpcRefusal,
  sameCaller,
  type ServedSession,
  sessionLimitResponse,
  type TokenPayload,
} from "../../core/plugin_api/mod.ts";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { SseSessionTransport } from "./sse_session_transport.ts";

interface Session {
  transport: SseSessionTransport;
  owner: TokenPayload;
  served: ServedSession;
}

const decoder = new TextDecoder();

/**
 * The POSTed JSON-RPC message, or the answer refusing it (type, size, parse, shape). `/messages`
 * is an MCP endpoint: every refusal of it is a JSON-RPC error (`data.code` the stable code), the
 * shape of the listener's own refusals of the route (too large, too slow).
 */
async function readMessage(
  request: Request,
  body: Uint8Array | null | undefined,
  max: number,
): Promise<JSONRPCMessage | Response> {
  if (
    !(request.headers.get("content-type") ?? "").toLowerCase().startsWith("application/json")
  ) {
    return jsonRpcRefusal(
      415,
      "unsupported_media_type",
      "Send the JSON-RPC message with Content-Type: application/json",
    );
  }
  // The listener read the body (bounded, with a deadline); in-process callers may not have.
  const bytes = body ?? new Uint8Array(await request.arrayBuffer());
  if (bytes.length > max) {
    return jsonRpcRefusal(
      413,
      "payload_too_large",
      `Message exceeds ${max} bytes (MCP_MAX_MESSAGE_BYTES)`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(bytes));
  } catch (e) {
    return Response.json(
      {
        jsonrpc: "2.0",
        id: null,
        error: { code: -32700, message: `Parse error: ${(e as Error).message}` },
      },
      { status: 400 },
    );
  }
  // The structural check agrees with the SDK's JSONRPCMessageSchema, without a zod parse.
  if (!isJsonRpcMessage(json)) {
    return Response.json(
      {
        jsonrpc: "2.0",
        id: null,
        error: {
          code: -32600,
          message: 'Invalid Request: expected one JSON-RPC 2.0 message with "jsonrpc": "2.0"',
        },
      },
      { status: 400 },
    );
  }
  return json;
}

export default definePlugin({
  name: "transport-sse",
  version: "1.0.0",
  kind: "transport",
  transport: "sse",
  description: "Legacy MCP HTTP+SSE (GET /sse, POST /messages) for 2024-11-05 clients",
  permissions: { net: true },
  create(ctx) {
    const sessions = new Map<string, Session>();
    const max = ctx.settings.maxMessageBytes;
    const limits = {
      maxBytes: ctx.settings.sseMaxQueueBytes,
      maxMessages: ctx.settings.sseMaxQueueMessages,
    };

    async function connect(request: Request, auth: TokenPayload): Promise<Response> {
      const transport = new SseSessionTransport("/messages", limits, { clock: ctx.clock });
      const bearer = bearerToken(request);
      let served: ServedSession;
      try {
        served = await ctx.serve(transport, {
          transport: "sse",
          auth,
          sessionId: transport.sessionId,
          ...(bearer === undefined ? {} : { bearer }),
        }, [{ closed: () => void sessions.delete(transport.sessionId) }]);
      } catch (error) {
        await transport.close();
        if (error instanceof GatewayError && error.code === "session_limit") {
          return sessionLimitResponse(error);
        }
        throw error;
      }
      transport.onoverflow = ({ queuedBytes, queuedMessages, limit }) =>
        ctx.logger.warn(
          "ended a legacy SSE session whose client does not read its /sse stream: " +
            `${queuedMessages} message(s), ${queuedBytes} bytes unread ` +
            (limit === "bytes" ? "(MCP_SSE_MAX_QUEUE_BYTES)" : "(MCP_SSE_MAX_QUEUE_MESSAGES)"),
          { session: transport.sessionId, tenant: auth.tenant, subject: auth.subject },
        );
      // Forgotten by the stage served with it, as the transport closes.
      sessions.set(transport.sessionId, { transport, owner: auth, served });
      return new Response(transport.stream, {
        headers: {
          "content-type": "text/event-stream",
          "cache-control": "no-cache, no-transform",
          "x-accel-buffering": "no",
        },
      });
    }

    async function post(
      request: Request,
      auth: TokenPayload,
      body?: Uint8Array | null,
    ): Promise<Response> {
      const id = new URL(request.url).searchParams.get("sessionId");
      if (!id) {
        return jsonRpcRefusal(
          400,
          "invalid_request",
          "Missing ?sessionId=; POST to the URL sent in the endpoint event of GET /sse",
        );
      }
      const session = sessions.get(id);
      if (!session) {
        return jsonRpcRefusal(
          404,
          "not_found",
          `Unknown session "${id}"; open a new one with GET /sse`,
        );
      }
      if (!sameCaller(session.owner, auth)) {
        return jsonRpcRefusal(
          403,
          "forbidden",
          "This session belongs to another caller; open your own with GET /sse",
        );
      }
      const json = await readMessage(request, body, max);
      if (json instanceof Response) return json;
      session.transport.receive(json);
      return new Response("Accepted", { status: 202 });
    }

    return {
      mode: "http",
      routes: [
        { path: "/sse", methods: ["GET"], handle: connect },
        { path: "/messages", methods: ["POST"], rawBody: true, jsonRpc: true, handle: post },
      ],
      async close() {
        const open = [...sessions.values()];
        sessions.clear();
        await Promise.allSettled(open.map(async (s) => {
          await s.served.close();
          await s.transport.close();
        }));
      },
    };
  },
});
