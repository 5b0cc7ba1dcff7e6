/**
 * Gateway configuration: environment variables (and an optional `.env`), overridden by CLI flags,
 * validated once with zod into a fully resolved {@link GatewayConfig}.
 *
 * User config is a flat map of optional variables; resolved config has every field. One function,
 * {@link resolveConfig}, joins them, and every error names the variable (or flag) and the fix.
 * @module
 */
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { readDotenv } from "./dotenv.ts";
import { GatewayError } from "./errors.ts";
import {
  DEFAULT_SCOPE_CLAIMS,
  hs256SecretTooShort,
  JWKS_NEEDS_AUDIENCE,
  MIN_HS256_SECRET_BYTES,
} from "./auth/jwt_verifier.ts";
import { isLoopbackHost } from "./auth/host_guard.ts";
import { isSecureOrLoopback } from "./auth/issuer_metadata.ts";
import { IDENTITY_SCOPE_MAP, parseScopeMap, type ScopeMap } from "./auth/scope_map.ts";
import { KNOWN_SCOPES } from "./auth/token_payload.ts";
import { resolveDataDir } from "./data_dir.ts";
import { type TracingConfig, tracingConfig } from "./tracing/tracing_config.ts";

/** The fully resolved configuration. */
export interface GatewayConfig {
  server: {
    /** MCP_SERVER_ENABLED: serve the MCP interface at all. */
    enabled: boolean;
    /** MCP_SERVER_TRANSPORT: `stdio`, or `http` (Streamable HTTP and legacy SSE on one listener). */
    transport: "stdio" | "http";
    host: string;
    port: number;
    /** MCP_SERVER_AUTH_TOKEN: the shared client token. */
    authToken?: string;
    /** MCP_SERVER_AUTH_SCOPES: the scopes MCP_SERVER_AUTH_TOKEN holds (`mcp` by default). */
    authScopes: string[];
    /** MCP_ADMIN_TOKEN: the operator's token, scope `admin`. */
    adminToken?: string;
    /** `--no-auth`: loopback only, for local development and the conformance suite. */
    authDisabled: boolean;
    /** `--no-auth-admin`: with `--no-auth`, the anonymous caller also holds scope `admin`. */
    authDisabledAdmin: boolean;
    tokensFile?: string;
    jwt: {
      secret?: string;
      jwksUrl?: string;
      issuer?: string;
      audience?: string;
      /** MCP_AUTH_JWT_CLOCK_TOLERANCE: seconds of clock skew allowed on `exp`/`nbf`. */
      clockToleranceSeconds?: number;
      /** MCP_AUTH_JWKS_COOLDOWN: seconds between JWKS refetches an unknown `kid` may cause. */
      jwksCooldownSeconds?: number;
    };
    /**
     * MCP_AUTH_OAUTH_*: the gateway as an OAuth protected resource of one issuer; tokens are
     * verified with the issuer's published keys (and `jwt` holds no key source then).
     */
    oauth?: {
      /** MCP_AUTH_OAUTH_ISSUER, exactly as tokens carry it in `iss`. */
      issuer: string;
      /** MCP_AUTH_OAUTH_RESOURCE: the URL clients use for /mcp, and the tokens' audience. */
      resource: string;
      /** MCP_AUTH_OAUTH_AUDIENCE: the `aud` values accepted; the resource by default. */
      audience: string[];
      /** MCP_AUTH_OAUTH_SCOPE_MAP: provider scope → gateway scopes. */
      scopeMap: ScopeMap;
      /** MCP_AUTH_OAUTH_SCOPE_CLAIMS: the claims scopes are read from. */
      scopeClaims: string[];
      /** MCP_AUTH_OAUTH_TENANT_CLAIM: the claim naming the caller's tenant. */
      tenantClaim: string;
      /** MCP_AUTH_OAUTH_TENANT_DEFAULT: the tenant of a token without that claim (else refused). */
      tenantFallback?: string;
    };
    allowedHosts: string[];
    allowedOrigins: string[];
    maxMessageBytes: number;
    pageSize: number;
    httpResponseMode: "json" | "sse";
    stdioTenant: string;
    /** MCP_TOOL_DISCOVERY_MODE: list every tool (`legacy`) or search and activate (`search`). */
    toolDiscoveryMode: "legacy" | "search";
    /** MCP_SHUTDOWN_GRACE_MS: how long a stop waits for tool calls in flight before cutting them off. */
    shutdownGraceMs: number;
    /** MCP_HTTP_SESSION_IDLE_SECONDS, in ms: idle Streamable HTTP sessions are closed after it. */
    httpSessionIdleMs: number;
    /** MCP_HTTP_BODY_TIMEOUT_MS: how long an HTTP request body may take to arrive. */
    bodyTimeoutMs: number;
    /** MCP_MAX_SESSIONS: MCP sessions open at once, every transport and tenant together. */
    maxSessions: number;
    /** MCP_MAX_SESSIONS_PER_TENANT: MCP sessions one tenant may hold open at once. */
    maxSessionsPerTenant: number;
    /** MCP_SSE_MAX_QUEUE_BYTES: bytes a legacy SSE session may have waiting for its reader. */
    sseMaxQueueBytes: number;
    /** MCP_SSE_MAX_QUEUE_MESSAGES: messages a legacy SSE session may have waiting for its reader. */
    sseMaxQueueMessages: number;
    /** MCP_MAX_IN_FLIGHT_PER_SESSION: requests one session may have waiting for their answers. */
    maxInFlightPerSession: number;
  };
  proxy: {
    configPath?: string;
    healthCheckIntervalSeconds: number;
    toolSeparator: string;
    /** MCP_PROXY_STARTUP_WAIT, in ms: how long a session's first list waits for STARTING upstreams. */
    startupWaitMs: number;
  };
  /** MCP_DATA_DIR, absolute: the one directory the gateway writes its state to. */
  dataDir: string;
  /** `--demo`: every input left unset takes the embedded default (demo fleet, engine, data dir). */
  demo: boolean;
  pluginPaths: string[];
  policyPath: string;
  /** The engine's definition and knowledge directories; each feature is off while unset. */
  engine: {
    agentsPath?: string;
    skillsPath?: string;
    workflowsPath?: string;
    knowledgePath?: string;
    /** MCP_ENGINE_MODEL: `provider[:model]` for agents that name none. */
    model: string;
  };
  governance: {
    /** HMAC key of approval tokens; generated per process when unset (set it for replicas). */
    approvalSecret?: string;
    approvalTtlSeconds: number;
    /** MCP_MAX_PENDING_APPROVALS_PER_TENANT: pending approval requests one tenant may have. */
    maxPendingApprovalsPerTenant: number;
    /**
     * In-band approval at all (MCP_APPROVAL_IN_BAND): false turns it off everywhere; true leaves
     * it to the transport (stdio) and the tenant's policy (HTTP, `approval: in_band`).
     */
    approvalInBand: boolean;
    /** Audit log file; unset = audit events on the bus only. */
    auditLog?: string;
    auditMaxBytes: number;
    auditIncludeArguments: boolean;
    /**
     * MCP_APPROVALS_PATH: JSON file keeping approvals and used token nonces across restarts;
     * `<fleet file>.approvals.json` by default, unset (memory only) without a fleet file or when
     * the variable is `off`.
     */
    approvalsPath?: string;
  };
  /** MCP_SCANNER_BLOCK: findings at or above this severity quarantine their tool. */
  scannerBlock: "off" | "info" | "low" | "medium" | "high" | "critical";
  /** MCP_SCANNER_APPROVAL: findings at or above this severity make calls need approval. */
  scannerApproval: "off" | "info" | "low" | "medium" | "high" | "critical";
  natsUrl?: string;
  log: { level: "debug" | "info" | "warn" | "error"; format: "text" | "json" };
  /** Discovery kept running by the gateway (off while `sources` is empty). */
  discovery: {
    /** MCP_DISCOVERY: discovery plugin names (`k8s` or `discovery-k8s`) to keep running. */
    sources: string[];
    /** MCP_DISCOVERY_TIMEOUT_MS: how long one list (or a forced round) may take. */
    timeoutMs: number;
    /** MCP_DISCOVERY_INTERVAL_SECONDS, in ms: how often snapshot-only sources are asked again. */
    intervalMs: number;
  };
  /** Every `MCP_PLUGIN_*` variable, for plugin config slices. */
  pluginEnv: Record<string, string>;
  /** Trace export, from the standard `OTEL_*` variables (off unless an OTLP endpoint is set). */
  tracing: TracingConfig;
}

