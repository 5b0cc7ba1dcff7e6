/**
 * The gateway's one HTTP listener: DNS-rebinding checks, authentication, then the mounted routes.
 *
 * Order matters and is fixed here: liveness probes first (they reveal nothing), then the Host and
 * Origin check, then routing, then authentication, and only then a route handler. A request
 * without valid credentials never reaches a service. Routes marked `public` (static assets such as
 * the dashboard's page, never data) skip authentication and their handler gets a caller with no
 * scopes.
 *
 * Request bodies are read here, after authentication and before any handler, with a size limit
 * (chunked bodies carry no length to check first) and a deadline: a client that trickles its body
 * gets 408 and frees its handler, so it cannot hold a handler, or a shutdown, hostage. `Deno.serve`
 * has no header or idle timeout of its own: a connection that never completes its headers costs
 * one socket until the client or the gateway goes away, but blocks nobody.
 * @module
 */
import { type Clock, settlesWithin, systemClock } from "../support/clock.ts";
import { concatBytes } from "../support/concat_bytes.ts";
import { InFlight } from "../support/in_flight.ts";
import { hasControlCharacter } from "../support/control_characters.ts";
import { jsonRpcRefusal } from "../support/jsonrpc_shape.ts";
import type { Authenticator } from "../auth/authenticator.ts";
import { unauthorizedResponse } from "../auth/authenticator.ts";
import type { HostVerdict } from "../auth/host_guard.ts";
import type { ProtectedResource } from "../auth/oauth_resource.ts";
import { principalOf, type TokenPayload } from "../auth/token_payload.ts";
import type { Logger } from "../support/logger.ts";
import type { HttpRoute } from "./http_route.ts";

/**
 * The caller when `--no-auth` is in force (loopback only): it may use the MCP endpoints and
 * nothing else unless `--no-auth-admin` is given too (see {@link HttpListenerOptions.anonymous}).
 */
export const ANONYMOUS: TokenPayload = {
  tenant: "default",
  scopes: ["mcp"],
  subject: "anonymous",
  principal: principalOf("anonymous"),
  anonymous: true,
};

/** The caller a `public` route's handler gets: no tenant, no scopes. */
export const PUBLIC_CALLER: TokenPayload = {
  tenant: "",
  scopes: [],
  subject: "public",
  principal: principalOf("public"),
};

/** What the listener needs. */
export interface HttpListenerOptions {
  host: string;
  port: number;
  /** `null` when authentication is disabled (`--no-auth`). */
  authenticator: Authenticator | null;
  /** The caller every request is when `authenticator` is null; {@link ANONYMOUS} by default. */
  anonymous?: TokenPayload;
  /** Builds the Host/Origin check once the bound port is known (port 0 picks one). */
  hostGuard: (port: number) => (request: Request) => HostVerdict;
  logger: Logger;
  maxBodyBytes: number;
  /** How long a request body may take to arrive before the request is refused with 408. */
  bodyTimeoutMs?: number;
  /**
   * With an OAuth issuer configured: serves its RFC 9728 metadata (public, like the probes) and
   * completes every 401/403 challenge with `resource_metadata`.
   */
  protectedResource?: ProtectedResource;
  /** Readiness: `ready` false answers 503 on /readyz with the reasons. */
  readiness: () => { ready: boolean; detail: Record<string, unknown> };
  /** Times body reads and the close; the real clock by default (network time). */
  clock?: Clock;
}

/** Default of {@link HttpListenerOptions.bodyTimeoutMs} (MCP_HTTP_BODY_TIMEOUT_MS). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;

/** How long {@link HttpListener.close} waits for responses still being written by default. */
const DEFAULT_CLOSE_TIMEOUT_MS = 5_000;

/** A mounted route as the listener serves it: its path, whether paths below it match, its methods. */
export interface MountedRoute {
  path: string;
  prefix: boolean;
  methods: string[];
}

