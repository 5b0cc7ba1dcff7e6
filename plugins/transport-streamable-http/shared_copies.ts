/**
 * SharedCopies: cluster mode (MCP_CLUSTER) for Streamable HTTP. Every session has a record in the
 * shared state; a replica serves a session it has never seen after one read of that record, by
 * rebuilding a copy — a transport under the same id and an SDK server fed the client's stored
 * initialize — and relays the session's notifications to the replica holding its GET stream.
 *
 * Who delivers what to the GET stream (each notification once):
 * - list_changed (tools, resources, prompts) is emitted only by the replica holding the stream:
 *   a fleet or policy change reaches every replica, and a session's own change (activations)
 *   reaches the holder through the record, whose copy then says tools/list_changed itself.
 * - Everything else sent outside a request (resources/updated, log messages) goes over the
 *   session's subject when this replica does not hold the stream; the holder writes it.
 * - What belongs to a request (its progress, logs, answer) rides on that POST's own response.
 *
 * The client's side crosses replicas too: its answer to a server-to-client request (sampling,
 * elicitation, roots) and its cancellation of a request may reach a replica other than the one
 * that asked or runs it. Requests to the client carry ids naming the asking replica
 * (`a33:<replica>:<id>`); an answer for another replica, or a cancellation of a request not in
 * flight here, goes over the subject, and the replica it names (or that runs it) takes it. Every
 * copy hears its session's subject while it exists.
 * @module
 */
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import {
  type Logger,
  newSessionRecord,
  sameCaller,
  type ServedSession,
  type SessionChange,
  type SessionRecord,
  type SessionStage,
  type SessionState,
  type SessionStateHooks,
  type SharedSessions,
  type TokenPayload,
} from "../../core/plugin_api/mod.ts";

/** What this module needs of a session copy. */
export interface SharedCopy {
  transport: WebStandardStreamableHTTPServerTransport;
  owner: TokenPayload;
  upstream?: string;
  served?: ServedSession;
  /** Open GET streams on this replica. */
  streams: number;
  inFlight: Set<string | number>;
  /** While a GET stream is open here: stops hearing the session's subject. */
  unsubscribe?: () => void;
  /** Writes to the GET stream here (the pipeline past {@link SharedCopies.relay}'s stage). */
  deliver?: (message: JSONRPCMessage) => Promise<void>;
}

const LIST_CHANGED = /^notifications\/(tools|resources|prompts)\/list_changed$/;
const SYNTHETIC_ID = "agent33-session-rebuild";

/** A JSON-RPC error body as the Streamable HTTP spec answers transport-level failures. */
export function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status });
}

/** The 404 of a path under /mcp that names no upstream. */
export function pathNotFound(): Response {
  return rpcError(
    404,
    -32001,
    "Not found: use /mcp for the whole gateway or /mcp/<server_id> for one upstream",
  );
}

/** The 404 of an unknown, expired or closed session. */
export function sessionNotFound(): Response {
  return rpcError(
    404,
    -32001,
    "Session not found: it expired or was closed; send a new initialize request without Mcp-Session-Id",
  );
}

/** The 403 of a session used with another caller's credentials. */
export function sessionForbidden(): Response {
  return rpcError(
    403,
    -32000,
    "Forbidden: this session belongs to another caller; open your own with initialize",
  );
}

/** Cluster-mode session copies of one replica. */
export class SharedCopies {
  readonly store: SharedSessions;
  #logger: Logger;
  #rebuilding = new Map<string, Promise<unknown>>();
  readonly #askPrefix: string;

  constructor(store: SharedSessions, logger: Logger) {
    this.store = store;
    this.#logger = logger;
    this.#askPrefix = `a33:${store.replicaId}:`;
  }

  /**
   * Keeps this replica's copies current: another replica's state change is applied to the copy,
   * a DELETE elsewhere drops it.
   */
  watch<C extends SharedCopy>(
    copyOf: (id: string) => C | undefined,
    drop: (id: string, copy: C, why: string) => void,
  ): void {
    this.store.onChange((id, record) => {
      const copy = copyOf(id);
      if (!copy) return;
      if (record) copy.served?.restore?.(this.stateOf(record));
      else drop(id, copy, "it was deleted on another replica");
    });
  }

