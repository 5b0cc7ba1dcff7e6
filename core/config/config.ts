/**
 * Gateway configuration: environment variables (and an optional `.env`), overridden by CLI flags,
 * validated once with zod into a fully resolved {@link GatewayConfig}.
 *
 * User config is a flat map of optional variables; resolved config has every field. One function,
 * {@link resolveConfig}, joins them, and every error names the variable (or flag) and the fix.
 * @module
 */
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { type EnvironmentSource, loadEnvironment } from "./environment.ts";
import { GatewayError } from "../support/errors.ts";
import { JWKS_NEEDS_AUDIENCE } from "../auth/jwt_verifier.ts";
import { isLoopbackHost } from "../auth/host_guard.ts";
import type { ScopeMap } from "../auth/scope_map.ts";
import { resolveDataDir } from "./data_dir.ts";
import { ENV_SCHEMA, type ParsedEnv, type SettledEnv, withDefaults } from "./settings/settings.ts";
import type { ClusterConfig } from "./settings/cluster_settings.ts";
import { type TracingConfig, tracingConfig } from "../tracing/tracing_config.ts";

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
    /** MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL: pending approval requests one caller may have. */
    maxPendingApprovalsPerPrincipal: number;
    /** MCP_MAX_SCHEMA_WORK: most work checking one call's arguments may take (schema_cost.ts). */
    maxSchemaWork: number;
    /** MCP_MAX_SCHEMA_CODE_PER_UPSTREAM: validation code compiled for one upstream, ever. */
    maxSchemaCodePerUpstream: number;
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
  /** MCP_CLUSTER: present when replicas share state through NATS JetStream (needs `natsUrl`). */
  cluster?: ClusterConfig;
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
  const v = withDefaults(e);
  return {
    server: {
      enabled: v.MCP_SERVER_ENABLED,
      transport: v.MCP_SERVER_TRANSPORT,
      host: v.MCP_SERVER_HOST,
      port: v.MCP_SERVER_PORT,
      ...(e.MCP_SERVER_AUTH_TOKEN === undefined ? {} : { authToken: e.MCP_SERVER_AUTH_TOKEN }),
      authScopes: v.MCP_SERVER_AUTH_SCOPES,
      ...(e.MCP_ADMIN_TOKEN === undefined ? {} : { adminToken: e.MCP_ADMIN_TOKEN }),
      authDisabled: v.MCP_AUTH_DISABLED,
      authDisabledAdmin: v.MCP_AUTH_DISABLED_ADMIN,
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
        oauth: oauthSettings(v, e.MCP_AUTH_OAUTH_ISSUER),
      }),

      allowedHosts: v.MCP_ALLOWED_HOSTS,
      allowedOrigins: v.MCP_ALLOWED_ORIGINS,
      maxMessageBytes: v.MCP_MAX_MESSAGE_BYTES,
      pageSize: v.MCP_LIST_PAGE_SIZE,
      httpResponseMode: v.MCP_HTTP_RESPONSE_MODE,
      stdioTenant: v.MCP_STDIO_TENANT,
      toolDiscoveryMode: v.MCP_TOOL_DISCOVERY_MODE,
      shutdownGraceMs: v.MCP_SHUTDOWN_GRACE_MS,
      bodyTimeoutMs: v.MCP_HTTP_BODY_TIMEOUT_MS,
      httpSessionIdleMs: v.MCP_HTTP_SESSION_IDLE_SECONDS * 1000,
      maxSessions: v.MCP_MAX_SESSIONS,
      maxSessionsPerTenant: v.MCP_MAX_SESSIONS_PER_TENANT,
      sseMaxQueueBytes: v.MCP_SSE_MAX_QUEUE_BYTES,
      sseMaxQueueMessages: v.MCP_SSE_MAX_QUEUE_MESSAGES,
      maxInFlightPerSession: v.MCP_MAX_IN_FLIGHT_PER_SESSION,
    },
    proxy: {
      ...(e.MCP_PROXY_CONFIG_PATH === undefined ? {} : { configPath: e.MCP_PROXY_CONFIG_PATH }),
      healthCheckIntervalSeconds: v.MCP_PROXY_HEALTH_CHECK_INTERVAL,
      toolSeparator: v.MCP_PROXY_TOOL_SEPARATOR,
      startupWaitMs: v.MCP_PROXY_STARTUP_WAIT * 1000,
    },
    dataDir,
    demo,
    pluginPaths: (v.MCP_PLUGIN_PATHS ?? "").split(separator).map((p) => p.trim()).filter(Boolean),
    policyPath: v.MCP_POLICY_PATH,
    engine: {
      ...definedOnly({
        agentsPath: e.MCP_AGENTS_PATH,
        skillsPath: e.MCP_SKILLS_PATH,
        workflowsPath: e.MCP_WORKFLOWS_PATH,
        knowledgePath: e.MCP_KNOWLEDGE_PATH,
      }),
      model: v.MCP_ENGINE_MODEL,
    },
    governance: {
      ...(e.MCP_APPROVAL_SECRET === undefined ? {} : { approvalSecret: e.MCP_APPROVAL_SECRET }),
      approvalTtlSeconds: v.MCP_APPROVAL_TTL,
      maxPendingApprovalsPerTenant: v.MCP_MAX_PENDING_APPROVALS_PER_TENANT,
      maxPendingApprovalsPerPrincipal: v.MCP_MAX_PENDING_APPROVALS_PER_PRINCIPAL,
      maxSchemaWork: v.MCP_MAX_SCHEMA_WORK,
      maxSchemaCodePerUpstream: v.MCP_MAX_SCHEMA_CODE_PER_UPSTREAM,
      approvalInBand: v.MCP_APPROVAL_IN_BAND,
      ...(e.MCP_AUDIT_LOG === undefined ? {} : { auditLog: e.MCP_AUDIT_LOG }),
      auditMaxBytes: v.MCP_AUDIT_MAX_BYTES,
      auditIncludeArguments: v.MCP_AUDIT_INCLUDE_ARGUMENTS,
      ...definedOnly({
        approvalsPath: approvalsPath(e.MCP_APPROVALS_PATH, e.MCP_PROXY_CONFIG_PATH),
      }),
    },
    ...(e.NATS_URL === undefined ? {} : { natsUrl: e.NATS_URL }),
    ...(v.MCP_CLUSTER
      ? {
        cluster: {
          replicaId: e.MCP_REPLICA_ID ?? defaultReplicaId(),
          kvReplicas: v.MCP_CLUSTER_KV_REPLICAS,
          heartbeatMs: v.MCP_CLUSTER_HEARTBEAT_MS,
          configSource: v.MCP_CLUSTER_CONFIG,
        },
      }
      : {}),
    scannerBlock: v.MCP_SCANNER_BLOCK,
    scannerApproval: v.MCP_SCANNER_APPROVAL,
    log: { level: v.MCP_LOG_LEVEL, format: v.MCP_LOG_FORMAT },
    discovery: {
      sources: v.MCP_DISCOVERY,
      timeoutMs: v.MCP_DISCOVERY_TIMEOUT_MS,
      intervalMs: v.MCP_DISCOVERY_INTERVAL_SECONDS * 1000,
    },
    pluginEnv,
    tracing: tracing.config,
  };
}

