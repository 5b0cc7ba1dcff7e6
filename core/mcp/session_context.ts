/**
 * What every handler family of one inbound session shares (tools, resources, prompts,
 * completion, logging): the caller, the catalog it sees, the session's server and how to install
 * a handler on it. The bridge builds one per session; each family's context extends it with the
 * few services that family needs.
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { toMcpError } from "../support/errors.ts";
import type { CallContext } from "../governance/tool_governance.ts";
import type { SessionInfo } from "../plugin_api/mod.ts";
import type { CatalogView, Route } from "../proxy/proxy_manager.ts";
import type { CallPipeline, ItemCall } from "./call_pipeline.ts";
import type { RequestRegistrar } from "./request_handler.ts";
import type { InboundSession } from "./upstream_context.ts";

/** One session as its handlers see it. */
export interface SessionContext {
  /** The session's id (search-mode state and subscriptions are kept per session). */
  id: string;
  info: SessionInfo;
  server: Server;
  /** The session as forwarded requests see it (log level, tenant, passthrough bearer). */
  inbound: InboundSession;
  caller: CallContext;
  /** The upstream catalog: the aggregate, or one upstream alone on `/mcp/<server_id>`. */
  view: CatalogView | undefined;
  /** Native tools and engine definitions are in scope (false on `/mcp/<server_id>`). */
  native: boolean;
  /** Items per page of every list. */
  pageSize: number;
  /** Installs a request handler on the session's server, inside its request span. */
  handle: RequestRegistrar;
  /** Waits (at most MCP_PROXY_STARTUP_WAIT) for the upstreams' first start before a list. */
  settled(): Promise<void>;
  /** Refuses (as a wire error) a use of an item the caller may not reach. */
  requireAccess(
    surface: string,
    kind: ItemCall["kind"],
    name: string,
    route: Route | undefined,
    args?: Record<string, unknown>,
  ): Promise<void>;
  /** Whether a list shows the caller this item (the same rules as a use, minus arguments). */
  mayList(kind: ItemCall["kind"], name: string, route: Route | undefined): boolean;
}

/**
 * Resources and prompts pass the pipeline's item stages (quarantine, tenant globs, connector);
 * `scoped` says the caller sees one upstream under its own names.
 */
export function itemAccess(
  pipeline: CallPipeline,
  caller: CallContext,
  scoped: boolean,
): Pick<SessionContext, "requireAccess" | "mayList"> {
  return {
    requireAccess: async (surface, kind, name, route, args = {}) => {
      try {
        await pipeline.useItem(
          caller,
          { kind, name, scoped, ...(route ? { route } : {}) },
          surface,
          args,
        );
      } catch (error) {
        throw toMcpError(error);
      }
    },
    mayList: (kind, name, route) =>
      pipeline.itemRefusal(caller, { kind, name, scoped, ...(route ? { route } : {}) }) ===
        undefined,
  };
}
