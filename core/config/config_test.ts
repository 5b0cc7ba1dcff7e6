import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { join } from "node:path";
import { type ConfigFlags, loadConfig, resolveConfig } from "./config.ts";
import { TRACING_OFF } from "../tracing/tracing_config.ts";
import { GatewayError } from "../support/errors.ts";

/** Resolves and returns the `config_invalid` error it must throw. */
function configError(
  env: Record<string, string | undefined>,
  flags: ConfigFlags = {},
): GatewayError {
  try {
    resolveConfig(env, flags);
  } catch (error) {
    assert.ok(error instanceof GatewayError, `expected a GatewayError, got ${error}`);
    assert.equal(error.code, "config_invalid");
    return error;
  }
  assert.fail("expected resolveConfig to throw config_invalid");
}

Deno.test("resolveConfig resolves an empty environment to the documented defaults", () => {
  assert.deepEqual(resolveConfig({}), {
    server: {
      enabled: true,
      transport: "http",
      host: "127.0.0.1",
      port: 8787,
      authScopes: ["mcp"],
      authDisabled: false,
      authDisabledAdmin: false,
      jwt: {},
      allowedHosts: [],
      allowedOrigins: [],
      maxMessageBytes: 4 * 1024 * 1024,
      pageSize: 10_000,
      httpResponseMode: "sse",
      stdioTenant: "default",
      toolDiscoveryMode: "legacy",
      shutdownGraceMs: 10_000,
      bodyTimeoutMs: 30_000,
      httpSessionIdleMs: 1_800_000,
      maxSessions: 1000,
      maxSessionsPerTenant: 250,
      sseMaxQueueBytes: 16 * 1024 * 1024,
      sseMaxQueueMessages: 10_000,
      maxInFlightPerSession: 128,
    },
    proxy: { healthCheckIntervalSeconds: 30, toolSeparator: "__", startupWaitMs: 10_000 },
    dataDir: `${Deno.cwd()}/.agent33`,
    demo: false,
    discovery: { sources: [], timeoutMs: 10_000, intervalMs: 60_000 },
    pluginPaths: [],
    policyPath: "policies",
    engine: { model: "sampling" },
    governance: {
      approvalTtlSeconds: 600,
      maxPendingApprovalsPerTenant: 100,
      maxPendingApprovalsPerPrincipal: 20,
      maxSchemaWork: 10_000_000,
      maxSchemaCodePerUpstream: 16 * 1024 * 1024,
      approvalInBand: true,
      auditMaxBytes: 10 * 1024 * 1024,
      auditIncludeArguments: false,
    },
    scannerBlock: "high",
    scannerApproval: "medium",
    log: { level: "info", format: "text" },
    pluginEnv: {},
    tracing: TRACING_OFF,
  });
});

Deno.test("resolveConfig treats an empty variable as unset", () => {
  const config = resolveConfig({
    MCP_SERVER_PORT: "",
    MCP_SERVER_TRANSPORT: "",
    MCP_AUTH_DISABLED: "",
    MCP_PROXY_TOOL_SEPARATOR: "",
  });
  assert.equal(config.server.port, 8787);
  assert.equal(config.server.transport, "http");
  assert.equal(config.server.authDisabled, false);
  assert.equal(config.proxy.toolSeparator, "__");
});