/** A JSON error response with a stable code and a message saying what to do instead. */
export function jsonError(
  status: number,
  code: string,
  message: string,
  headers: HeadersInit = {},
): Response {
  return Response.json({ error: { code, message } }, { status, headers });
}

/**
 * The listener's refusal of a request before its route ran (the connection then closes): a
 * JSON-RPC error for a `jsonRpc` route, whose clients read one (`data.code` the stable code),
 * else the gateway's `{ error: { code, message } }`.
 */
function refusal(route: HttpRoute, status: number, code: string, message: string): Response {
  const headers = { "Connection": "close" };
  if (!route.jsonRpc) return jsonError(status, code, message, headers);
  return jsonRpcRefusal(status, code, message, headers);
}

/**
 * One path segment, percent-decoded, or why it is refused: it does not decode (malformed
 * percent-encoding), or it decodes to `.` or `..`, or to something holding a slash, a backslash
 * or a control character (line breaks, NUL). No route takes such an id, and letting one through
 * invites traversal (`..%2F..%2Fetc%2Fpasswd`) and header or file injection further down.
 */
export function decodeSegment(raw: string): { ok: true; segment: string } | {
  ok: false;
  why: string;
} {
  let segment: string;
  try {
    segment = decodeURIComponent(raw);
  } catch {
    return { ok: false, why: "it is not valid percent-encoded UTF-8" };
  }
  if (segment === "." || segment === "..") return { ok: false, why: "it has a dot segment" };
  if (/[\/\\]/.test(segment) || hasControlCharacter(segment)) {
    return { ok: false, why: "a segment holds a slash, a backslash or a control character" };
  }
  return { ok: true, segment };
}

/** A 400 `invalid_path` for a path no route could mean. */
export function invalidPath(pathname: string, why: string): Response {
  return jsonError(
    400,
    "invalid_path",
    `The path ${JSON.stringify(pathname.slice(0, 200))} is refused: ${why}; ids in paths are ` +
      "plain names, percent-encoded once",
  );
}

