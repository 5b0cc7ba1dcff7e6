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
 * @module
 */
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import {
  type Logger,
  newSessionRecord,
  type ServedSession,
  type SessionChange,
  type SessionRecord,
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
  /** Writes to the GET stream here (the transport's own send, before {@link SharedCopies.relay}). */
  deliver?: (message: JSONRPCMessage) => Promise<void>;
}

const LIST_CHANGED = /^notifications\/(tools|resources|prompts)\/list_changed$/;
const SYNTHETIC_ID = "agent33-session-rebuild";

/** A JSON-RPC error body as the Streamable HTTP spec answers transport-level failures. */
export function rpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status });
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

/** The same caller: a session id is not a credential. */
export function sameCaller(a: { tenant: string; subject: string }, b: TokenPayload): boolean {
  return a.tenant === b.tenant && a.subject === b.subject;
}

/** Cluster-mode session copies of one replica. */
export class SharedCopies {
  readonly store: SharedSessions;
  #logger: Logger;
  #rebuilding = new Map<string, Promise<unknown>>();

  constructor(store: SharedSessions, logger: Logger) {
    this.store = store;
    this.#logger = logger;
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
    return ack.status === 202;
  }

  /**
   * Routes what a copy sends outside any request: to its GET stream when one is open here, else
   * (list_changed aside, see the module's rule) over the session's subject.
   */
  relay(copy: SharedCopy): void {
    const transport = copy.transport;
    const send = transport.send.bind(transport);
    transport.send = (message: JSONRPCMessage, options) => {
      if (
        copy.streams > 0 || options?.relatedRequestId !== undefined || "id" in message ||
        !("method" in message) || transport.sessionId === undefined
      ) return send(message, options);
      if (!LIST_CHANGED.test(message.method)) this.store.publish(transport.sessionId, message);
      return Promise.resolve();
    };
    copy.deliver = (message) => send(message);
  }

  /** A GET stream opened (`true`) or ended here: the replica hears the subject while one is open. */
  listening(copy: SharedCopy, open: boolean): void {
    const id = copy.transport.sessionId;
    if (id === undefined) return;
    if (open && copy.streams === 1 && !copy.unsubscribe) {
      copy.unsubscribe = this.store.subscribe(id, (message) => {
        void copy.deliver?.(message).catch(() => {});
      });
    } else if (!open && copy.streams === 0) {
      copy.unsubscribe?.();
      delete copy.unsubscribe;
    }
  }
}
