/**
 * A session's resources: `resources/list` and `resources/templates/list` (the engine's and the
 * upstreams' the caller may reach), `resources/read` (forwarded to the upstream serving the URI,
 * or read from the engine), `resources/subscribe` and `unsubscribe` (kept per session, forwarded
 * to the upstream), and the routing of an upstream's `notifications/resources/updated` to the
 * sessions that subscribed and may hear it.
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError, toMcpError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import { paginate } from "../support/pagination.ts";
import type { Route } from "../proxy/proxy_manager.ts";
import type { ResourceAudience } from "../proxy/upstream_handle.ts";
import { FORWARDED, forwardTraced } from "../tracing/upstream_span.ts";
import type { EngineCatalog } from "./engine_catalog.ts";
import { cursor, guard } from "./request_handler.ts";
import type { SessionContext } from "./session_context.ts";
import { MAX_ITEMS, MAX_SUBSCRIPTION_URI } from "./session_record.ts";
import { type InboundSession, upstreamCallContext } from "./upstream_context.ts";

/** A session as resource updates reach it. */
export interface SubscribedSession {
  server: Server;
  inbound: InboundSession;
  /** Upstream resources it subscribed to: {@link subscriptionKey} → the URI it used. */
  subscriptions: Map<string, string>;
}

/** What a session's resource handlers need beyond the session. */
export interface ResourceHandlersContext extends SessionContext {
  engine: EngineCatalog;
  /** This session's subscriptions (the same map as its {@link SubscribedSession}'s). */
  subscriptions: Map<string, string>;
  /** Every live session (an unsubscribe keeps the upstream's if another still wants it). */
  sessions(): Iterable<SubscribedSession>;
  logger: Logger;
}

/** Installs the resources handlers on the session. */
export function registerResourceHandlers(ctx: ResourceHandlersContext): void {
  registerResourceLists(ctx);
  registerResourceRead(ctx);
  registerSubscriptions(ctx);
}

function registerResourceLists(ctx: ResourceHandlersContext): void {
  const { view, native, mayList } = ctx;
  const resourceRoute = (uri: string) => view?.resolveResource(uri);
  ctx.handle(ListResourcesRequestSchema, async (request) => {
    await ctx.settled();
    return guard(() => {
      const resources = [
        ...(native ? ctx.engine.resources() : []).filter((r) =>
          mayList("resource", r.uri, undefined)
        ),
        ...(view?.resources() ?? []).filter((r) =>
          mayList("resource", r.uri, resourceRoute(r.uri))
        ),
      ];
      const page = paginate(resources, request.params?.cursor, ctx.pageSize);
      return { resources: page.items, ...cursor(page.nextCursor) };
    });
  });
  ctx.handle(ListResourceTemplatesRequestSchema, async (request) => {
    await ctx.settled();
    return guard(() => {
      const templates = [
        ...(native ? ctx.engine.resourceTemplates() : []).filter((t) =>
          mayList("resource-template", t.uriTemplate, undefined)
        ),
        ...(view?.resourceTemplates() ?? []).filter((t) =>
          mayList("resource-template", t.uriTemplate, resourceRoute(t.uriTemplate))
        ),
      ];
      const page = paginate(templates, request.params?.cursor, ctx.pageSize);
      return { resourceTemplates: page.items, ...cursor(page.nextCursor) };
    });
  });
}

function registerResourceRead(ctx: ResourceHandlersContext): void {
  const { view, native, inbound } = ctx;
  ctx.handle(ReadResourceRequestSchema, async (request, extra, span) => {
    const { uri } = request.params;
    const route = view?.resolveResource(uri);
    if (route && (!native || !uri.startsWith("agent33://"))) {
      await ctx.requireAccess("resources/read", "resource", uri, route);
      const upstream = upstreamCallContext(inbound, extra, undefined, route.handle.id);
      try {
        const result = await forwardTraced(
          span,
          route,
          FORWARDED.resourcesRead,
          upstream,
          (traced) => route.handle.readResource(route.original, traced),
        );
        // Contents carry the upstream's URIs; answer with the names this client used.
        return {
          ...result,
          contents: result.contents.map((c) => c.uri === route.original ? { ...c, uri } : c),
        };
      } catch (error) {
        throw toMcpError(error);
      }
    }
    await ctx.requireAccess("resources/read", "resource", uri, undefined);
    return guard(() => {
      const text = ctx.engine.read(uri);
      return { contents: [{ uri, mimeType: "application/json", text }] };
    });
  });
}

