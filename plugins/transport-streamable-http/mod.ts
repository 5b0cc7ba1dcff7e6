/**
 * Inbound Streamable HTTP transport at `/mcp` (POST, GET, DELETE), one SDK
 * `WebStandardStreamableHTTPServerTransport` per session.
 *
 * A session belongs to the caller that opened it: a request that carries its `Mcp-Session-Id`
 * with another caller's credentials is refused.
 * @module
 */
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  isInitializeRequest,
  type JSONRPCMessage,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import {
  bearerToken,
  definePlugin,
  GatewayError,
  sameCaller,
  type ServedSession,
  SessionCache,
  sessionLimitResponse,
  type SessionRecord,
  type SessionStage,
  type TimerHandle,
  type TokenPayload,
  unreadLimitName,
  UnreadOutput,
  type UnreadOverflow,
} from "../../core/plugin_api/mod.ts";
import { DirectRequests } from "./direct_requests.ts";
import { releaseJsonStreams } from "./json_stream_release.ts";
import {
  forgetCancelled,
  readLimited,
  requestIds,
  trackResponses,
  upstreamOf,
} from "./session_requests.ts";
import {
  pathNotFound,
  rpcError,
  sessionForbidden,
  sessionNotFound,
  SharedCopies,
} from "./shared_copies.ts";

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
  /** This transport's own stages of its pipeline (direct requests, response tracking, relay). */
  stages: SessionStage[];
  /** Cluster mode: see {@link SharedCopies}. */
  unsubscribe?: () => void;
  deliver?: (message: JSONRPCMessage) => Promise<void>;
  pinned(): boolean;
}

