/**
 * The gateway's one HTTP listener: DNS-rebinding checks, authentication, then the mounted routes.
 *
 * Order matters and is fixed here: liveness probes first (they reveal nothing), then the Host and
 * Origin check, then routing, then authentication, and only then a route handler. A request
 * without valid credentials never reaches a service. Routes marked `public` (static assets such as
 * the dashboard's page, never data) skip authentication and their handler gets a caller with no
 * scopes.
 * @module
 */
import type { Authenticator } from "./auth/authenticator.ts";
import { unauthorizedResponse } from "./auth/authenticator.ts";
import type { HostVerdict } from "./auth/host_guard.ts";
import type { TokenPayload } from "./auth/token_payload.ts";
import type { Logger } from "./logger.ts";
import type { HttpRoute } from "./plugin_api.ts";

/** The caller when `--no-auth` is in force (loopback only). */
export const ANONYMOUS: TokenPayload = {
  tenant: "default",
  scopes: ["admin"],
  subject: "anonymous",
};

/** The caller a `public` route's handler gets: no tenant, no scopes. */
export const PUBLIC_CALLER: TokenPayload = { tenant: "", scopes: [], subject: "public" };

/** What the listener needs. */
export interface HttpListenerOptions {
  host: string;
  port: number;
  /** `null` when authentication is disabled (`--no-auth`). */
  authenticator: Authenticator | null;
  /** Builds the Host/Origin check once the bound port is known (port 0 picks one). */
  hostGuard: (port: number) => (request: Request) => HostVerdict;
  logger: Logger;
  maxBodyBytes: number;
  /** Readiness: `ready` false answers 503 on /readyz with the reasons. */
  readiness: () => { ready: boolean; detail: Record<string, unknown> };
}

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

/** Serves mounted routes on one `Deno.serve` listener. */
export class HttpListener {
  #options: HttpListenerOptions;
  #routes = new Map<string, HttpRoute>();
  #server: Deno.HttpServer<Deno.NetAddr> | undefined;
  #guard: ((request: Request) => HostVerdict) | undefined;

  constructor(options: HttpListenerOptions) {
    this.#options = options;
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
        }, (request) => this.handle(request));
      } catch (error) {
        reject(error);
      }
    });
  }

  /** The bound address, once started. */
  get addr(): Deno.NetAddr | undefined {
    return this.#server?.addr;
  }

  /** Handles one request (also usable in process, without a socket). */
  async handle(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/healthz") {
      return Response.json({ status: "ok" });
    }
    if (request.method === "GET" && url.pathname === "/readyz") {
      const { ready, detail } = this.#options.readiness();
      return Response.json({ status: ready ? "ready" : "not_ready", ...detail }, {
        status: ready ? 200 : 503,
      });
    }
    this.#guard ??= this.#options.hostGuard(this.#options.port);
    const verdict = this.#guard(request);
    if (!verdict.ok) return jsonError(verdict.status, "forbidden", verdict.message);

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
      return jsonError(
        413,
        "payload_too_large",
        `Request body of ${length} bytes exceeds the ${this.#options.maxBodyBytes}-byte limit (MCP_MAX_MESSAGE_BYTES)`,
      );
    }

    // Static assets only (see HttpRoute.public); the caller gets no scopes.
    if (route.public) return await route.handle(request, PUBLIC_CALLER);
    let auth = ANONYMOUS;
    if (this.#options.authenticator) {
      const result = await this.#options.authenticator.authenticate(request);
      if (!result.ok) return unauthorizedResponse(result);
      auth = result.payload;
    }
    return await route.handle(request, auth);
  }

  #prefixRoute(pathname: string): HttpRoute | undefined {
    for (const route of this.#routes.values()) {
      if (route.prefix && pathname.startsWith(route.path + "/")) return route;
    }
    return undefined;
  }

  /** Stops accepting connections and ends open ones. */
  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    await server.shutdown();
  }
}