/** The request target's path as the client sent it: `new URL()` would resolve its dot segments. */
function rawPath(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start === -1) return "/";
  const end = url.slice(start).search(/[?#]/);
  return end === -1 ? url.slice(start) : url.slice(start, start + end);
}

/** Serves mounted routes on one `Deno.serve` listener. */
export class HttpListener {
  #options: HttpListenerOptions;
  #clock: Clock;
  #routes = new Map<string, HttpRoute>();
  #server: Deno.HttpServer<Deno.NetAddr> | undefined;
  #guard: ((request: Request) => HostVerdict) | undefined;
  /** Requests whose response has not been fully written yet. */
  readonly #inFlight = new InFlight();
  /** Of those, requests that are not GET or HEAD (not streams or probes), taken before a stop. */
  readonly #requests = new InFlight();
  #stopping = false;

  constructor(options: HttpListenerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Mounts a route; a path can be mounted once. */
  mount(route: HttpRoute): void {
    if (this.#routes.has(route.path)) {
      throw new TypeError(`Cannot mount "${route.path}": the path is already served`);
    }
    this.#routes.set(route.path, route);
  }

  /** What is mounted, in mount order (for the OpenAPI document's test). */
  routes(): MountedRoute[] {
    return [...this.#routes.values()].map((r) => ({
      path: r.path,
      prefix: r.prefix === true,
      methods: [...r.methods],
    }));
  }

  /** Starts listening; resolves with the bound address. */
  start(): Promise<Deno.NetAddr> {
    const { host, port } = this.#options;
    return new Promise((resolve, reject) => {
      try {
        this.#server = Deno.serve({
          hostname: host,
          port,
          onListen: (addr) => {
            this.#guard = this.#options.hostGuard((addr as Deno.NetAddr).port);
            resolve(addr as Deno.NetAddr);
          },
          onError: (error) => {
            this.#options.logger.error("HTTP handler failed", { error: String(error) });
            return jsonError(500, "internal", "Internal error; see the gateway log");
          },
        }, (request, info) => this.#serve(request, info));
      } catch (error) {
        reject(error);
      }
    });
  }

  /** The bound address, once started. */
  get addr(): Deno.NetAddr | undefined {
    return this.#server?.addr;
  }

  /** Requests whose response is still being written (long-lived streams included). */
  get inFlight(): number {
    return this.#inFlight.count;
  }

  /**
   * Stops taking new work: /readyz answers 503 `stopping` (so a balancer moves traffic away) and
   * every other request but /healthz gets 503 `shutting_down` with `Connection: close`. Responses
   * already being written carry on.
   */
  beginStopping(): void {
    this.#stopping = true;
  }

  /**
   * Requests taken before a stop (other than GET and HEAD: streams and probes) whose response is
   * not written yet: a stop's drain waits for them, since they may not have reached a session yet.
   */
  get requestsInFlight(): number {
    return this.#requests.count;
  }

  /** Resolves once {@link requestsInFlight} is 0 (one promise for every caller until then). */
  requestsSettled(): Promise<void> {
    return this.#requests.idle();
  }

  #serve(request: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>): Promise<Response> {
    this.#inFlight.enter();
    const counted = !this.#stopping && request.method !== "GET" && request.method !== "HEAD";
    if (counted) this.#requests.enter();
    const done = () => {
      if (counted) this.#requests.leave();
      this.#inFlight.leave();
    };
    info.completed.then(done, done);
    return this.handle(request);
  }

  /** Handles one request (also usable in process, without a socket). */
  async handle(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/healthz") {
      return Response.json({ status: "ok" });
    }
    if (request.method === "GET" && url.pathname === "/readyz") {
      const { ready, detail } = this.#options.readiness();
      if (this.#stopping) return Response.json({ status: "stopping", ...detail }, { status: 503 });
      return Response.json({ status: ready ? "ready" : "not_ready", ...detail }, {
        status: ready ? 200 : 503,
      });
    }
    if (this.#stopping) {
      return jsonError(
        503,
        "shutting_down",
        "The gateway is shutting down and takes no new requests; retry once it is back",
        { "Connection": "close", "Retry-After": "5" },
      );
    }
    const resource = this.#options.protectedResource;
    if (resource?.serves(url.pathname)) return resource.respond(request);
    const response = await this.#route(request, url);
    return resource ? resource.challenge(response, url.pathname) : response;
  }

  async #route(request: Request, url: URL): Promise<Response> {
    this.#guard ??= this.#options.hostGuard(this.#options.port);
    const verdict = this.#guard(request);
    if (!verdict.ok) return jsonError(verdict.status, "forbidden", verdict.message);
    const path = rawPath(request.url);
    for (const raw of path.split("/")) {
      if (raw === "") continue;
      const decoded = decodeSegment(raw);
      if (!decoded.ok) return invalidPath(path, decoded.why);
    }

    const route = this.#routes.get(url.pathname) ?? this.#prefixRoute(url.pathname);
    if (!route) {
      return jsonError(
        404,
        "not_found",
        `Nothing is served at ${url.pathname}; MCP clients connect to ${
          [...this.#routes.keys()].join(" or ")
        }`,
      );
    }
    if (!route.methods.includes(request.method)) {
      return jsonError(
        405,
        "method_not_allowed",
        `${request.method} is not supported on ${url.pathname}; use ${route.methods.join(", ")}`,
        { Allow: route.methods.join(", ") },
      );
    }
    const length = Number(request.headers.get("content-length") ?? "0");
    if (length > this.#options.maxBodyBytes) {
      return this.#tooLarge(route, `Request body of ${length} bytes`);
    }

    // Static assets only (see HttpRoute.public); the caller gets no scopes.
    if (route.public) return await route.handle(request, PUBLIC_CALLER);
    let auth = this.#options.anonymous ?? ANONYMOUS;
    if (this.#options.authenticator) {
      const result = await this.#options.authenticator.authenticate(request);
      if (!result.ok) {
        return unauthorizedResponse(result, this.#options.protectedResource?.tokenHint);
      }
      auth = result.payload;
    }
    // Read only for a caller who got this far: an anonymous client never makes the gateway
    // buffer a body.
    const timeoutMs = this.#options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
    const body = await readBody(request, this.#options.maxBodyBytes, timeoutMs, this.#clock);
    if (body === "too_large") return this.#tooLarge(route, "Request body");
    if (body === "timeout") {
      return refusal(
        route,
        408,
        "request_timeout",
        `The request body did not arrive within ${timeoutMs} ms (MCP_HTTP_BODY_TIMEOUT_MS); send it at once`,
      );
    }
    if (route.rawBody) return await route.handle(request, auth, body);
    return await route.handle(body === null ? request : withBody(request, body), auth);
  }

  #tooLarge(route: HttpRoute, what: string): Response {
    return refusal(
      route,
      413,
      "payload_too_large",
      `${what} exceeds the ${this.#options.maxBodyBytes}-byte limit (MCP_MAX_MESSAGE_BYTES)`,
    );
  }

  #prefixRoute(pathname: string): HttpRoute | undefined {
    for (const route of this.#routes.values()) {
      if (route.prefix && pathname.startsWith(route.path + "/")) return route;
    }
    return undefined;
  }

  /**
   * Stops accepting connections, lets requests in flight finish (at most `timeoutMs`), then shuts
   * the server down gracefully, again for at most `timeoutMs`. A connection that still holds the
   * shutdown after that (a client trickling a body it began before the stop) is left to the
   * process's exit, logged, rather than waited for. Resolves true when everything closed.
   */
  async close(timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS): Promise<boolean> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return true;
    this.#stopping = true;
    if (this.#inFlight.count > 0) {
      await settlesWithin(this.#clock, timeoutMs, this.#inFlight.idle());
    }
    const open = this.#inFlight.count;
    // Not an abort: it drops answers Deno has taken but not yet flushed to the socket.
    const shutdown = server.shutdown();
    if (await settlesWithin(this.#clock, timeoutMs, shutdown)) return true;
    shutdown.catch(() => {});
    this.#options.logger.warn(
      `HTTP listener closed with ${
        Math.max(open, this.#inFlight.count)
      } request(s) still open after ` +
        `${2 * timeoutMs} ms; their connections end with the process`,
    );
    return false;
  }
}