/** CLI flags; each overrides the variable named beside it. */
export interface ConfigFlags {
  /** MCP_SERVER_TRANSPORT */
  transport?: string;
  /** MCP_SERVER_HOST */
  host?: string;
  /** MCP_SERVER_PORT */
  port?: string;
  /** MCP_PROXY_CONFIG_PATH */
  config?: string;
  /** MCP_AUTH_DISABLED */
  noAuth?: boolean;
  /** MCP_AUTH_DISABLED_ADMIN */
  noAuthAdmin?: boolean;
  /** `--demo`: the embedded defaults for whatever is not configured. */
  demo?: boolean;
}

const FLAG_OF: Record<string, string> = {
  MCP_SERVER_TRANSPORT: "--transport",
  MCP_SERVER_HOST: "--host",
  MCP_SERVER_PORT: "--port",
  MCP_PROXY_CONFIG_PATH: "--config",
  MCP_AUTH_DISABLED: "--no-auth",
  MCP_AUTH_DISABLED_ADMIN: "--no-auth-admin",
};

/** Every variable the gateway reads, with its default and meaning: docs/configuration.md's reference. */
export const CONFIG_VARIABLES: readonly { name: string; default: string; meaning: string }[] = [
  { name: "MCP_SERVER_ENABLED", default: "true", meaning: "Serve the MCP interface at all" },
  {
    name: "MCP_SERVER_TRANSPORT",
    default: "http",
    meaning:
      "`stdio`, or `http` (Streamable HTTP at /mcp and legacy SSE at /sse); `sse` is accepted as the seed's name for `http`",
  },
  { name: "MCP_SERVER_HOST", default: "127.0.0.1", meaning: "HTTP bind address" },
  { name: "MCP_SERVER_PORT", default: "8787", meaning: "HTTP port (0 picks a free one)" },
  {
    name: "MCP_SERVER_AUTH_TOKEN",
    default: "(generated and printed at start)",
    meaning:
      "Shared client bearer token for HTTP (identity `static-token`, tenant `default`, the scopes of MCP_SERVER_AUTH_SCOPES)",
  },
  {
    name: "MCP_SERVER_AUTH_SCOPES",
    default: "mcp",
    meaning: "Comma-separated scopes of MCP_SERVER_AUTH_TOKEN: mcp, approver, operator, admin",
  },
  {
    name: "MCP_ADMIN_TOKEN",
    default: "(generated and printed at start when no source grants admin)",
    meaning:
      "The operator's bearer token (identity `admin-token`, scope `admin`): admin API, dashboard, approvals",
  },
  {
    name: "MCP_AUTH_TOKENS_FILE",
    default: "(none)",
    meaning: "YAML/JSON file of SHA-256-hashed tokens, each with tenant, scopes and subject",
  },
  {
    name: "MCP_AUTH_JWT_SECRET",
    default: "(none)",
    meaning: "HS256 secret for JWT bearer tokens; at least 32 bytes",
  },
  {
    name: "MCP_AUTH_JWKS_URL",
    default: "(none)",
    meaning: "JWKS URL for asymmetric JWT bearer tokens; needs MCP_AUTH_JWT_AUDIENCE",
  },
  { name: "MCP_AUTH_JWT_ISSUER", default: "(any)", meaning: "Required JWT `iss`" },
  {
    name: "MCP_AUTH_JWT_AUDIENCE",
    default: "(any; required with MCP_AUTH_JWKS_URL)",
    meaning: "Required JWT `aud`",
  },
  {
    name: "MCP_AUTH_JWT_CLOCK_TOLERANCE",
    default: "30",
    meaning: "Seconds of clock skew allowed on JWT `exp` and `nbf` (every JWT must carry `exp`)",
  },
  {
    name: "MCP_AUTH_JWKS_COOLDOWN",
    default: "30",
    meaning:
      "Seconds after a JWKS fetch before a token with an unknown key id may cause another (how soon a rotated key is picked up)",
  },
  {
    name: "MCP_AUTH_OAUTH_ISSUER",
    default: "(none)",
    meaning:
      "OAuth/OIDC issuer URL (exactly its `iss`); the gateway becomes an OAuth protected resource: publishes /.well-known/oauth-protected-resource and verifies tokens with the keys of the issuer's metadata",
  },
  {
    name: "MCP_AUTH_OAUTH_RESOURCE",
    default:
      "http://<MCP_SERVER_HOST>:<MCP_SERVER_PORT>/mcp on a loopback host; required otherwise",
    meaning:
      "The gateway's resource URL as clients reach it (behind a proxy: the public URL of /mcp); tokens must carry it in `aud`",
  },
  {
    name: "MCP_AUTH_OAUTH_AUDIENCE",
    default: "(the resource URL)",
    meaning:
      "Comma-separated `aud` values accepted instead, for a provider that cannot put the resource URL in `aud` (Entra ID v2: the app's client id)",
  },
  {
    name: "MCP_AUTH_OAUTH_SCOPE_CLAIMS",
    default: "scope,scp,scopes",
    meaning:
      "Comma-separated claims the token's scopes are read from (add `roles` for Entra app roles, `permissions` for Auth0 RBAC)",
  },
  {
    name: "MCP_AUTH_OAUTH_SCOPE_MAP",
    default: "mcp=mcp,approver=approver,operator=operator,admin=admin",
    meaning:
      "provider_scope=gateway_scope pairs (`mcp:tools=mcp,gw.admin=admin`); only listed provider scopes grant anything; those mapped to mcp are advertised in scopes_supported",
  },
  {
    name: "MCP_AUTH_OAUTH_TENANT_CLAIM",
    default: "tenant",
    meaning: "Access-token claim naming the caller's tenant (a non-empty string)",
  },
  {
    name: "MCP_AUTH_OAUTH_TENANT_DEFAULT",
    default: "(none: a token without the claim is refused)",
    meaning: "Tenant of an OAuth token that lacks the tenant claim",
  },
  {
    name: "MCP_AUTH_DISABLED",
    default: "false",
    meaning:
      "Same as `--no-auth`: no credentials on HTTP, the caller holds scope `mcp` only; refused unless the host is loopback",
  },
  {
    name: "MCP_AUTH_DISABLED_ADMIN",
    default: "false",
    meaning:
      "Same as `--no-auth-admin`: with `--no-auth`, the anonymous caller also holds scope `admin`",
  },
  {
    name: "MCP_ALLOWED_HOSTS",
    default: "localhost, 127.0.0.1, [::1] (+ the bind host)",
    meaning: "Comma-separated Host header values accepted (DNS-rebinding protection)",
  },
  {
    name: "MCP_ALLOWED_ORIGINS",
    default: "(origins of allowed hosts)",
    meaning: "Comma-separated Origin values accepted",
  },
  {
    name: "MCP_MAX_MESSAGE_BYTES",
    default: "4194304",
    meaning: "Largest JSON-RPC frame or HTTP body",
  },
  {
    name: "MCP_LIST_PAGE_SIZE",
    default: "10000",
    meaning:
      "Items per page of every MCP list (the default lists any realistic fleet in one page; lower it to page with nextCursor)",
  },
  {
    name: "MCP_HTTP_RESPONSE_MODE",
    default: "sse",
    meaning: "Streamable HTTP POST answers: `sse` stream or one `json` body",
  },
  { name: "MCP_STDIO_TENANT", default: "default", meaning: "Tenant of the trusted stdio parent" },
  {
    name: "MCP_TOOL_DISCOVERY_MODE",
    default: "legacy",
    meaning: "`legacy` lists every tool; `search` lists natives plus tool_search/tool_activate",
  },
  {
    name: "MCP_SHUTDOWN_GRACE_MS",
    default: "10000",
    meaning:
      "On SIGTERM/SIGINT, milliseconds tool calls in flight get to finish before they are cut off (a second signal stops at once)",
  },
  {
    name: "MCP_HTTP_SESSION_IDLE_SECONDS",
    default: "1800",
    meaning:
      "Streamable HTTP sessions with no request and no open stream for this long are closed (clients that leave without DELETE); 0 keeps them",
  },
  {
    name: "MCP_MAX_SESSIONS",
    default: "1000",
    meaning:
      "MCP sessions open at once (Streamable HTTP, SSE and stdio together); a new one past it gets HTTP 503 with JSON-RPC error -32000",
  },
  {
    name: "MCP_MAX_SESSIONS_PER_TENANT",
    default: "250",
    meaning:
      "MCP sessions one tenant may hold open at once, so one tenant cannot take them all; past it, HTTP 503 with JSON-RPC error -32000",
  },
  {
    name: "MCP_SSE_MAX_QUEUE_BYTES",
    default: "16777216",
    meaning:
      "Bytes one SSE stream (legacy /sse, a Streamable HTTP POST response or GET /mcp stream) may have queued for a client that does not read it; past it the stream is cut: a legacy SSE session is ended, a POST stream's requests are cancelled, a GET stream is closed (one message larger than this still goes out alone)",
  },
  {
    name: "MCP_SSE_MAX_QUEUE_MESSAGES",
    default: "10000",
    meaning:
      "Messages one SSE stream (legacy /sse, Streamable HTTP POST or GET) may have queued for its reader; past it the stream is cut as for MCP_SSE_MAX_QUEUE_BYTES",
  },
  {
    name: "MCP_MAX_IN_FLIGHT_PER_SESSION",
    default: "128",
    meaning:
      "Requests one MCP session (any transport) may have waiting for their answers; one more is refused with JSON-RPC error -32000, data.code too_many_requests",
  },
  {
    name: "MCP_HTTP_BODY_TIMEOUT_MS",
    default: "30000",
    meaning: "Milliseconds an HTTP request body may take to arrive; slower bodies get 408",
  },
  {
    name: "MCP_DISCOVERY",
    default: "(none: off)",
    meaning:
      "Discovery plugins the gateway keeps running, comma-separated (`k8s,lan`; the `discovery-` prefix is optional); their candidates show in GET /v1/mcp/sync/proposals and the dashboard",
  },
  {
    name: "MCP_DISCOVERY_TIMEOUT_MS",
    default: "10000",
    meaning:
      "Milliseconds one discovery list (or a forced `?discover=true` round) may take; a source slower than this is reported and retried with backoff",
  },
  {
    name: "MCP_DISCOVERY_INTERVAL_SECONDS",
    default: "60",
    meaning:
      "How often running discovery asks snapshot-only sources (lan, tailscale) again; watching sources (k8s) follow their watch",
  },
  {
    name: "MCP_DISCOVERY_TRUSTED",
    default: "(none)",
    meaning:
      "Discovery sources (`k8s`, `lan`, …) whose candidates are proposed enabled; others are proposed `enabled: false`",
  },
  {
    name: "MCP_PROXY_CONFIG_PATH",
    default: "(none; --demo: demo/fleet.yaml)",
    meaning: "Fleet YAML of upstream MCP servers",
  },
  {
    name: "MCP_PROXY_STARTUP_WAIT",
    default: "10",
    meaning:
      "Seconds a session's first tools/resources/prompts list waits for upstreams still STARTING (0: answer at once)",
  },
  {
    name: "MCP_DATA_DIR",
    default: "./.agent33",
    meaning:
      "The directory the gateway writes state to (with --demo: audit log, approvals, the memory server's graph); `${MCP_DATA_DIR}` in a fleet file is its absolute path",
  },
  {
    name: "MCP_PROXY_HEALTH_CHECK_INTERVAL",
    default: "30",
    meaning: "Seconds between upstream health checks",
  },
  {
    name: "MCP_PROXY_TOOL_SEPARATOR",
    default: "__",
    meaning: "Separator in `<server_id><sep><tool>`",
  },
  {
    name: "MCP_PLUGIN_PATHS",
    default: "(none)",
    meaning: "Extra plugin directories, separated by `:`",
  },
  { name: "MCP_POLICY_PATH", default: "policies", meaning: "Governance policy file or directory" },
  {
    name: "MCP_AGENTS_PATH",
    default: "(none: no agents; --demo: agents/)",
    meaning: "Directory of agent definitions (`*.yaml`); enables agent_invoke",
  },
  {
    name: "MCP_SKILLS_PATH",
    default: "(none: no skills; --demo: skills/)",
    meaning: "Directory of skills (`<id>/SKILL.md`), served as prompts",
  },
  {
    name: "MCP_WORKFLOWS_PATH",
    default: "(none: no workflows; --demo: workflows/)",
    meaning: "Directory of workflow definitions (`*.yaml`); enables workflow_run",
  },
  {
    name: "MCP_KNOWLEDGE_PATH",
    default: "(none: no corpus; --demo: knowledge/)",
    meaning: "Directory of Markdown and text documents; enables rag_search",
  },
  {
    name: "MCP_ENGINE_MODEL",
    default: "sampling",
    meaning: "Model (`provider[:model]`) of agents that name none",
  },
  { name: "NATS_URL", default: "(none: in-process bus)", meaning: "NATS server for fleet events" },
  {
    name: "MCP_APPROVAL_SECRET",
    default: "(random per process)",
    meaning: "HMAC key of approval tokens; the same on every replica",
  },
  {
    name: "MCP_APPROVAL_TTL",
    default: "600",
    meaning: "Seconds an approval request and its token stay valid",
  },
  {
    name: "MCP_MAX_PENDING_APPROVALS_PER_TENANT",
    default: "100",
    meaning:
      "Approval requests one tenant may have pending at once (approval_queue_full past it; 10,000 in total)",
  },
  {
    name: "MCP_APPROVALS_PATH",
    default:
      "`<fleet file>.approvals.json` (memory only without a fleet file); --demo: `<MCP_DATA_DIR>/approvals.json`",
    meaning:
      "JSON file keeping approval requests, decisions, tokens and used nonces across restarts; `off` keeps them in memory",
  },
  {
    name: "MCP_APPROVAL_IN_BAND",
    default: "true",
    meaning:
      "In-band approval (elicitation/create): on for stdio; over HTTP only for tenants whose policy says `approval: in_band`. `false` turns it off on every transport",
  },
  {
    name: "MCP_AUDIT_LOG",
    default: "(none: bus events only; --demo: `<MCP_DATA_DIR>/audit.jsonl`)",
    meaning: "File of JSON audit lines, one per decision",
  },
  {
    name: "MCP_AUDIT_MAX_BYTES",
    default: "10485760",
    meaning: "Audit file size before rotation (5 files kept)",
  },
  {
    name: "MCP_AUDIT_INCLUDE_ARGUMENTS",
    default: "false",
    meaning: "Write the arguments, redacted, into audit lines (else only their hash)",
  },
  {
    name: "MCP_SCANNER_APPROVAL",
    default: "medium",
    meaning:
      "Scanner findings at or above this severity (below the block) make calls need approval",
  },
  {
    name: "MCP_SCANNER_BLOCK",
    default: "high",
    meaning: "Scanner findings at or above this severity quarantine their tool (`off` to never)",
  },
  {
    name: "MCP_LOG_LEVEL",
    default: "info",
    meaning: "`debug`, `info`, `warn` or `error` (logs go to stderr)",
  },
  { name: "MCP_LOG_FORMAT", default: "text", meaning: "`text` or `json`" },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    default: "(none: no tracing)",
    meaning:
      "OTLP/HTTP collector base URL (`/v1/traces` is added); setting it (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the full URL) turns tracing on",
  },
  {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    default: "http/protobuf",
    meaning: "`http/protobuf` or `http/json` (also OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)",
  },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    default: "(none)",
    meaning: "`key=value,…` headers on every export (e.g. an API key; also _TRACES_HEADERS)",
  },
  {
    name: "OTEL_TRACES_EXPORTER",
    default: "otlp (once an endpoint is set)",
    meaning: "`otlp`, or `none` to turn tracing off; `otlp` alone exports to http://localhost:4318",
  },
  {
    name: "OTEL_SDK_DISABLED",
    default: "false",
    meaning: "`true` turns tracing off whatever else is set",
  },
  {
    name: "OTEL_SERVICE_NAME",
    default: "agent33",
    meaning: "service.name of the spans (OTEL_RESOURCE_ATTRIBUTES adds more attributes)",
  },
  {
    name: "OTEL_TRACES_SAMPLER",
    default: "parentbased_always_on",
    meaning:
      "always_on, always_off, traceidratio or parentbased_* (the ratio in OTEL_TRACES_SAMPLER_ARG)",
  },
];