/** The resolved MCP_AUTH_OAUTH_* settings. */
function oauthSettings(
  e: SettledEnv,
  issuer: string,
): NonNullable<GatewayConfig["server"]["oauth"]> {
  const resource = e.MCP_AUTH_OAUTH_RESOURCE ??
    defaultResource(e.MCP_SERVER_HOST, e.MCP_SERVER_PORT);
  return {
    issuer,
    resource,
    audience: e.MCP_AUTH_OAUTH_AUDIENCE ?? [resource],
    scopeMap: e.MCP_AUTH_OAUTH_SCOPE_MAP,
    scopeClaims: e.MCP_AUTH_OAUTH_SCOPE_CLAIMS,
    tenantClaim: e.MCP_AUTH_OAUTH_TENANT_CLAIM,
    ...definedOnly({ tenantFallback: e.MCP_AUTH_OAUTH_TENANT_DEFAULT }),
  };
}

/** MCP_AUTH_OAUTH_RESOURCE's default on a loopback host: the /mcp URL of the bound address. */
function defaultResource(host: string, port: number): string {
  const name = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return `http://${name}:${port}/mcp`;
}

export { DEFAULT_PAGE_SIZE } from "./settings/settings.ts";
export { type EnvironmentSource, loadEnvironment } from "./environment.ts";

/** This checkout's root, where the embedded defaults (demo/, agents/, …) live. */
const REPOSITORY = fileURLToPath(new URL("../../", import.meta.url));

/** Reads `.env` (process variables win over it), applies flags, and resolves. */
export async function loadConfig(
  flags: ConfigFlags = {},
  options: EnvironmentSource = {},
): Promise<GatewayConfig> {
  return resolveConfig(await loadEnvironment(options), flags);
}

/** `<hostname>-<pid>`, cut to a valid replica id (letters, digits, "-" and "_"). */
function defaultReplicaId(): string {
  let host = "replica";
  try {
    host = Deno.hostname();
  } catch {
    // Without --allow-sys the id is still unique per process on one machine.
  }
  const clean = host.replace(/[^A-Za-z0-9_-]/g, "-").replace(/^[-_]+/, "").slice(0, 50);
  return `${clean || "replica"}-${Deno.pid}`;
}

/** Rules that join variables: each issue's path names the variable to change. */
function crossChecks(e: ParsedEnv): z.core.$ZodIssue[] {
  const issues: z.core.$ZodIssue[] = [];
  const issue = (variable: string, message: string) =>
    issues.push({ code: "custom", path: [variable], message, input: undefined });
  if (e.MCP_CLUSTER === true && e.NATS_URL === undefined) {
    issue(
      "MCP_CLUSTER",
      "MCP_CLUSTER=true needs NATS_URL (replicas share their state through NATS JetStream); set NATS_URL=nats://… or unset MCP_CLUSTER",
    );
  }
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
    const host = withDefaults(e).MCP_SERVER_HOST;
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
