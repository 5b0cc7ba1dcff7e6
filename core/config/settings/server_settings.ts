/**
 * The environment variables of the MCP interface: transports, listener, bounds on sessions and messages: each declared once, with its
 * parser, default and meaning (core/config/settings/settings.ts joins the groups; docs are generated).
 * @module
 */
import { bool, int, list, oneOf, setting, text } from "./setting.ts";

/** Items per list page when MCP_LIST_PAGE_SIZE is unset: one page for any realistic fleet. */
export const DEFAULT_PAGE_SIZE = 10_000;

/** The variables of the MCP interface: transports, listener, bounds on sessions and messages. */
export const SERVER_SETTINGS = {
  MCP_SERVER_ENABLED: setting({
    group: "server",
    schema: bool("MCP_SERVER_ENABLED"),
    default: true,
    meaning: "Serve the MCP interface at all (HTTP still serves health probes when off)",
  }),
  MCP_SERVER_TRANSPORT: setting({
    group: "server",
    schema: oneOf<"stdio" | "http">("MCP_SERVER_TRANSPORT", ["stdio", "http"], { sse: "http" }),
    default: "http",
    meaning:
      "`stdio`, or `http` (Streamable HTTP at `/mcp` and legacy SSE at `/sse`); `sse` is accepted as `http`",
  }),
  MCP_SERVER_HOST: setting({
    group: "server",
    schema: text,
    default: "127.0.0.1",
    meaning: "HTTP bind address",
  }),
  MCP_SERVER_PORT: setting({
    group: "server",
    schema: int("MCP_SERVER_PORT", 0, 65535),
    default: 8787,
    meaning: "HTTP port (`0` picks a free one)",
  }),
  MCP_ALLOWED_HOSTS: setting({
    group: "server",
    schema: list,
    default: [],
    shownDefault: "loopback names + bind host",
    meaning: "Comma-separated `Host` values accepted",
  }),
  MCP_ALLOWED_ORIGINS: setting({
    group: "server",
    schema: list,
    default: [],
    shownDefault: "allowed hosts at the request's own port",
    meaning:
      "Comma-separated `Origin` values accepted besides those (e.g. the Inspector's `http://localhost:6274`)",
  }),
  MCP_MAX_MESSAGE_BYTES: setting({
    group: "server",
    schema: int("MCP_MAX_MESSAGE_BYTES", 1024, 1024 * 1024 * 1024),
    default: 4 * 1024 * 1024,
    meaning: "Largest JSON-RPC frame (stdio) or HTTP body",
  }),
  MCP_LIST_PAGE_SIZE: setting({
    group: "server",
    schema: int("MCP_LIST_PAGE_SIZE", 1, 100_000),
    default: DEFAULT_PAGE_SIZE,
    meaning:
      "Items per page of every MCP list: the default lists any realistic fleet in one page (5,000 tools in one round trip); a lower value pages with `nextCursor`",
  }),
  MCP_HTTP_RESPONSE_MODE: setting({
    group: "server",
    schema: oneOf("MCP_HTTP_RESPONSE_MODE", ["sse", "json"] as const),
    default: "sse",
    meaning: "Streamable HTTP POST answers as an `sse` stream or one `json` body",
  }),
  MCP_STDIO_TENANT: setting({
    group: "server",
    schema: text,
    default: "default",
    meaning: "Tenant of the trusted stdio parent",
  }),
  MCP_TOOL_DISCOVERY_MODE: setting({
    group: "server",
    schema: oneOf("MCP_TOOL_DISCOVERY_MODE", ["legacy", "search"] as const),
    default: "legacy",
    meaning:
      "`legacy` lists every tool; `search` lists natives plus `tool_search` / `tool_activate` (see [governance.md](governance.md#progressive-tool-discovery))",
  }),
  MCP_SHUTDOWN_GRACE_MS: setting({
    group: "server",
    schema: int("MCP_SHUTDOWN_GRACE_MS", 0, 600_000),
    default: 10_000,
    meaning:
      "On SIGTERM/SIGINT, milliseconds calls in flight get to finish before they are cut off (a second signal: at once)",
  }),
  MCP_HTTP_BODY_TIMEOUT_MS: setting({
    group: "server",
    schema: int("MCP_HTTP_BODY_TIMEOUT_MS", 100, 3_600_000),
    default: 30_000,
    meaning: "Milliseconds an HTTP request body may take to arrive; a slower one gets `408`",
  }),
  MCP_HTTP_SESSION_IDLE_SECONDS: setting({
    group: "server",
    schema: int("MCP_HTTP_SESSION_IDLE_SECONDS", 0, 7 * 86_400),
    default: 1800,
    meaning:
      "Streamable HTTP sessions with no request and no open stream for this long are closed (clients that leave without DELETE); `0` keeps them",
  }),
  MCP_MAX_SESSIONS: setting({
    group: "server",
    schema: int("MCP_MAX_SESSIONS", 1, 1_000_000),
    default: 1000,
    meaning:
      "MCP sessions open at once (all transports); past it `503`, JSON-RPC `-32000` ([security.md](security.md#limits-on-sessions-and-queues))",
  }),
  MCP_MAX_SESSIONS_PER_TENANT: setting({
    group: "server",
    schema: int("MCP_MAX_SESSIONS_PER_TENANT", 1, 1_000_000),
    default: 250,
    meaning: "MCP sessions one tenant may hold open at once; past it, `503` as above",
  }),
  MCP_SSE_MAX_QUEUE_BYTES: setting({
    group: "server",
    schema: int("MCP_SSE_MAX_QUEUE_BYTES", 1024, 1024 * 1024 * 1024),
    default: 16 * 1024 * 1024,
    meaning:
      "Bytes one SSE stream (legacy `/sse`, a Streamable HTTP POST stream or `GET /mcp`) may have unread; past it the stream is cut: a legacy SSE session is ended, a POST stream's requests cancelled, a GET stream closed ([security.md](security.md#limits-on-sessions-and-queues))",
  }),
  MCP_SSE_MAX_QUEUE_MESSAGES: setting({
    group: "server",
    schema: int("MCP_SSE_MAX_QUEUE_MESSAGES", 1, 1_000_000),
    default: 10_000,
    meaning: "Messages one SSE stream may have unread; past it, the same",
  }),
  MCP_MAX_IN_FLIGHT_PER_SESSION: setting({
    group: "server",
    schema: int("MCP_MAX_IN_FLIGHT_PER_SESSION", 1, 1_000_000),
    default: 128,
    meaning:
      'Requests one session (any transport) may have waiting for answers; one more gets JSON-RPC `-32000`, `data.code = "too_many_requests"`',
  }),
};