const bool = (name: string) =>
  z.string().optional().transform((value, ctx) => {
    if (value === undefined || value === "") return undefined;
    const v = value.toLowerCase();
    if (["1", "true", "yes", "on"].includes(v)) return true;
    if (["0", "false", "no", "off"].includes(v)) return false;
    ctx.addIssue({
      code: "custom",
      message: `${name} must be true or false, received "${value}"`,
    });
    return z.NEVER;
  });

const int = (name: string, min: number, max: number) =>
  z.string().optional().transform((value, ctx) => {
    if (value === undefined || value === "") return undefined;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      ctx.addIssue({
        code: "custom",
        message: `${name} must be an integer from ${min} to ${max}, received "${value}"`,
      });
      return z.NEVER;
    }
    return n;
  });

const oneOf = <T extends string>(
  name: string,
  values: readonly T[],
  aliases: Record<string, T> = {},
) =>
  z.string().optional().transform((value, ctx) => {
    if (value === undefined || value === "") return undefined;
    const v = value.toLowerCase();
    if ((values as readonly string[]).includes(v)) return v as T;
    if (Object.hasOwn(aliases, v)) return aliases[v]!;
    ctx.addIssue({
      code: "custom",
      message: `${name} must be one of ${values.join(", ")}, received "${value}"`,
    });
    return z.NEVER;
  });