/** Whether `promise` settled within `ms`. */
/**
 * The whole body, or why not: `too_large` past `max` bytes, `timeout` when it has not all arrived
 * after `timeoutMs`; null when the request has none. The stream is released, never cancelled:
 * cancelling it makes Deno hold the connection (and a graceful shutdown) until the client stops.
 */
export async function readBody(
  request: Request,
  max: number,
  timeoutMs: number,
  clock: Clock = systemClock,
): Promise<Uint8Array | "too_large" | "timeout" | null> {
  // A GET or HEAD cannot carry a body on to the handler; what it sent is never read.
  if (request.body === null || request.method === "GET" || request.method === "HEAD") return null;
  // A default reader: on a request body Deno's BYOB path costs several times more per request.
  const reader = request.body.getReader();
  // Out of time, the lock is released: that rejects the read waiting for the rest (no race of
  // promises per chunk, and the stream is not cancelled).
  let released = false;
  const limit = clock.setTimeout(() => {
    released = true;
    reader.releaseLock();
  }, timeoutMs);
  const chunks: Uint8Array[] = [];
  let size = 0;
  let ended = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        ended = true;
        break;
      }
      size += next.value.length;
      if (size > max) return "too_large";
      chunks.push(next.value);
    }
  } catch {
    // Out of time, or the client went away mid-body: whatever answers, nobody reads it.
    return "timeout";
  } finally {
    limit.cancel();
    // A body read to its end holds nothing; releasing costs a TypeError (stack and all) per request.
    if (!ended && !released) reader.releaseLock();
  }
  return concatBytes(chunks, size);
}

/** The same request with its body already read. */
function withBody(request: Request, body: Uint8Array): Request {
  return new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body: body as BodyInit,
  });
}
