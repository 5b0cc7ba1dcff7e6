/**
 * Inbound Streamable HTTP transport at `/mcp` (POST, GET, DELETE), one SDK
 * `WebStandardStreamableHTTPServerTransport` per session.
 *
 * A session belongs to the caller that opened it: a request that carries its `Mcp-Session-Id`
 * with another caller's credentials is refused.
 * @module
 */
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import {
  bearerToken,
  definePlugin,
  GatewayError,
  isRequestId,
  type ServedSession,
  sessionLimitResponse,
  type TimerHandle,
  type TokenPayload,
  unreadLimitName,
  UnreadOutput,
  type UnreadOverflow,
} from "../../core/plugin_api/mod.ts";
import { DirectRequests } from "./direct_requests.ts";
import { releaseJsonStreams } from "./json_stream_release.ts";

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  owner: TokenPayload;
  /** The upstream a `/mcp/<server_id>` session is scoped to. */
  upstream?: string;
  /** Ids of this session's requests awaiting their response. */
  inFlight: Set<string | number>;
  served?: ServedSession;
  /** POSTs of one request, answered without the SDK transport's request handling. */
  direct: DirectRequests;
  /** When the session last received a request (clock ms). */
  lastSeen: number;
  /** Open GET streams: a client listening is not idle. */
  streams: number;
}

/** `/mcp` → undefined; `/mcp/<server_id>` → the id; anything else → null. */
function upstreamOf(pathname: string): string | undefined | null {
  if (pathname === "/mcp") return undefined;
  const id = decodeURIComponent(pathname.slice("/mcp/".length));
  return /^[a-z0-9][a-z0-9_-]*$/.test(id) ? id : null;
}

/** A JSON-RPC error body as the Streamable HTTP spec answers transport-level failures. */
function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status });
}

/** The body as text, or undefined past `max` bytes. */
async function readLimited(
  request: Request,
  max: number,
  read: Uint8Array | null | undefined,
): Promise<string | undefined> {
  // The listener reads this route's bodies (bounded, with a deadline); an in-process caller may not.
  const bytes = read ?? new Uint8Array(await request.arrayBuffer());
  return bytes.length > max ? undefined : decoder.decode(bytes);
}

const decoder = new TextDecoder();

/** Forgets a request id once its response leaves, so the id may be reused. */
function trackResponses(
  transport: WebStandardStreamableHTTPServerTransport,
  inFlight: Set<string | number>,
): void {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if ("id" in message && ("result" in message || "error" in message)) {
      inFlight.delete(message.id as string | number);
    }
    return send(message, options);
  };
}

function sameCaller(a: TokenPayload, b: TokenPayload): boolean {
  return a.tenant === b.tenant && a.subject === b.subject;
}