const text = z.string().optional().transform((v) => (v === undefined || v === "" ? undefined : v));
const list = text.transform((v) =>
  v === undefined ? undefined : v.split(",").map((s) => s.trim()).filter(Boolean)
);

const ENV_SCHEMA = z.object({
  MCP_SERVER_ENABLED: bool("MCP_SERVER_ENABLED"),
  MCP_SERVER_TRANSPORT: oneOf("MCP_SERVER_TRANSPORT", ["stdio", "http"] as const, { sse: "http" }),
  MCP_SERVER_HOST: text,
  MCP_SERVER_PORT: int("MCP_SERVER_PORT", 0, 65535),
  MCP_SERVER_AUTH_TOKEN: text,
  MCP_SERVER_AUTH_SCOPES: list.transform((v, ctx) => {
    if (v === undefined) return undefined;
    const unknown = v.filter((s) => !(KNOWN_SCOPES as readonly string[]).includes(s));
    if (unknown.length === 0 && v.length > 0) return v;
    ctx.addIssue({
      code: "custom",
      message: `MCP_SERVER_AUTH_SCOPES must list scopes out of ${KNOWN_SCOPES.join(", ")}` +
        (unknown.length ? `, received "${unknown.join(", ")}"` : ""),
    });
    return z.NEVER;
  }),
  MCP_ADMIN_TOKEN: text,
  MCP_AUTH_TOKENS_FILE: text,
  MCP_AUTH_JWT_SECRET: text.refine(
    (v) => v === undefined || new TextEncoder().encode(v).length >= MIN_HS256_SECRET_BYTES,
    { error: (iss) => hs256SecretTooShort(new TextEncoder().encode(String(iss.input)).length) },
  ),
  MCP_AUTH_JWT_CLOCK_TOLERANCE: int("MCP_AUTH_JWT_CLOCK_TOLERANCE", 0, 600),
  MCP_AUTH_JWKS_URL: text.refine((v) => v === undefined || URL.canParse(v), {
    message:
      "MCP_AUTH_JWKS_URL must be an absolute URL, e.g. https://idp.example.com/.well-known/jwks.json",
  }),
  MCP_AUTH_JWT_ISSUER: text,
  MCP_AUTH_JWT_AUDIENCE: text,
  MCP_AUTH_JWKS_COOLDOWN: int("MCP_AUTH_JWKS_COOLDOWN", 0, 86_400),
  MCP_AUTH_OAUTH_ISSUER: text.refine((v) => v === undefined || secureUrl(v), {
    message: "MCP_AUTH_OAUTH_ISSUER must be an https URL (http only on a loopback host), " +
      "e.g. https://idp.example.com/realms/agents",
  }),
  MCP_AUTH_OAUTH_RESOURCE: text.refine(
    (v) => v === undefined || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)),
    {
      message:
        "MCP_AUTH_OAUTH_RESOURCE must be an absolute http(s) URL, e.g. https://gw.example.com/mcp",
    },
  ).refine((v) => v === undefined || !v.includes("#"), {
    message: "MCP_AUTH_OAUTH_RESOURCE must not have a fragment (RFC 8707 §2)",
  }),
  MCP_AUTH_OAUTH_SCOPE_MAP: text.transform((v, ctx) => {
    if (v === undefined) return undefined;
    const parsed = parseScopeMap(v);
    if (parsed.ok) return parsed.map;
    ctx.addIssue({ code: "custom", message: parsed.message });
    return z.NEVER;
  }),
  MCP_AUTH_OAUTH_AUDIENCE: list,
  MCP_AUTH_OAUTH_SCOPE_CLAIMS: list,
  MCP_AUTH_OAUTH_TENANT_CLAIM: text,
  MCP_AUTH_OAUTH_TENANT_DEFAULT: text,
  MCP_AUTH_DISABLED: bool("MCP_AUTH_DISABLED"),
  MCP_AUTH_DISABLED_ADMIN: bool("MCP_AUTH_DISABLED_ADMIN"),
  MCP_ALLOWED_HOSTS: list,
  MCP_ALLOWED_ORIGINS: list,
  MCP_MAX_MESSAGE_BYTES: int("MCP_MAX_MESSAGE_BYTES", 1024, 1024 * 1024 * 1024),
  MCP_LIST_PAGE_SIZE: int("MCP_LIST_PAGE_SIZE", 1, 100_000),
  MCP_HTTP_RESPONSE_MODE: oneOf("MCP_HTTP_RESPONSE_MODE", ["sse", "json"] as const),
  MCP_STDIO_TENANT: text,
  MCP_TOOL_DISCOVERY_MODE: oneOf("MCP_TOOL_DISCOVERY_MODE", ["legacy", "search"] as const),
  MCP_SHUTDOWN_GRACE_MS: int("MCP_SHUTDOWN_GRACE_MS", 0, 600_000),
  MCP_HTTP_BODY_TIMEOUT_MS: int("MCP_HTTP_BODY_TIMEOUT_MS", 100, 3_600_000),
  MCP_HTTP_SESSION_IDLE_SECONDS: int("MCP_HTTP_SESSION_IDLE_SECONDS", 0, 7 * 86_400),
  MCP_MAX_SESSIONS: int("MCP_MAX_SESSIONS", 1, 1_000_000),
  MCP_MAX_SESSIONS_PER_TENANT: int("MCP_MAX_SESSIONS_PER_TENANT", 1, 1_000_000),
  MCP_SSE_MAX_QUEUE_BYTES: int("MCP_SSE_MAX_QUEUE_BYTES", 1024, 1024 * 1024 * 1024),
  MCP_SSE_MAX_QUEUE_MESSAGES: int("MCP_SSE_MAX_QUEUE_MESSAGES", 1, 1_000_000),
  MCP_MAX_IN_FLIGHT_PER_SESSION: int("MCP_MAX_IN_FLIGHT_PER_SESSION", 1, 1_000_000),
  MCP_DISCOVERY: list,
  MCP_DISCOVERY_TIMEOUT_MS: int("MCP_DISCOVERY_TIMEOUT_MS", 100, 600_000),
  MCP_DISCOVERY_INTERVAL_SECONDS: int("MCP_DISCOVERY_INTERVAL_SECONDS", 1, 86_400),
  MCP_PROXY_CONFIG_PATH: text,
  MCP_PROXY_STARTUP_WAIT: int("MCP_PROXY_STARTUP_WAIT", 0, 600),
  MCP_DATA_DIR: text,
  MCP_PROXY_HEALTH_CHECK_INTERVAL: int("MCP_PROXY_HEALTH_CHECK_INTERVAL", 1, 86_400),
  MCP_PROXY_TOOL_SEPARATOR: text.refine((v) => v === undefined || /^[A-Za-z0-9_.-]{1,8}$/.test(v), {
    message:
      "MCP_PROXY_TOOL_SEPARATOR must be 1–8 characters valid in a tool name (letters, digits, _ - .), e.g. __",
  }),
  MCP_PLUGIN_PATHS: text,
  MCP_POLICY_PATH: text,
  MCP_AGENTS_PATH: text,
  MCP_SKILLS_PATH: text,
  MCP_WORKFLOWS_PATH: text,
  MCP_KNOWLEDGE_PATH: text,
  MCP_ENGINE_MODEL: text,
  NATS_URL: text.refine(
    (v) => v === undefined || /^(nats|tls|wss?):\/\/./.test(v) || !v.includes("://"),
    {
      message: "NATS_URL must look like nats://127.0.0.1:4222",
    },
  ),
  MCP_APPROVAL_SECRET: text.refine((v) => v === undefined || v.length >= 32, {
    message:
      "MCP_APPROVAL_SECRET must be at least 32 characters; generate one with: openssl rand -hex 32",
  }),
  MCP_APPROVAL_TTL: int("MCP_APPROVAL_TTL", 10, 86_400),
  MCP_MAX_PENDING_APPROVALS_PER_TENANT: int("MCP_MAX_PENDING_APPROVALS_PER_TENANT", 1, 10_000),
  MCP_APPROVAL_IN_BAND: bool("MCP_APPROVAL_IN_BAND"),
  MCP_APPROVALS_PATH: text,
  MCP_AUDIT_LOG: text,
  MCP_AUDIT_MAX_BYTES: int("MCP_AUDIT_MAX_BYTES", 1024, 1024 * 1024 * 1024),
  MCP_AUDIT_INCLUDE_ARGUMENTS: bool("MCP_AUDIT_INCLUDE_ARGUMENTS"),
  MCP_SCANNER_BLOCK: oneOf(
    "MCP_SCANNER_BLOCK",
    ["off", "info", "low", "medium", "high", "critical"] as const,
  ),
  MCP_SCANNER_APPROVAL: oneOf(
    "MCP_SCANNER_APPROVAL",
    ["off", "info", "low", "medium", "high", "critical"] as const,
  ),
  MCP_LOG_LEVEL: oneOf("MCP_LOG_LEVEL", ["debug", "info", "warn", "error"] as const),
  MCP_LOG_FORMAT: oneOf("MCP_LOG_FORMAT", ["text", "json"] as const),
});

