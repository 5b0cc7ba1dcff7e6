/**
 * An HTTP route on the gateway's listener: what transports mount and what the operator surface
 * serves, behind the listener's auth and Host checks.
 * @module
 */
import type { TokenPayload } from "../auth/token_payload.ts";

/** An HTTP route a transport mounts on the gateway's listener, behind auth and Host checks. */
export interface HttpRoute {
  /** HTTP methods served; others get 405. */
  methods: string[];
  /** Exact path, e.g. `/mcp`. */
  path: string;
  /** Also serve every path below `path` (e.g. `/mcp/<server_id>`). */
  prefix?: boolean;
  /**
   * Served without credentials, after the Host/Origin check; the handler gets a caller with no
   * scopes. For static assets only (the dashboard's page), never data.
   */
  public?: true;
  /**
   * Hands the handler the body the listener read, as bytes (third argument), with the original
   * request (its body already consumed) instead of a copy rebuilt around the body.
   */
  rawBody?: true;
  /**
   * An MCP endpoint: the listener's own refusals of a request to it (a body too large or too
   * slow) are JSON-RPC errors (-32600, `data.code`), as its clients expect, not the admin API's
   * `{ error: { code, message } }`.
   */
  jsonRpc?: true;
  /** Handles a request from an authenticated caller. */
  handle(request: Request, auth: TokenPayload, body?: Uint8Array | null): Promise<Response>;
}