export default definePlugin({
  name: "transport-streamable-http",
  version: "1.0.0",
  kind: "transport",
  transport: "streamable-http",
  description: "MCP Streamable HTTP at /mcp, in SSE or JSON response mode",
  permissions: { net: true },
  create(ctx) {
    const sessions = new Map<string, Session>();
    const { maxMessageBytes, httpResponseMode, httpSessionIdleMs } = ctx.settings;
    // The same bound as legacy SSE: what one stream may hold for a client that does not read it.
    const limits = {
      maxBytes: ctx.settings.sseMaxQueueBytes,
      maxMessages: ctx.settings.sseMaxQueueMessages,
    };

    // A client may leave without DELETE (the SDK client's close() sends none): its session would
    // hold its SDK Server and maps forever. Idle ones — no request, nothing in flight, no open
    // stream for httpSessionIdleMs — are closed; the client gets 404 and initializes again.
    const sweepEveryMs = Math.max(1000, Math.min(60_000, Math.floor(httpSessionIdleMs / 4)));
    let sweep: TimerHandle | undefined;
    let closed = false;
    // The sweep runs only while sessions exist: no timer outlives the last one (or a failed start).
    const scheduleSweep = () => {
      if (closed || httpSessionIdleMs <= 0 || sweep || sessions.size === 0) return;
      sweep = ctx.clock.setTimeout(() => {
        void closeIdle().finally(() => {
          sweep = undefined;
          scheduleSweep();
        });
      }, sweepEveryMs);
    };
    async function closeIdle(): Promise<void> {
      const now = ctx.clock.now();
      for (const [id, session] of sessions) {
        const idle = session.inFlight.size === 0 && session.streams === 0 &&
          now - session.lastSeen >= httpSessionIdleMs;
        if (!idle) continue;
        sessions.delete(id);
        ctx.logger.info("closed an idle Streamable HTTP session", {
          session: id,
          idleSeconds: Math.round((now - session.lastSeen) / 1000),
        });
        await session.served?.close().catch(() => {});
        await session.transport.close().catch(() => {});
      }
    }

    /**
     * A stream whose client stopped reading was cut off: says so, and cancels the requests it
     * carried (their output has nowhere to go), as if the client had sent notifications/cancelled.
     */
    function cutOff(session: Session, ids: RequestId[], overflow: UnreadOverflow): void {
      const limit = unreadLimitName(overflow.limit);
      ctx.logger.warn(
        (ids.length === 0
          ? "closed the GET /mcp stream of a Streamable HTTP session whose client does not read it " +
            "(it may open a new one): "
          : `closed a Streamable HTTP response stream whose client does not read it and cancelled ` +
            `its request(s) ${ids.map((id) => JSON.stringify(id)).join(", ")}: `) +
          `${overflow.queuedMessages} message(s), ${overflow.queuedBytes} bytes unread (${limit})`,
        {
          session: session.transport.sessionId,
          tenant: session.owner.tenant,
          subject: session.owner.subject,
          limit,
        },
      );
      for (const id of ids) {
        session.inFlight.delete(id);
        session.transport.onmessage?.({
          jsonrpc: "2.0",
          method: "notifications/cancelled",
          params: {
            requestId: id,
            reason: `the client did not read the request's response stream (${limit})`,
          },
        });
      }
    }

    /**
     * A request the client cancelled gets no answer: without this its id would stay in flight (the
     * session never idle) and a direct request's waiter and HTTP response would be held forever.
     */
    function forgetCancelled(session: Session, body: unknown): void {
      for (const m of Array.isArray(body) ? body : [body]) {
        if (m?.method !== "notifications/cancelled") continue;
        const id = m.params?.requestId;
        if (isRequestId(id) && session.inFlight.delete(id)) session.direct.cancel(id);
      }
    }

    /**
     * The SDK transport's SSE response, relayed through bounded output: the SDK enqueues on a push
     * stream that never refuses a chunk, so its stream is drained as it fills and what the client
     * has not read waits, counted, here. `ids` are the POST's requests; none for the GET stream,
     * which counts as open (the session is not idle) until its body ends or the client goes.
     */
    function bounded(session: Session, response: Response, ids: RequestId[]): Response {
      if (!response.body || !response.headers.get("content-type")?.includes("text/event-stream")) {
        return response;
      }
      const listening = ids.length === 0;
      if (listening) session.streams++;
      let open = true;
      const done = () => {
        if (open && listening) session.streams--;
        open = false;
        session.lastSeen = ctx.clock.now();
      };
      const reader = response.body.getReader();
      const out = new UnreadOutput(limits, {
        oncancel: () => {
          done();
          reader.cancel().catch(() => {});
        },
        onoverflow: (overflow) => {
          done();
          reader.cancel().catch(() => {});
          cutOff(session, ids, overflow);
        },
      });
      void (async () => {
        try {
          for (;;) {
            const { value, done: ended } = await reader.read();
            if (ended) break;
            if (!out.write(value)) return;
          }
        } catch { /* the SDK's stream errored: end ours */ }
        done();
        out.close();
      })();
      return new Response(out.stream, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    }

    async function open(
      request: Request,
      auth: TokenPayload,
      upstream: string | undefined,
      read: Uint8Array | null | undefined,
    ): Promise<Response> {
      let body: unknown;
      try {
        body = JSON.parse(await readLimited(request, Infinity, read) ?? "");
      } catch (error) {
        return rpcError(400, -32700, `Parse error: ${(error as Error).message}`);
      }
      const initializes = Array.isArray(body)
        ? body.some(isInitializeRequest)
        : isInitializeRequest(body);
      if (!initializes) {
        return rpcError(
          400,
          -32000,
          "Bad Request: no Mcp-Session-Id header; start a session with an initialize request, then send its Mcp-Session-Id on every request",
        );
      }
      const session: Partial<Session> & { owner: TokenPayload } = {
        owner: auth,
        inFlight: new Set(),
        lastSeen: ctx.clock.now(),
        streams: 0,
        ...(upstream === undefined ? {} : { upstream }),
      };
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        enableJsonResponse: httpResponseMode === "json",
        maxRequestBodySize: maxMessageBytes,
        onsessioninitialized: (id) => {
          sessions.set(id, session as Session);
          scheduleSweep();
        },
        onsessionclosed: (id) => void sessions.delete(id),
      });
      session.transport = transport;
      if (httpResponseMode === "json") releaseJsonStreams(transport);
      const direct = session.direct = new DirectRequests(
        transport,
        httpResponseMode,
        ctx.clock,
        limits,
        (id, overflow) => cutOff(session as Session, [id], overflow),
      );
      trackResponses(transport, session.inFlight!);
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
        direct.abandonAll("it was closed before the call was answered");
      };
      try {
        const bearer = bearerToken(request);
        session.served = await ctx.serve(transport, {
          transport: "streamable-http",
          auth,
          ...(upstream === undefined ? {} : { upstream }),
          ...(bearer === undefined ? {} : { bearer }),
        });
      } catch (error) {
        await transport.close();
        // Full (MCP_MAX_SESSIONS, MCP_MAX_SESSIONS_PER_TENANT): a retryable 503, not a 404.
        if (error instanceof GatewayError && error.code === "session_limit") {
          return sessionLimitResponse(error);
        }
        return rpcError(404, -32001, (error as Error).message);
      }
      const response = await transport.handleRequest(request, { parsedBody: body });
      // A refused initialize (bad Accept header, bad version) leaves no session to keep.
      if (transport.sessionId === undefined) await session.served.close();
      return response;
    }

    /**
     * A POST on a live session. Request ids must be unique among the session's requests in flight:
     * the SDK transport maps responses to HTTP responses by id, so a second request with the same
     * id would leave the first HTTP response waiting forever (found by the fuzzer).
     */
    async function post(
      request: Request,
      session: Session,
      read: Uint8Array | null | undefined,
    ): Promise<Response> {
      const text = await readLimited(request, maxMessageBytes, read);
      if (text === undefined) {
        return rpcError(
          413,
          -32600,
          `Request body exceeds ${maxMessageBytes} bytes (MCP_MAX_MESSAGE_BYTES)`,
        );
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch (error) {
        return rpcError(400, -32700, `Parse error: ${(error as Error).message}`);
      }
      const ids = (Array.isArray(body) ? body : [body]).flatMap((m) =>
        m && typeof m === "object" && "method" in m && "id" in m &&
          (typeof m.id === "string" || typeof m.id === "number")
          ? [m.id as string | number]
          : []
      );
      const duplicate = ids.find((id, i) => session.inFlight.has(id) || ids.indexOf(id) !== i);
      if (duplicate !== undefined) {
        return rpcError(
          400,
          -32600,
          `Invalid Request: id ${
            JSON.stringify(duplicate)
          } is already used by a request in flight on this session; use a new id`,
        );
      }
      for (const id of ids) session.inFlight.add(id);
      forgetCancelled(session, body);
      const single = session.direct.qualifies(request, body);
      if (single) {
        return session.direct.serve(request, single as typeof single & { id: string | number });
      }
      try {
        return bounded(
          session,
          await session.transport.handleRequest(request, { parsedBody: body }),
          ids,
        );
      } catch (error) {
        for (const id of ids) session.inFlight.delete(id);
        throw error;
      }
    }

    return {
      mode: "http",
      routes: [{
        path: "/mcp",
        prefix: true,
        methods: ["POST", "GET", "DELETE"],
        rawBody: true,
        handle(request, auth, read) {
          const upstream = upstreamOf(new URL(request.url).pathname);
          if (upstream === null) {
            return Promise.resolve(rpcError(
              404,
              -32001,
              "Not found: use /mcp for the whole gateway or /mcp/<server_id> for one upstream",
            ));
          }
          const id = request.headers.get("mcp-session-id");
          if (id === null) {
            if (request.method === "POST") return open(request, auth, upstream, read);
            return Promise.resolve(rpcError(
              400,
              -32000,
              `Bad Request: ${request.method} /mcp needs the Mcp-Session-Id header of a session opened with initialize`,
            ));
          }
          const session = sessions.get(id);
          if (!session || session.upstream !== upstream) {
            return Promise.resolve(rpcError(
              404,
              -32001,
              "Session not found: it expired or was closed; send a new initialize request without Mcp-Session-Id",
            ));
          }
          if (!sameCaller(session.owner, auth)) {
            return Promise.resolve(rpcError(
              403,
              -32000,
              "Forbidden: this session belongs to another caller; open your own with initialize",
            ));
          }
          session.lastSeen = ctx.clock.now();
          if (request.method === "GET") {
            return session.transport.handleRequest(request).then((r) => bounded(session, r, []));
          }
          if (request.method !== "POST") return session.transport.handleRequest(request);
          return post(request, session, read);
        },
      }],
      async close() {
        closed = true;
        sweep?.cancel();
        const open = [...sessions.values()];
        sessions.clear();
        await Promise.allSettled(open.map(async (s) => {
          await s.served?.close();
          await s.transport.close();
        }));
      },
    };
  },
});