/** Joins environment and flags into a resolved config; throws `config_invalid` naming each bad variable. */
export function resolveConfig(
  env: Record<string, string | undefined>,
  flags: ConfigFlags = {},
): GatewayConfig {
  const merged: Record<string, string | undefined> = { ...env };
  if (flags.transport !== undefined) merged.MCP_SERVER_TRANSPORT = flags.transport;
  if (flags.host !== undefined) merged.MCP_SERVER_HOST = flags.host;
  if (flags.port !== undefined) merged.MCP_SERVER_PORT = flags.port;
  if (flags.config !== undefined) merged.MCP_PROXY_CONFIG_PATH = flags.config;
  if (flags.noAuth) merged.MCP_AUTH_DISABLED = "true";
  if (flags.noAuthAdmin) merged.MCP_AUTH_DISABLED_ADMIN = "true";

  const parsed = ENV_SCHEMA.safeParse(merged);
  const tracing = tracingConfig(merged);
  const issues = [
    ...(parsed.success ? crossChecks(parsed.data) : parsed.error.issues),
    ...tracing.issues.map((t): z.core.$ZodIssue => ({
      code: "custom",
      path: [t.variable],
      message: t.message,
      input: undefined,
    })),
  ];
  if (!parsed.success || issues.length) {
    const problems = issues.map((issue) => {
      const variable = String(issue.path[0] ?? "configuration");
      const flag = FLAG_OF[variable];
      const message = issue.message.startsWith(variable)
        ? issue.message
        : `${variable}: ${issue.message}`;
      return flag ? `${message} (set by ${flag} or ${variable})` : message;
    });
    throw new GatewayError(
      "config_invalid",
      `Invalid configuration:\n  - ${problems.join("\n  - ")}`,
      {
        problems,
      },
    );
  }
  const e = parsed.data;
  const pluginEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith("MCP_PLUGIN_") && key !== "MCP_PLUGIN_PATHS" && value !== undefined) {
      pluginEnv[key] = value;
    }
  }
  const separator = Deno.build.os === "windows" ? ";" : ":";
  const dataDir = resolveDataDir(e.MCP_DATA_DIR);
  const demo = flags.demo ?? false;
  if (demo) {
    // The embedded defaults: each input left unset takes the demo's, and its state goes to dataDir.
    e.MCP_PROXY_CONFIG_PATH ??= `${REPOSITORY}demo/fleet.yaml`;
    e.MCP_AGENTS_PATH ??= `${REPOSITORY}agents`;
    e.MCP_SKILLS_PATH ??= `${REPOSITORY}skills`;
    e.MCP_WORKFLOWS_PATH ??= `${REPOSITORY}workflows`;
    e.MCP_KNOWLEDGE_PATH ??= `${REPOSITORY}knowledge`;
    e.MCP_POLICY_PATH ??= `${REPOSITORY}policies`;
    e.MCP_AUDIT_LOG ??= `${dataDir}/audit.jsonl`;
    e.MCP_APPROVALS_PATH ??= `${dataDir}/approvals.json`;
  }
  return {
    server: {
      enabled: e.MCP_SERVER_ENABLED ?? true,
      transport: e.MCP_SERVER_TRANSPORT ?? "http",
      host: e.MCP_SERVER_HOST ?? "127.0.0.1",
      port: e.MCP_SERVER_PORT ?? 8787,
      ...(e.MCP_SERVER_AUTH_TOKEN === undefined ? {} : { authToken: e.MCP_SERVER_AUTH_TOKEN }),
      authScopes: e.MCP_SERVER_AUTH_SCOPES ?? ["mcp"],
      ...(e.MCP_ADMIN_TOKEN === undefined ? {} : { adminToken: e.MCP_ADMIN_TOKEN }),
      authDisabled: e.MCP_AUTH_DISABLED ?? false,
      authDisabledAdmin: e.MCP_AUTH_DISABLED_ADMIN ?? false,
      ...(e.MCP_AUTH_TOKENS_FILE === undefined ? {} : { tokensFile: e.MCP_AUTH_TOKENS_FILE }),
      jwt: definedOnly({
        secret: e.MCP_AUTH_JWT_SECRET,
        jwksUrl: e.MCP_AUTH_JWKS_URL,
        issuer: e.MCP_AUTH_JWT_ISSUER,
        audience: e.MCP_AUTH_JWT_AUDIENCE,
        clockToleranceSeconds: e.MCP_AUTH_JWT_CLOCK_TOLERANCE,
        jwksCooldownSeconds: e.MCP_AUTH_JWKS_COOLDOWN,
      }),
      ...(e.MCP_AUTH_OAUTH_ISSUER === undefined ? {} : {
        oauth: oauthSettings(e, e.MCP_AUTH_OAUTH_ISSUER),
      }),

      allowedHosts: e.MCP_ALLOWED_HOSTS ?? [],
      allowedOrigins: e.MCP_ALLOWED_ORIGINS ?? [],
      maxMessageBytes: e.MCP_MAX_MESSAGE_BYTES ?? 4 * 1024 * 1024,
      pageSize: e.MCP_LIST_PAGE_SIZE ?? DEFAULT_PAGE_SIZE,
      httpResponseMode: e.MCP_HTTP_RESPONSE_MODE ?? "sse",
      stdioTenant: e.MCP_STDIO_TENANT ?? "default",
      toolDiscoveryMode: e.MCP_TOOL_DISCOVERY_MODE ?? "legacy",
      shutdownGraceMs: e.MCP_SHUTDOWN_GRACE_MS ?? 10_000,
      bodyTimeoutMs: e.MCP_HTTP_BODY_TIMEOUT_MS ?? 30_000,
      httpSessionIdleMs: (e.MCP_HTTP_SESSION_IDLE_SECONDS ?? 1800) * 1000,
      maxSessions: e.MCP_MAX_SESSIONS ?? 1000,
      maxSessionsPerTenant: e.MCP_MAX_SESSIONS_PER_TENANT ?? 250,
      sseMaxQueueBytes: e.MCP_SSE_MAX_QUEUE_BYTES ?? 16 * 1024 * 1024,
      sseMaxQueueMessages: e.MCP_SSE_MAX_QUEUE_MESSAGES ?? 10_000,
      maxInFlightPerSession: e.MCP_MAX_IN_FLIGHT_PER_SESSION ?? 128,
    },
    proxy: {
      ...(e.MCP_PROXY_CONFIG_PATH === undefined ? {} : { configPath: e.MCP_PROXY_CONFIG_PATH }),
      healthCheckIntervalSeconds: e.MCP_PROXY_HEALTH_CHECK_INTERVAL ?? 30,
      toolSeparator: e.MCP_PROXY_TOOL_SEPARATOR ?? "__",
      startupWaitMs: (e.MCP_PROXY_STARTUP_WAIT ?? 10) * 1000,
    },
    dataDir,
    demo,
    pluginPaths: (e.MCP_PLUGIN_PATHS ?? "").split(separator).map((p) => p.trim()).filter(Boolean),
    policyPath: e.MCP_POLICY_PATH ?? "policies",
    engine: {
      ...definedOnly({
        agentsPath: e.MCP_AGENTS_PATH,
        skillsPath: e.MCP_SKILLS_PATH,
        workflowsPath: e.MCP_WORKFLOWS_PATH,
        knowledgePath: e.MCP_KNOWLEDGE_PATH,
      }),
      model: e.MCP_ENGINE_MODEL ?? "sampling",
    },
    governance: {
      ...(e.MCP_APPROVAL_SECRET === undefined ? {} : { approvalSecret: e.MCP_APPROVAL_SECRET }),
      approvalTtlSeconds: e.MCP_APPROVAL_TTL ?? 600,
      maxPendingApprovalsPerTenant: e.MCP_MAX_PENDING_APPROVALS_PER_TENANT ?? 100,
      approvalInBand: e.MCP_APPROVAL_IN_BAND ?? true,
      ...(e.MCP_AUDIT_LOG === undefined ? {} : { auditLog: e.MCP_AUDIT_LOG }),
      auditMaxBytes: e.MCP_AUDIT_MAX_BYTES ?? 10 * 1024 * 1024,
      auditIncludeArguments: e.MCP_AUDIT_INCLUDE_ARGUMENTS ?? false,
      ...definedOnly({
        approvalsPath: approvalsPath(e.MCP_APPROVALS_PATH, e.MCP_PROXY_CONFIG_PATH),
      }),
    },
    ...(e.NATS_URL === undefined ? {} : { natsUrl: e.NATS_URL }),
    scannerBlock: e.MCP_SCANNER_BLOCK ?? "high",
    scannerApproval: e.MCP_SCANNER_APPROVAL ?? "medium",
    log: { level: e.MCP_LOG_LEVEL ?? "info", format: e.MCP_LOG_FORMAT ?? "text" },
    discovery: {
      sources: e.MCP_DISCOVERY ?? [],
      timeoutMs: e.MCP_DISCOVERY_TIMEOUT_MS ?? 10_000,
      intervalMs: (e.MCP_DISCOVERY_INTERVAL_SECONDS ?? 60) * 1000,
    },
    pluginEnv,
    tracing: tracing.config,
  };
}