  /**
   * The sweep's view of a copy: renews the record of one a client listens on (so it does not
   * expire while listened to), and says whether an unbusy one's record expired.
   */
  expiredCopy(id: string, copy: SharedCopy): boolean {
    if (copy.streams > 0) this.store.touch(id);
    return copy.streams === 0 && copy.inFlight.size === 0 && this.store.expired(id);
  }

  /** What a copy on this replica restores from a record (it relays only its own subscriptions). */
  stateOf(record: SessionRecord): SessionState {
    return {
      ...(record.logLevel === undefined ? {} : { logLevel: record.logLevel }),
      activations: record.activations,
      subscriptions: record.subscriptions.filter((s) => s.replica === this.store.replicaId)
        .map((s) => s.uri),
    };
  }

  /** Whether this replica's upstream holds a subscription of the session (its copy must stay). */
  holdsSubscriptions(id: string): boolean {
    return this.store.known(id)?.subscriptions.some((s) => s.replica === this.store.replicaId) ??
      false;
  }

  /**
   * The bridge's state hooks of a copy: each change is written to the record before the request
   * that made it is answered, then applied back (another replica may have changed it meanwhile).
   */
  hooks(copy: SharedCopy, initial?: SessionRecord): SessionStateHooks {
    return {
      ...(initial ? { initial: this.stateOf(initial) } : {}),
      changed: async (change) => {
        const id = copy.transport.sessionId;
        if (id === undefined) return;
        try {
          const record = await this.store.change(id, (r) => this.#apply(r, change));
          if (record) copy.served?.restore?.(this.stateOf(record));
        } catch (error) {
          this.#logger.warn(
            "could not share a session's state change; other replicas serve it with the previous state",
            { error: String(error) },
          );
        }
      },
    };
  }