Deno.test("resolveConfig reads each variable from the environment", () => {
  const config = resolveConfig({
    MCP_SERVER_ENABLED: "no",
    MCP_SERVER_TRANSPORT: "stdio",
    MCP_SERVER_HOST: "0.0.0.0",
    MCP_SERVER_PORT: "9000",
    MCP_SERVER_AUTH_TOKEN: "secret-token",
    MCP_SERVER_AUTH_SCOPES: "mcp, approver",
    MCP_ADMIN_TOKEN: "admin-secret",
    MCP_AUTH_TOKENS_FILE: "tokens.yaml",
    MCP_AUTH_JWT_SECRET: "hs-secret-hs-secret-hs-secret-hs-",
    MCP_AUTH_JWT_CLOCK_TOLERANCE: "5",
    MCP_AUTH_JWKS_URL: "https://idp.example.com/.well-known/jwks.json",
    MCP_AUTH_JWT_ISSUER: "https://idp.example.com",
    MCP_AUTH_JWT_AUDIENCE: "agent33",
    MCP_AUTH_DISABLED: "yes",
    MCP_AUTH_DISABLED_ADMIN: "yes",
    MCP_ALLOWED_HOSTS: "a.example, b.example ,",
    MCP_ALLOWED_ORIGINS: "https://a.example",
    MCP_MAX_MESSAGE_BYTES: "2048",
    MCP_LIST_PAGE_SIZE: "5",
    MCP_HTTP_RESPONSE_MODE: "json",
    MCP_STDIO_TENANT: "acme",
    MCP_TOOL_DISCOVERY_MODE: "search",
    MCP_SHUTDOWN_GRACE_MS: "500",
    MCP_HTTP_BODY_TIMEOUT_MS: "2000",
    MCP_MAX_SESSIONS: "40",
    MCP_MAX_SESSIONS_PER_TENANT: "4",
    MCP_SSE_MAX_QUEUE_BYTES: "65536",
    MCP_SSE_MAX_QUEUE_MESSAGES: "64",
    MCP_MAX_IN_FLIGHT_PER_SESSION: "16",
    MCP_PROXY_CONFIG_PATH: "fleet.yaml",
    MCP_PROXY_HEALTH_CHECK_INTERVAL: "5",
    MCP_PROXY_TOOL_SEPARATOR: ".",
    MCP_PROXY_STARTUP_WAIT: "3",
    MCP_DATA_DIR: "/var/lib/agent33",
    MCP_POLICY_PATH: "rules.yaml",
    NATS_URL: "nats://127.0.0.1:4222",
    MCP_LOG_LEVEL: "DEBUG",
    MCP_LOG_FORMAT: "json",
  });
  assert.deepEqual(config.server, {
    enabled: false,
    transport: "stdio",
    host: "0.0.0.0",
    port: 9000,
    authToken: "secret-token",
    authScopes: ["mcp", "approver"],
    adminToken: "admin-secret",
    authDisabled: true,
    authDisabledAdmin: true,
    tokensFile: "tokens.yaml",
    jwt: {
      secret: "hs-secret-hs-secret-hs-secret-hs-",
      jwksUrl: "https://idp.example.com/.well-known/jwks.json",
      issuer: "https://idp.example.com",
      audience: "agent33",
      clockToleranceSeconds: 5,
    },
    allowedHosts: ["a.example", "b.example"],
    allowedOrigins: ["https://a.example"],
    maxMessageBytes: 2048,
    pageSize: 5,
    httpResponseMode: "json",
    stdioTenant: "acme",
    toolDiscoveryMode: "search",
    shutdownGraceMs: 500,
    bodyTimeoutMs: 2000,
    httpSessionIdleMs: 1_800_000,
    maxSessions: 40,
    maxSessionsPerTenant: 4,
    sseMaxQueueBytes: 65536,
    sseMaxQueueMessages: 64,
    maxInFlightPerSession: 16,
  });
  assert.deepEqual(config.proxy, {
    configPath: "fleet.yaml",
    healthCheckIntervalSeconds: 5,
    toolSeparator: ".",
    startupWaitMs: 3000,
  });
  assert.equal(config.dataDir, "/var/lib/agent33");
  assert.equal(config.policyPath, "rules.yaml");
  assert.equal(config.natsUrl, "nats://127.0.0.1:4222");
  assert.deepEqual(config.log, { level: "debug", format: "json" });
});

Deno.test("resolveConfig refuses an HS256 secret shorter than 32 bytes, naming the variable", () => {
  const error = configError({ MCP_AUTH_JWT_SECRET: "0123456789abcdef" });
  assert.match(
    error.message,
    /MCP_AUTH_JWT_SECRET is 16 bytes; an HS256 secret needs at least 32 bytes/,
  );
});

Deno.test("resolveConfig refuses a JWKS URL without an audience", () => {
  const error = configError({ MCP_AUTH_JWKS_URL: "https://idp.example/jwks" });
  assert.match(error.message, /MCP_AUTH_JWKS_URL is set without MCP_AUTH_JWT_AUDIENCE/);
});

Deno.test("resolveConfig refuses unknown scopes for the static token", () => {
  const error = configError({ MCP_SERVER_AUTH_SCOPES: "mcp, root" });
  assert.match(
    error.message,
    /MCP_SERVER_AUTH_SCOPES must list scopes out of mcp, approver, operator, admin, all_tenants, received "root"/,
  );
});