/** The resolved MCP_AUTH_OAUTH_* settings. */
function oauthSettings(
  e: z.infer<typeof ENV_SCHEMA>,
  issuer: string,
): NonNullable<GatewayConfig["server"]["oauth"]> {
  const resource = e.MCP_AUTH_OAUTH_RESOURCE ??
    defaultResource(e.MCP_SERVER_HOST ?? "127.0.0.1", e.MCP_SERVER_PORT ?? 8787);
  return {
    issuer,
    resource,
    audience: e.MCP_AUTH_OAUTH_AUDIENCE ?? [resource],
    scopeMap: e.MCP_AUTH_OAUTH_SCOPE_MAP ?? IDENTITY_SCOPE_MAP,
    scopeClaims: e.MCP_AUTH_OAUTH_SCOPE_CLAIMS ?? [...DEFAULT_SCOPE_CLAIMS],
    tenantClaim: e.MCP_AUTH_OAUTH_TENANT_CLAIM ?? "tenant",
    ...definedOnly({ tenantFallback: e.MCP_AUTH_OAUTH_TENANT_DEFAULT }),
  };
}

/** MCP_AUTH_OAUTH_RESOURCE's default on a loopback host: the /mcp URL of the bound address. */
function defaultResource(host: string, port: number): string {
  const name = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return `http://${name}:${port}/mcp`;
}

