/**
 * The gateway as an OAuth 2.1 protected resource, per the MCP authorization spec: it publishes
 * RFC 9728 metadata naming its identity provider, and every 401/403 it sends carries
 * `resource_metadata="…"`, so a client that knows nothing but the gateway's URL can find where
 * to get a token, for which resource and with which scope.
 *
 * The metadata is served at `/.well-known/oauth-protected-resource` followed by the resource's
 * path (`…/mcp`, RFC 9728 §3.1, what the header points to) and at the bare well-known path,
 * which clients of earlier spec revisions try.
 * @module
 */
import type { OAuthProtectedResourceMetadata } from "@modelcontextprotocol/sdk/shared/auth.js";
import { providerScopeFor, type ScopeMap } from "./scope_map.ts";

/** The well-known path of RFC 9728 protected resource metadata. */
export const RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource";

/** What the gateway advertises. */
export interface ProtectedResourceOptions {
  /** MCP_AUTH_OAUTH_RESOURCE: the URL clients connect to, and the audience of their tokens. */
  resource: string;
  /** MCP_AUTH_OAUTH_ISSUER: the authorization server that issues tokens for it. */
  issuer: string;
  /** Provider scope → gateway scopes; those granting `mcp` are the scopes advertised. */
  scopeMap: ScopeMap;
}

/** The gateway's protected-resource metadata and the challenges that point to it. */
export class ProtectedResource {
  /** The resource identifier (RFC 8707), as tokens carry it in `aud`. */
  readonly resource: string;
  /** The absolute URL of the metadata document, for `resource_metadata="…"`. */
  readonly metadataUrl: string;
  /** The paths the metadata is served at. */
  readonly paths: readonly string[];
  readonly #document: OAuthProtectedResourceMetadata;
  readonly #scopeMap: ScopeMap;

  constructor(options: ProtectedResourceOptions) {
    const url = new URL(options.resource);
    this.resource = options.resource;
    const suffix = url.pathname === "/" ? "" : url.pathname.replace(/\/$/, "");
    this.metadataUrl = new URL(RESOURCE_METADATA_PATH + suffix, url.origin).href;
    this.paths = [...new Set([RESOURCE_METADATA_PATH + suffix, RESOURCE_METADATA_PATH])];
    this.#scopeMap = options.scopeMap;
    this.#document = {
      resource: options.resource,
      authorization_servers: [options.issuer],
      // What a client of this resource (/mcp) needs, and no more: the MCP spec's clients ask for
      // every advertised scope when the challenge names none, and an agent has no use for admin.
      scopes_supported: [...options.scopeMap].filter(([, g]) => g.includes("mcp")).map(([p]) => p),
      bearer_methods_supported: ["header"],
      resource_name: "AGENT-33 MCP gateway",
    };
  }

  /** Whether `pathname` is one of the metadata's paths. */
  serves(pathname: string): boolean {
    return this.paths.includes(pathname);
  }

  /**
   * The metadata document for GET (and HEAD), CORS-readable by any page: it is public, carries
   * no credentials, and browser-based clients (the Inspector) fetch it from their own origin.
   */
  respond(request: Request): Response {
    const cors = {
      "Access-Control-Allow-Origin": "*",
      "Access-Control-Allow-Methods": "GET, OPTIONS",
      "Access-Control-Allow-Headers": "mcp-protocol-version, authorization",
    };
    if (request.method === "OPTIONS") return new Response(null, { status: 204, headers: cors });
    if (request.method !== "GET" && request.method !== "HEAD") {
      return Response.json(
        {
          error: {
            code: "method_not_allowed",
            message: `${request.method} is not supported on ${
              new URL(request.url).pathname
            }; use GET`,
          },
        },
        { status: 405, headers: { Allow: "GET, HEAD, OPTIONS", ...cors } },
      );
    }
    return Response.json(this.#document, {
      headers: { "Cache-Control": "max-age=300", ...cors },
    });
  }

  /**
   * A 401 or 403 with a Bearer challenge, completed for OAuth clients: `resource_metadata="…"`
   * added, and a `scope="…"` naming a gateway scope rewritten to the provider scope that grants
   * it. A 401 for the resource itself (`pathname` at or below its path) asks for the scope that
   * grants `mcp`: the MCP spec's clients request the challenge's scope, else every scope
   * advertised, and a client should not ask for `admin` to list tools. Any other response
   * comes back as it is.
   */
  challenge(response: Response, pathname: string): Response {
    if (response.status !== 401 && response.status !== 403) return response;
    const header = response.headers.get("www-authenticate");
    if (header === null || !/^bearer\b/i.test(header) || /resource_metadata=/.test(header)) {
      return response;
    }
    let rewritten = header.replace(/scope="([^"]*)"/, (_all, scope: string) => {
      const asked = scope.split(" ").map((s) => providerScopeFor(this.#scopeMap, s) ?? s);
      return `scope="${asked.join(" ")}"`;
    });
    const mcpScope = providerScopeFor(this.#scopeMap, "mcp");
    if (
      response.status === 401 && !/scope="/.test(rewritten) && mcpScope &&
      this.#covers(pathname)
    ) {
      rewritten += `, scope="${mcpScope}"`;
    }
    const headers = new Headers(response.headers);
    headers.set("www-authenticate", `${rewritten}, resource_metadata="${this.metadataUrl}"`);
    return new Response(response.body, {
      status: response.status,
      statusText: response.statusText,
      headers,
    });
  }

  #covers(pathname: string): boolean {
    const base = new URL(this.resource).pathname.replace(/\/$/, "");
    return base === "" || pathname === base || pathname.startsWith(base + "/");
  }

  /** The hint a refused client gets in the 401 body: where tokens come from. */
  get tokenHint(): string {
    return `get an access token from ${this.#document.authorization_servers![0]} for the ` +
      `resource ${this.resource} (its metadata: ${this.metadataUrl}) and send ` +
      '"Authorization: Bearer <token>"';
  }
}