Deno.test("resolveConfig refuses an admin token equal to the client token", () => {
  const error = configError({ MCP_SERVER_AUTH_TOKEN: "same", MCP_ADMIN_TOKEN: "same" });
  assert.match(error.message, /MCP_ADMIN_TOKEN must differ from MCP_SERVER_AUTH_TOKEN/);
});

Deno.test("resolveConfig refuses --no-auth-admin without --no-auth", () => {
  const error = configError({}, { noAuthAdmin: true });
  assert.match(error.message, /--no-auth-admin only widens --no-auth/);
  assert.equal(
    resolveConfig({}, { noAuth: true, noAuthAdmin: true }).server.authDisabledAdmin,
    true,
  );
});

Deno.test("resolveConfig accepts sse as an alias of the http transport", () => {
  assert.equal(resolveConfig({ MCP_SERVER_TRANSPORT: "sse" }).server.transport, "http");
  assert.equal(resolveConfig({}, { transport: "sse" }).server.transport, "http");
});

Deno.test("resolveConfig lets --transport override MCP_SERVER_TRANSPORT", () => {
  const config = resolveConfig({ MCP_SERVER_TRANSPORT: "http" }, { transport: "stdio" });
  assert.equal(config.server.transport, "stdio");
});

Deno.test("resolveConfig lets --host override MCP_SERVER_HOST", () => {
  const config = resolveConfig({ MCP_SERVER_HOST: "0.0.0.0" }, { host: "localhost" });
  assert.equal(config.server.host, "localhost");
});

Deno.test("resolveConfig lets --port override MCP_SERVER_PORT", () => {
  const config = resolveConfig({ MCP_SERVER_PORT: "9000" }, { port: "0" });
  assert.equal(config.server.port, 0);
});

Deno.test("resolveConfig lets --config override MCP_PROXY_CONFIG_PATH", () => {
  const config = resolveConfig({ MCP_PROXY_CONFIG_PATH: "env.yaml" }, { config: "flag.yaml" });
  assert.equal(config.proxy.configPath, "flag.yaml");
});

Deno.test("resolveConfig lets --no-auth override MCP_AUTH_DISABLED", () => {
  const config = resolveConfig({ MCP_AUTH_DISABLED: "false" }, { noAuth: true });
  assert.equal(config.server.authDisabled, true);
});

Deno.test("resolveConfig names the variable, the flag and the fix for a port that is not a number", () => {
  const error = configError({ MCP_SERVER_PORT: "abc" });
  assert.match(error.message, /MCP_SERVER_PORT must be an integer from 0 to 65535, received "abc"/);
  assert.match(error.message, /--port/);
});

Deno.test("resolveConfig names the flag for an out-of-range --port", () => {
  const error = configError({}, { port: "70000" });
  assert.match(error.message, /MCP_SERVER_PORT must be an integer from 0 to 65535/);
  assert.match(error.message, /received "70000"/);
  assert.match(error.message, /set by --port or MCP_SERVER_PORT/);
});

Deno.test("resolveConfig names the variable and the accepted values for a bad boolean", () => {
  const error = configError({ MCP_SERVER_ENABLED: "maybe" });
  assert.match(error.message, /MCP_SERVER_ENABLED must be true or false, received "maybe"/);
});

Deno.test("resolveConfig names the variable and the accepted values for an unknown transport", () => {
  const error = configError({ MCP_SERVER_TRANSPORT: "ws" });
  assert.match(error.message, /MCP_SERVER_TRANSPORT must be one of stdio, http, received "ws"/);
  assert.match(error.message, /--transport/);
});

Deno.test("resolveConfig rejects a tool separator that is not valid in a tool name", () => {
  const error = configError({ MCP_PROXY_TOOL_SEPARATOR: "a b" });
  assert.match(error.message, /MCP_PROXY_TOOL_SEPARATOR must be 1–8 characters/);
});