function secureUrl(v: string): boolean {
  return URL.canParse(v) && isSecureOrLoopback(new URL(v)) && !new URL(v).hash;
}

/** Items per list page when MCP_LIST_PAGE_SIZE is unset: one page for any realistic fleet. */
export const DEFAULT_PAGE_SIZE = 10_000;

/** This checkout's root, where the embedded defaults (demo/, agents/, …) live. */
const REPOSITORY = fileURLToPath(new URL("../", import.meta.url));

/** Where {@link loadEnvironment} reads from: the process's variables and a `.env` file by default. */
export interface EnvironmentSource {
  env?: Record<string, string>;
  envFile?: string;
}

/** The resolved environment: `.env` with the process variables over it (config and fleet read it). */
export async function loadEnvironment(
  options: EnvironmentSource = {},
): Promise<Record<string, string>> {
  const env = options.env ?? Deno.env.toObject();
  const fromFile = await readDotenv(options.envFile ?? ".env");
  return { ...fromFile, ...env };
}

/** Reads `.env` (process variables win over it), applies flags, and resolves. */
export async function loadConfig(
  flags: ConfigFlags = {},
  options: EnvironmentSource = {},
): Promise<GatewayConfig> {
  return resolveConfig(await loadEnvironment(options), flags);
}

/** Rules that join variables: each issue's path names the variable to change. */
function crossChecks(e: z.infer<typeof ENV_SCHEMA>): z.core.$ZodIssue[] {
  const issues: z.core.$ZodIssue[] = [];
  const issue = (variable: string, message: string) =>
    issues.push({ code: "custom", path: [variable], message, input: undefined });
  if (e.MCP_AUTH_OAUTH_ISSUER !== undefined) {
    const other = ([
      "MCP_AUTH_JWT_SECRET",
      "MCP_AUTH_JWKS_URL",
      "MCP_AUTH_JWT_ISSUER",
      "MCP_AUTH_JWT_AUDIENCE",
    ] as const)
      .filter((name) => e[name] !== undefined);
    if (other.length) {
      issue(
        other[0]!,
        `MCP_AUTH_OAUTH_ISSUER takes the JWT settings from the issuer (keys, iss) and ` +
          `MCP_AUTH_OAUTH_RESOURCE (aud); unset ${other.join(", ")}`,
      );
    }
    const host = e.MCP_SERVER_HOST ?? "127.0.0.1";
    if (
      e.MCP_AUTH_OAUTH_RESOURCE === undefined && (!isLoopbackHost(host) || e.MCP_SERVER_PORT === 0)
    ) {
      issue(
        "MCP_AUTH_OAUTH_RESOURCE",
        "MCP_AUTH_OAUTH_RESOURCE is required with MCP_AUTH_OAUTH_ISSUER on a non-loopback host " +
          "or port 0: set the URL clients use for /mcp (e.g. https://gw.example.com/mcp); " +
          "tokens must carry it in `aud`",
      );
    }
  } else {
    for (
      const name of [
        "MCP_AUTH_OAUTH_RESOURCE",
        "MCP_AUTH_OAUTH_AUDIENCE",
        "MCP_AUTH_OAUTH_SCOPE_CLAIMS",
        "MCP_AUTH_OAUTH_SCOPE_MAP",
        "MCP_AUTH_OAUTH_TENANT_CLAIM",
        "MCP_AUTH_OAUTH_TENANT_DEFAULT",
      ] as const
    ) {
      if (e[name] !== undefined) issue(name, `${name} has no effect without MCP_AUTH_OAUTH_ISSUER`);
    }
  }
  if (e.MCP_AUTH_JWKS_URL !== undefined && e.MCP_AUTH_JWT_AUDIENCE === undefined) {
    issue("MCP_AUTH_JWT_AUDIENCE", JWKS_NEEDS_AUDIENCE);
  }
  if (e.MCP_ADMIN_TOKEN !== undefined && e.MCP_ADMIN_TOKEN === e.MCP_SERVER_AUTH_TOKEN) {
    issue(
      "MCP_ADMIN_TOKEN",
      "MCP_ADMIN_TOKEN must differ from MCP_SERVER_AUTH_TOKEN: the admin token is the operator's " +
        "own; generate one with: openssl rand -hex 32",
    );
  }
  if (e.MCP_AUTH_DISABLED_ADMIN && !e.MCP_AUTH_DISABLED) {
    issue(
      "MCP_AUTH_DISABLED_ADMIN",
      "--no-auth-admin only widens --no-auth; give both, or neither",
    );
  }
  return issues;
}

/** Where approvals persist: the variable, else beside the fleet file; `off` (or no fleet) = memory. */
function approvalsPath(
  value: string | undefined,
  fleetPath: string | undefined,
): string | undefined {
  if (value !== undefined) {
    return ["off", "none", "false"].includes(value.toLowerCase()) ? undefined : value;
  }
  return fleetPath === undefined ? undefined : `${fleetPath}.approvals.json`;
}

function definedOnly<T extends Record<string, unknown>>(
  o: T,
): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as never;
}