  #apply(record: SessionRecord, change: SessionChange): SessionRecord {
    if ("logLevel" in change) return { ...record, logLevel: change.logLevel };
    if ("activations" in change) return { ...record, activations: [...change.activations] };
    const others = record.subscriptions.filter((s) =>
      s.uri !== ("subscribed" in change ? change.subscribed : change.unsubscribed)
    );
    if ("unsubscribed" in change) return { ...record, subscriptions: others };
    return {
      ...record,
      subscriptions: [...others, { uri: change.subscribed, replica: this.store.replicaId }]
        .slice(-256),
    };
  }

  /**
   * Stores the record of a session just initialized here; a Response when it could not be (the
   * caller closes the session): 400 for parameters too large to share, 503 when the state is out.
   */
  async opened(
    id: string,
    body: unknown,
    auth: TokenPayload,
    upstream: string | undefined,
    now: number,
  ): Promise<Response | undefined> {
    const init = (Array.isArray(body) ? body[0] : body) as {
      params: { protocolVersion: string; capabilities: unknown; clientInfo: unknown };
    };
    try {
      const record = newSessionRecord({
        params: init.params,
        tenant: auth.tenant,
        subject: auth.subject,
        principal: auth.principal,
        ...(upstream === undefined ? {} : { upstream }),
        replica: this.store.replicaId,
        now,
      });
      await this.store.create(id, record);
      return undefined;
    } catch (error) {
      if (error instanceof RangeError) {
        return rpcError(400, -32600, `Invalid Request: ${error.message}`);
      }
      this.#logger.warn("could not store a new session for the other replicas", {
        error: String(error),
      });
      return rpcError(
        503,
        -32000,
        "Cannot open a session: the replicas' shared state (NATS JetStream) did not store it; retry shortly",
      );
    }
  }

  /**
   * The record of a session this replica holds no copy of (one read), checked against the
   * caller: a Response (404 unknown or expired or for another path, 403 another caller's, 503
   * the shared state unreachable) when it may not be served here.
   */
  async lookup(
    id: string,
    auth: TokenPayload,
    upstream: string | undefined,
  ): Promise<SessionRecord | Response> {
    let record: SessionRecord | null;
    try {
      record = await this.store.load(id);
    } catch (error) {
      this.#logger.warn("could not read a shared session record", { error: String(error) });
      return rpcError(
        503,
        -32000,
        "Cannot reach this session: the replicas' shared state (NATS JetStream) did not answer; retry shortly",
      );
    }
    if (!record || record.upstream !== upstream) return sessionNotFound();
    // A record without a principal (written by an older replica, before callers had one) is
    // nobody's: 404, as for a session that is gone, which tells its client to initialize again
    // (MCP), so a rolling upgrade costs a client a new session, never another caller its own.
    if (record.principal === undefined) {
      this.store.forget(id);
      return sessionNotFound();
    }
    // A session id is not a credential.
    if (!sameCaller(record, auth)) {
      this.store.forget(id);
      return sessionForbidden();
    }
    return record;
  }

  /**
   * A copy of a session this replica has not seen: its record read once and checked against the
   * caller, then `build` makes the copy. Concurrent first requests share one rebuild (and a
   * different caller among them is refused).
   */
  rebuild<C extends { owner: TokenPayload }>(
    id: string,
    auth: TokenPayload,
    upstream: string | undefined,
    build: (record: SessionRecord) => Promise<C | Response>,
  ): Promise<C | Response> {
    const running = this.#rebuilding.get(id) as Promise<C | Response> | undefined;
    if (running) {
      return running.then((copy) =>
        copy instanceof Response || sameCaller(copy.owner, auth) ? copy : sessionForbidden()
      );
    }
    const promise = this.lookup(id, auth, upstream)
      .then((record) => record instanceof Response ? record : build(record))
      .finally(() => this.#rebuilding.delete(id));
    this.#rebuilding.set(id, promise);
    return promise;
  }

  /**
   * Initializes a fresh copy's transport and SDK server as the client once did: its stored
   * initialize (the answer is discarded), then notifications/initialized, both under its id.
   */
  async initialize(
    transport: WebStandardStreamableHTTPServerTransport,
    id: string,
    record: SessionRecord,
    url: string,
  ): Promise<boolean> {
    const post = (headers: Record<string, string> = {}) =>
      new Request(url, {
        method: "POST",
        headers: {
          accept: "application/json, text/event-stream",
          "content-type": "application/json",
          ...headers,
        },
      });
    const answer = await transport.handleRequest(post(), {
      parsedBody: {
        jsonrpc: "2.0",
        id: SYNTHETIC_ID,
        method: "initialize",
        params: {
          protocolVersion: record.protocolVersion,
          capabilities: record.capabilities,
          clientInfo: record.clientInfo,
        },
      },
    });
    await answer.text();
    if (!answer.ok || transport.sessionId !== id) return false;
    const ack = await transport.handleRequest(post({ "mcp-session-id": id }), {
      parsedBody: { jsonrpc: "2.0", method: "notifications/initialized" },
    });
    if (ack.status !== 202) return false;
    await this.#resubscribe(transport, id, record, () => post({ "mcp-session-id": id }));
    return true;
  }

  /**
   * Subscriptions the record says this replica holds, while it has no copy: this process is a new
   * one (a restart), whose upstreams never heard of them. They are made again, as the client made
   * them; one its upstream now refuses is dropped from the record.
   */
  async #resubscribe(
    transport: WebStandardStreamableHTTPServerTransport,
    id: string,
    record: SessionRecord,
    post: () => Request,
  ): Promise<void> {
    for (const [i, uri] of this.stateOf(record).subscriptions.entries()) {
      const answer = await transport.handleRequest(post(), {
        parsedBody: {
          jsonrpc: "2.0",
          id: `${SYNTHETIC_ID}-${i}`,
          method: "resources/subscribe",
          params: { uri },
        },
      });
      if (/"result"\s*:/.test(await answer.text())) continue;
      this.#logger.info(
        "dropped a subscription its upstream refused when its session was rebuilt",
        {
          uri: uri.slice(0, 256),
        },
      );
      await this.store.change(id, (r) => this.#apply(r, { unsubscribed: uri })).catch(() => {});
    }
  }

  /**
   * The copy's stage of its session's pipeline, outermost of the transport's own: routes what a
   * copy sends outside any request to its GET stream when one is open here, else (list_changed
   * aside, see the module's rule) over the session's subject.
   */
  relay(copy: SharedCopy): SessionStage {
    const transport = copy.transport;
    return {
      attach: (link) => void (copy.deliver = (message) => link.send(message)),
      send: (message: JSONRPCMessage, options, next) => {
        // A request to the client: its id names this replica, so its answer finds the way back.
        if ("method" in message && "id" in message) {
          return next({ ...message, id: `${this.#askPrefix}${message.id}` }, options);
        }
        if (
          copy.streams > 0 || options?.relatedRequestId !== undefined || "id" in message ||
          !("method" in message) || transport.sessionId === undefined
        ) return next(message, options);
        if (!LIST_CHANGED.test(message.method)) this.store.publish(transport.sessionId, message);
        return Promise.resolve();
      },
    };
  }

  /**
   * Hears the session's subject for as long as the copy lives (call once its id is known):
   * notifications for its GET stream, and client messages about its own requests, which go to
   * `receive` (the transport's message handler, with the plugin's bookkeeping).
   */
  attach(copy: SharedCopy, receive: (message: JSONRPCMessage) => void): void {
    const id = copy.transport.sessionId;
    if (id === undefined || copy.unsubscribe) return;
    copy.unsubscribe = this.store.subscribe(id, (message, kind) => {
      if (kind === "notify") {
        if (copy.streams > 0) void copy.deliver?.(message).catch(() => {});
        return;
      }
      const local = this.#local(copy, message);
      if (local) receive(local);
    });
  }

  /**
   * A POST's messages minus those for another replica, which go there over the subject: answers
   * to another replica's requests, and cancellations of requests not in flight here (kept too:
   * harmless here). Answers to this replica's requests get back their own ids. Undefined when
   * nothing is left to handle here.
   */
  route(copy: SharedCopy, body: unknown): unknown {
    const id = copy.transport.sessionId;
    if (id === undefined) return body;
    const kept: unknown[] = [];
    for (const message of Array.isArray(body) ? body : [body]) {
      const m = message as Record<string, unknown> | null;
      const answer = typeof m?.id === "string" && m.id.startsWith("a33:") && !("method" in m);
      if (answer) {
        const local = this.#local(copy, m as unknown as JSONRPCMessage);
        if (local) kept.push(local);
        else this.store.publish(id, m as unknown as JSONRPCMessage, "client");
        continue;
      }
      const cancelled = m?.method === "notifications/cancelled" &&
        !copy.inFlight.has((m.params as { requestId?: string | number } | undefined)?.requestId!);
      if (cancelled) this.store.publish(id, m as unknown as JSONRPCMessage, "client");
      kept.push(message);
    }
    if (kept.length === 0) return undefined;
    return Array.isArray(body) ? kept : kept[0];
  }

  /** A client message as this copy handles it, or undefined when it is another replica's. */
  #local(copy: SharedCopy, message: JSONRPCMessage): JSONRPCMessage | undefined {
    if ("method" in message) {
      const requestId = (message.params as { requestId?: string | number } | undefined)?.requestId;
      return requestId !== undefined && copy.inFlight.has(requestId) ? message : undefined;
    }
    const id = "id" in message ? message.id : undefined;
    if (typeof id !== "string" || !id.startsWith(this.#askPrefix)) return undefined;
    const own = id.slice(this.#askPrefix.length);
    return { ...message, id: /^\d+$/.test(own) ? Number(own) : own } as JSONRPCMessage;
  }
}