Deno.test("resolveConfig rejects a JWKS URL that is not an absolute URL", () => {
  const error = configError({ MCP_AUTH_JWKS_URL: "idp.example.com/jwks" });
  assert.match(error.message, /MCP_AUTH_JWKS_URL must be an absolute URL, e\.g\. https:\/\//);
});

Deno.test("resolveConfig names the variable and the accepted values for an unknown log level", () => {
  const error = configError({ MCP_LOG_LEVEL: "loud" });
  assert.match(error.message, /MCP_LOG_LEVEL must be one of debug, info, warn, error/);
});

Deno.test("resolveConfig reports every problem together", () => {
  const error = configError({ MCP_SERVER_PORT: "abc", MCP_LOG_FORMAT: "xml" }, {
    transport: "ws",
  });
  const problems = error.data.problems as string[];
  assert.equal(problems.length, 3);
  for (const variable of ["MCP_SERVER_PORT", "MCP_LOG_FORMAT", "MCP_SERVER_TRANSPORT"]) {
    assert.ok(
      problems.some((p) => p.startsWith(variable)),
      `no problem names ${variable}: ${problems}`,
    );
    assert.match(error.message, new RegExp(variable));
  }
});

Deno.test("resolveConfig reads the shutdown grace and the HTTP body deadline, refusing nonsense", () => {
  const config = resolveConfig({ MCP_SHUTDOWN_GRACE_MS: "2500", MCP_HTTP_BODY_TIMEOUT_MS: "1000" });
  assert.equal(config.server.shutdownGraceMs, 2500);
  assert.equal(config.server.bodyTimeoutMs, 1000);
  assert.equal(resolveConfig({ MCP_SHUTDOWN_GRACE_MS: "0" }).server.shutdownGraceMs, 0);
  assert.match(
    configError({ MCP_SHUTDOWN_GRACE_MS: "10s" }).message,
    /MCP_SHUTDOWN_GRACE_MS must be an integer from 0 to 600000, received "10s"/,
  );
  assert.match(
    configError({ MCP_HTTP_BODY_TIMEOUT_MS: "5" }).message,
    /MCP_HTTP_BODY_TIMEOUT_MS must be an integer from 100 to 3600000/,
  );
});

Deno.test("resolveConfig keeps approvals beside the fleet file unless MCP_APPROVALS_PATH says otherwise", () => {
  assert.equal(resolveConfig({}).governance.approvalsPath, undefined);
  assert.equal(
    resolveConfig({ MCP_PROXY_CONFIG_PATH: "/srv/fleet.yaml" }).governance.approvalsPath,
    "/srv/fleet.yaml.approvals.json",
  );
  assert.equal(
    resolveConfig({ MCP_PROXY_CONFIG_PATH: "/srv/fleet.yaml", MCP_APPROVALS_PATH: "/var/a.json" })
      .governance.approvalsPath,
    "/var/a.json",
  );
  assert.equal(
    resolveConfig({ MCP_PROXY_CONFIG_PATH: "/srv/fleet.yaml", MCP_APPROVALS_PATH: "off" })
      .governance.approvalsPath,
    undefined,
  );
});

Deno.test("resolveConfig splits MCP_PLUGIN_PATHS on colons, dropping empty entries", {
  ignore: Deno.build.os === "windows",
}, () => {
  const config = resolveConfig({ MCP_PLUGIN_PATHS: "./plugins: /opt/agent33/plugins::" });
  assert.deepEqual(config.pluginPaths, ["./plugins", "/opt/agent33/plugins"]);
});

Deno.test("resolveConfig collects MCP_PLUGIN_* variables except MCP_PLUGIN_PATHS into pluginEnv", () => {
  const config = resolveConfig({
    MCP_PLUGIN_PATHS: "./plugins",
    MCP_PLUGIN_ECHO_GREETING: "hello",
    MCP_PLUGIN_ECHO_TIMES: "3",
    MCP_SERVER_HOST: "localhost",
    HOME: "/root",
  });
  assert.deepEqual(config.pluginEnv, {
    MCP_PLUGIN_ECHO_GREETING: "hello",
    MCP_PLUGIN_ECHO_TIMES: "3",
  });
});

Deno.test("loadConfig reads a .env file, and the process environment wins over it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const envFile = join(dir, ".env");
    await Deno.writeTextFile(
      envFile,
      "MCP_SERVER_PORT=9100\nMCP_SERVER_HOST=0.0.0.0\nMCP_PLUGIN_ECHO_GREETING=from-file\n",
    );
    const config = await loadConfig({}, { envFile, env: { MCP_SERVER_HOST: "localhost" } });
    assert.equal(config.server.port, 9100);
    assert.equal(config.server.host, "localhost");
    assert.deepEqual(config.pluginEnv, { MCP_PLUGIN_ECHO_GREETING: "from-file" });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("loadConfig applies flags over both the .env file and the environment", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const envFile = join(dir, ".env");
    await Deno.writeTextFile(envFile, "MCP_SERVER_PORT=9100\n");
    const config = await loadConfig({ port: "9200" }, {
      envFile,
      env: { MCP_SERVER_PORT: "9300" },
    });
    assert.equal(config.server.port, 9200);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("loadConfig treats a missing .env file as empty", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const config = await loadConfig({}, { envFile: join(dir, "absent.env"), env: {} });
    assert.equal(config.server.port, 8787);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("A relative MCP_DATA_DIR resolves against the working directory", () => {
  assert.equal(resolveConfig({ MCP_DATA_DIR: "state" }).dataDir, `${Deno.cwd()}/state`);
});

Deno.test("--demo fills every input left unset with the embedded default, its state in the data directory", () => {
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const config = resolveConfig({ MCP_DATA_DIR: "/tmp/a33" }, { demo: true });
  assert.equal(config.demo, true);
  assert.equal(config.proxy.configPath, `${root}demo/fleet.yaml`);
  assert.deepEqual(config.engine, {
    agentsPath: `${root}agents`,
    skillsPath: `${root}skills`,
    workflowsPath: `${root}workflows`,
    knowledgePath: `${root}knowledge`,
    model: "sampling",
  });
  assert.equal(config.policyPath, `${root}policies`);
  assert.equal(config.governance.auditLog, "/tmp/a33/audit.jsonl");
  assert.equal(config.governance.approvalsPath, "/tmp/a33/approvals.json");
});

Deno.test("--demo keeps what is configured: a fleet file, engine directories, the audit log", () => {
  const config = resolveConfig({
    MCP_PROXY_CONFIG_PATH: "mine.yaml",
    MCP_AGENTS_PATH: "my-agents",
    MCP_AUDIT_LOG: "audit.jsonl",
    MCP_APPROVALS_PATH: "off",
  }, { demo: true });
  assert.equal(config.proxy.configPath, "mine.yaml");
  assert.equal(config.engine.agentsPath, "my-agents");
  assert.equal(config.governance.auditLog, "audit.jsonl");
  assert.equal(config.governance.approvalsPath, undefined);
});

Deno.test("resolveConfig makes the gateway an OAuth resource of MCP_AUTH_OAUTH_ISSUER with the defaults", () => {
  const { server } = resolveConfig({
    MCP_AUTH_OAUTH_ISSUER: "https://idp.example.com/realms/agents",
    MCP_SERVER_PORT: "9000",
  });
  assert.deepEqual(server.oauth && { ...server.oauth, scopeMap: [...server.oauth.scopeMap] }, {
    issuer: "https://idp.example.com/realms/agents",
    resource: "http://127.0.0.1:9000/mcp",
    audience: ["http://127.0.0.1:9000/mcp"],
    scopeClaims: ["scope", "scp", "scopes"],
    scopeMap: [
      ["mcp", ["mcp"]],
      ["approver", ["approver"]],
      ["operator", ["operator"]],
      ["admin", ["admin"]],
      ["all_tenants", ["all_tenants"]],
    ],
    tenantClaim: "tenant",
  });
});

Deno.test("resolveConfig reads the OAuth scope map, tenant claim and default tenant", () => {
  const { server } = resolveConfig({
    MCP_SERVER_HOST: "0.0.0.0",
    MCP_AUTH_OAUTH_ISSUER: "https://login.example.com/",
    MCP_AUTH_OAUTH_RESOURCE: "https://gw.example.com/mcp",
    MCP_AUTH_OAUTH_SCOPE_MAP: "mcp:tools=mcp, gw.admin=admin, gw.ops=operator, gw.ops=approver",
    MCP_AUTH_OAUTH_TENANT_CLAIM: "org_id",
    MCP_AUTH_OAUTH_TENANT_DEFAULT: "guests",
    MCP_AUTH_JWKS_COOLDOWN: "5",
    MCP_AUTH_OAUTH_AUDIENCE: "0b8c6c2e-1111-2222-3333-444455556666, api://agent33",
    MCP_AUTH_OAUTH_SCOPE_CLAIMS: "scp,roles",
  });
  assert.deepEqual(server.oauth?.audience, [
    "0b8c6c2e-1111-2222-3333-444455556666",
    "api://agent33",
  ]);
  assert.deepEqual(server.oauth?.scopeClaims, ["scp", "roles"]);
  assert.equal(server.oauth?.resource, "https://gw.example.com/mcp");
  assert.deepEqual([...server.oauth!.scopeMap], [
    ["mcp:tools", ["mcp"]],
    ["gw.admin", ["admin"]],
    ["gw.ops", ["operator", "approver"]],
  ]);
  assert.equal(server.oauth?.tenantClaim, "org_id");
  assert.equal(server.oauth?.tenantFallback, "guests");
  assert.equal(server.jwt.jwksCooldownSeconds, 5);
});

Deno.test("resolveConfig needs MCP_AUTH_OAUTH_RESOURCE off loopback or on port 0", () => {
  for (const env of [{ MCP_SERVER_HOST: "0.0.0.0" }, { MCP_SERVER_PORT: "0" }]) {
    const error = configError({ MCP_AUTH_OAUTH_ISSUER: "https://idp.example.com", ...env });
    assert.match(error.message, /MCP_AUTH_OAUTH_RESOURCE is required with MCP_AUTH_OAUTH_ISSUER/);
  }
});

Deno.test("resolveConfig refuses an OAuth issuer over plain http off loopback", () => {
  const error = configError({ MCP_AUTH_OAUTH_ISSUER: "http://idp.example.com" });
  assert.match(error.message, /MCP_AUTH_OAUTH_ISSUER must be an https URL/);
  assert.equal(
    resolveConfig({ MCP_AUTH_OAUTH_ISSUER: "http://127.0.0.1:4000" }).server.oauth?.issuer,
    "http://127.0.0.1:4000",
  );
});

Deno.test("resolveConfig refuses MCP_AUTH_OAUTH_ISSUER together with the JWT key settings", () => {
  const error = configError({
    MCP_AUTH_OAUTH_ISSUER: "https://idp.example.com",
    MCP_AUTH_JWKS_URL: "https://idp.example.com/jwks",
    MCP_AUTH_JWT_AUDIENCE: "gw",
  });
  assert.match(error.message, /unset MCP_AUTH_JWKS_URL, MCP_AUTH_JWT_AUDIENCE/);
});

Deno.test("resolveConfig refuses a scope map naming an unknown gateway scope", () => {
  const error = configError({
    MCP_AUTH_OAUTH_ISSUER: "https://idp.example.com",
    MCP_AUTH_OAUTH_SCOPE_MAP: "mcp:tools=tools",
  });
  assert.match(error.message, /"mcp:tools=tools" maps to "tools", which is not a gateway scope/);
});

Deno.test("resolveConfig refuses OAuth settings without MCP_AUTH_OAUTH_ISSUER", () => {
  const error = configError({ MCP_AUTH_OAUTH_RESOURCE: "https://gw.example.com/mcp" });
  assert.match(
    error.message,
    /MCP_AUTH_OAUTH_RESOURCE has no effect without MCP_AUTH_OAUTH_ISSUER/,
  );
});

Deno.test("NATS_URL takes the servers of one NATS cluster comma-separated, each checked", () => {
  const urls = "nats://127.0.0.1:4222,nats://127.0.0.1:4223";
  assert.equal(resolveConfig({ NATS_URL: urls }).natsUrl, urls);
  assert.match(
    configError({ NATS_URL: "nats://127.0.0.1:4222,http://127.0.0.1:4223" }).message,
    /NATS_URL must look like nats:\/\/127\.0\.0\.1:4222 \(several servers/,
  );
});

Deno.test("cluster mode needs NATS_URL, names the fix, and defaults the replica id to host and pid", () => {
  assert.match(configError({ MCP_CLUSTER: "true" }).message, /MCP_CLUSTER=true needs NATS_URL/);
  assert.equal(resolveConfig({}).cluster, undefined);
  const cluster = resolveConfig({ MCP_CLUSTER: "true", NATS_URL: "nats://127.0.0.1:4222" }).cluster;
  assert.equal(cluster?.kvReplicas, 1);
  assert.equal(cluster?.heartbeatMs, 5000);
  assert.match(cluster?.replicaId ?? "", new RegExp(`-${Deno.pid}$`));
  assert.deepEqual(
    resolveConfig({
      MCP_CLUSTER: "true",
      NATS_URL: "nats://127.0.0.1:4222",
      MCP_REPLICA_ID: "gw-a",
      MCP_CLUSTER_KV_REPLICAS: "3",
      MCP_CLUSTER_HEARTBEAT_MS: "1000",
    }).cluster,
    { replicaId: "gw-a", kvReplicas: 3, heartbeatMs: 1000, configSource: "shared" },
  );
  assert.match(configError({ MCP_REPLICA_ID: "a.b" }).message, /MCP_REPLICA_ID must be/);
});