function registerSubscriptions(ctx: ResourceHandlersContext): void {
  const { view, inbound, subscriptions } = ctx;
  ctx.handle(SubscribeRequestSchema, async (request, extra, span) => {
    const { uri } = request.params;
    const route = view?.resolveResource(uri);
    if (!route) {
      throw toMcpError(
        new GatewayError(
          "not_found",
          `Cannot subscribe to "${uri}": only upstream resources change; engine resources are static`,
          { uri },
        ),
      );
    }
    await ctx.requireAccess("resources/subscribe", "resource", uri, route);
    const key = subscriptionKey(route);
    if (!subscriptions.has(key)) refuseBeyondLimit(uri, subscriptions.size);
    subscriptions.set(key, uri);
    try {
      await forwardTraced(
        span,
        route,
        FORWARDED.resourcesSubscribe,
        upstreamCallContext(inbound, extra, undefined, route.handle.id),
        (traced) => route.handle.subscribe(route.original, traced),
      );
    } catch (error) {
      subscriptions.delete(key);
      throw toMcpError(error);
    }
    await ctx.info.state?.changed({ subscribed: uri });
    return {};
  });

  ctx.handle(UnsubscribeRequestSchema, async (request, extra) => {
    const { uri } = request.params;
    const route = view?.resolveResource(uri);
    if (!route) return {};
    const key = subscriptionKey(route);
    subscriptions.delete(key);
    await ctx.info.state?.changed({ unsubscribed: uri });
    // Other sessions on the same instance may still want updates of this resource.
    const scope = route.handle.server.scope;
    const audience: ResourceAudience | undefined = scope === "tenant"
      ? { tenant: inbound.tenant ?? "" }
      : scope === "session"
      ? { sessionId: inbound.sessionId ?? "" }
      : undefined;
    const stillWanted = [...ctx.sessions()].some((s) =>
      s.subscriptions.has(key) && hears(s, audience)
    );
    if (!stillWanted) {
      await route.handle.unsubscribe(
        route.original,
        upstreamCallContext(inbound, extra, undefined, route.handle.id),
      ).catch((error) => ctx.logger.debug("upstream unsubscribe failed", { error: String(error) }));
    }
    return {};
  });
}

/** Tells each session that subscribed to the routed resource, and may hear it, of its update. */
export function routeResourceUpdate(
  sessions: Iterable<SubscribedSession>,
  route: Route,
  audience: ResourceAudience | undefined,
): void {
  const key = subscriptionKey(route);
  for (const session of sessions) {
    if (!hears(session, audience)) continue;
    const uri = session.subscriptions.get(key);
    if (uri === undefined) continue;
    session.server.sendResourceUpdated({ uri }).catch(() => {});
  }
}

/**
 * Refuses one more subscription past the session's bound, or one to a URI longer than a session
 * keeps: each is held (and forwarded upstream) for the session's life, so without a bound a
 * client could hold the gateway's memory with distinct URIs (400 of 100 KB each took 170 MB).
 */
function refuseBeyondLimit(uri: string, held: number): void {
  if (uri.length > MAX_SUBSCRIPTION_URI) {
    throw toMcpError(
      new GatewayError(
        "subscription_limit",
        `Cannot subscribe to a URI of ${uri.length} characters: a session keeps subscriptions to ` +
          `URIs of at most ${MAX_SUBSCRIPTION_URI}`,
        { max: MAX_SUBSCRIPTION_URI },
      ),
    );
  }
  if (held >= MAX_ITEMS) {
    throw toMcpError(
      new GatewayError(
        "subscription_limit",
        `Cannot subscribe to "${uri.slice(0, 200)}": this session holds ${held} subscriptions, ` +
          `the most one may; unsubscribe from one, or open another session`,
        { max: MAX_ITEMS },
      ),
    );
  }
}

/** One upstream resource, whatever name a session used for it: `<server>\0<upstream uri>`. */
export function subscriptionKey(route: Route): string {
  return `${route.handle.id}\u0000${route.original}`;
}

/** Whether a session may hear of an update with this audience (none: a shared server's). */
function hears(session: SubscribedSession, audience: ResourceAudience | undefined): boolean {
  if (audience === undefined) return true;
  return "tenant" in audience
    ? session.inbound.tenant === audience.tenant
    : session.inbound.sessionId === audience.sessionId;
}