export default definePlugin({
  name: "transport-streamable-http",
  version: "1.0.0",
  kind: "transport",
  transport: "streamable-http",
  description: "MCP Streamable HTTP at /mcp, in SSE or JSON response mode",
  permissions: { net: true },
  async create(ctx) {
    const { maxMessageBytes, httpResponseMode, httpSessionIdleMs, maxSessions } = ctx.settings;
    // Cluster mode: sessions are shared records, and these are this replica's copies of them.
    const shared = ctx.openSharedSessions
      ? new SharedCopies(await ctx.openSharedSessions(), ctx.logger)
      : undefined;
    const sessions = new SessionCache<Session>(shared ? maxSessions : Infinity, (s) => s.pinned());
    shared?.watch((id) => sessions.peek(id), (id, copy, why) => void drop(id, copy, why));
    /** Closes this replica's copy of a session (cluster mode: the record stays). */
    async function drop(id: string, session: Session, why: string): Promise<void> {
      sessions.delete(id);
      shared?.store.forget(id);
      ctx.logger.debug(`closed a Streamable HTTP session copy: ${why}`);
      await session.served?.close().catch(() => {});
      await session.transport.close().catch(() => {});
    }
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
      for (const [id, session] of [...sessions.entries()]) {
        if (shared?.expiredCopy(id, session)) {
          await drop(id, session, "its shared record expired");
          continue;
        }
        if (session.pinned() || now - session.lastSeen < httpSessionIdleMs) continue;
        sessions.delete(id);
        shared?.store.forget(id);
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
        session.direct.deliver({
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
      const session = newSession(auth, upstream, () => crypto.randomUUID());
      const refused = await serveSession(session, request, auth, upstream);
      if (refused) return refused;
      const response = await session.transport.handleRequest(request, { parsedBody: body });
      const id = session.transport.sessionId;
      // A refused initialize (bad Accept header, bad version) leaves no session to keep.
      if (id === undefined) await session.served!.close();
      else if (shared) {
        // Stored before the client hears the id, so its next request may land on any replica.
        const failed = await shared.opened(id, body, auth, upstream, ctx.clock.now());
        if (failed) {
          await drop(id, session, "its record could not be stored");
          return failed;
        }
      }
      return response;
    }

    /** A session's transport and bookkeeping, not yet served; `newId` names it at initialize. */
    function newSession(
      auth: TokenPayload,
      upstream: string | undefined,
      newId: () => string,
    ): Session {
      const session: Partial<Session> & { owner: TokenPayload } = {
        owner: auth,
        inFlight: new Set(),
        lastSeen: ctx.clock.now(),
        streams: 0,
        // Busy, listened on, or (cluster) relaying a subscription: not idle, not dropped for room.
        pinned: () =>
          session.streams! > 0 || session.inFlight!.size > 0 ||
          (shared?.holdsSubscriptions(session.transport?.sessionId ?? "") ?? false),
        ...(upstream === undefined ? {} : { upstream }),
      };
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: newId,
        enableJsonResponse: httpResponseMode === "json",
        maxRequestBodySize: maxMessageBytes,
        onsessioninitialized: (id) => {
          shared?.attach(session as Session, (message) => {
            forgetCancelled(session.inFlight!, session.direct!, message);
            session.transport!.onmessage?.(message);
          });
          for (const [old, copy] of sessions.set(id, session as Session)) {
            void drop(old, copy, "the most copies MCP_MAX_SESSIONS allows are held");
          }
          scheduleSweep();
        },
        onsessionclosed: async (id) => {
          sessions.delete(id);
          // DELETE on any replica ends the session on all of them.
          await shared?.store.remove(id).catch((error) =>
            ctx.logger.warn("could not delete a shared session record", { error: String(error) })
          );
        },
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
      const closed = () => {
        if (transport.sessionId) {
          if (sessions.peek(transport.sessionId) === session) sessions.delete(transport.sessionId);
          shared?.store.forget(transport.sessionId);
        }
        session.unsubscribe?.();
        direct.abandonAll("it was closed before the call was answered");
      };
      // Outermost of these, the relay renames a request to the client for the way back (direct too).
      session.stages = [direct, trackResponses(session.inFlight!, closed)];
      if (shared) session.stages.push(shared.relay(session as Session));
      return session as Session;
    }

    /** Serves a new session through the kernel; a Response when it was refused (closed then). */
    async function serveSession(
      session: Session,
      request: Request,
      auth: TokenPayload,
      upstream: string | undefined,
      record?: SessionRecord,
    ): Promise<Response | undefined> {
      const bearer = bearerToken(request);
      const info = {
        transport: "streamable-http",
        auth,
        ...(upstream === undefined ? {} : { upstream }),
        ...(bearer === undefined ? {} : { bearer }),
        ...(shared ? { state: shared.hooks(session, record) } : {}),
      };
      for (let attempt = 0;; attempt++) {
        try {
          session.served = await ctx.serve(session.transport, info, session.stages);
          return undefined;
        } catch (error) {
          // Full: in cluster mode a copy no one uses makes room (it can be rebuilt), once.
          const full = error instanceof GatewayError && error.code === "session_limit";
          const perTenant = full && error.data?.limit === "MCP_MAX_SESSIONS_PER_TENANT";
          const victim = full && shared && attempt === 0 &&
            sessions.evictOne((s) => !perTenant || s.owner.tenant === auth.tenant);
          if (victim) {
            await drop(victim[0], victim[1], "room was needed for another session");
            continue;
          }
          await session.transport.close();
          // Full (MCP_MAX_SESSIONS, MCP_MAX_SESSIONS_PER_TENANT): a retryable 503, not a 404.
          if (full) return sessionLimitResponse(error);
          return rpcError(404, -32001, (error as Error).message);
        }
      }
    }

    /** A request on a session this replica holds (or just rebuilt), from its own caller only. */
    function serve(
      session: Session,
      request: Request,
      auth: TokenPayload,
      upstream: string | undefined,
      read: Uint8Array | null | undefined,
    ): Promise<Response> {
      if (session.upstream !== upstream) return Promise.resolve(sessionNotFound());
      if (!sameCaller(session.owner, auth)) return Promise.resolve(sessionForbidden());
      const id = session.transport.sessionId!;
      if (shared) {
        if (shared.expiredCopy(id, session)) {
          return drop(id, session, "its shared record expired").then(sessionNotFound);
        }
        shared.store.touch(id);
      }
      session.lastSeen = ctx.clock.now();
      if (request.method === "GET") {
        return session.transport.handleRequest(request).then((r) => bounded(session, r, []));
      }
      if (request.method !== "POST") return session.transport.handleRequest(request);
      return post(request, session, read);
    }

    /** Cluster mode: a copy of a session this replica has not seen (or the refusal). */
    function rebuild(
      id: string,
      request: Request,
      auth: TokenPayload,
      upstream: string | undefined,
    ): Promise<Session | Response> {
      return shared!.rebuild(id, auth, upstream, async (record) => {
        const session = newSession(auth, upstream, () => id);
        const refused = await serveSession(session, request, auth, upstream, record);
        if (refused) return refused;
        if (await shared!.initialize(session.transport, id, record, request.url)) return session;
        await drop(id, session, "its stored initialize was refused");
        return rpcError(500, -32603, "Cannot rebuild this session here; initialize again");
      });
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
      // Cluster mode: an answer or cancellation for another replica goes there.
      if (shared) body = shared.route(session, body);
      if (body === undefined) return new Response(null, { status: 202 });
      const ids = requestIds(body);
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
      forgetCancelled(session.inFlight, session.direct, body);
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
        jsonRpc: true,
        handle(request, auth, read) {
          const upstream = upstreamOf(new URL(request.url).pathname);
          if (upstream === null) {
            return Promise.resolve(pathNotFound());
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
          if (!session) {
            if (!shared) return Promise.resolve(sessionNotFound());
            return rebuild(id, request, auth, upstream).then((copy) =>
              copy instanceof Response ? copy : serve(copy, request, auth, upstream, read)
            );
          }
          return serve(session, request, auth, upstream, read);
        },
      }],
      async close() {
        closed = true;
        sweep?.cancel();
        const open = [...sessions.entries()].map(([, s]) => s);
        sessions.clear();
        await Promise.allSettled(open.map(async (s) => {
          await s.served?.close();
          await s.transport.close();
        }));
      },
    };
  },
});
