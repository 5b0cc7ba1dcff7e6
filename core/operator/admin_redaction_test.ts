import assert from "node:assert/strict";
import { resolveConfig } from "../config/config.ts";
import { parseFleetConfig } from "../proxy/fleet_config.ts";
import { redactArgs, redactUrl } from "../support/redact.ts";
import { configSecrets, redactConfig, redactServer } from "./admin_redaction.ts";

const SECRETS = {
  MCP_SERVER_AUTH_TOKEN: "static-token-value",
  MCP_AUTH_JWT_SECRET: "jwt-secret-of-at-least-thirty-two-bytes",
  MCP_APPROVAL_SECRET: "approval-secret-of-at-least-thirty-two-bytes",
  NATS_URL: "nats://user:nats-password@127.0.0.1:4222",
  MCP_PLUGIN_MODEL_API_KEY: "model-api-key",
};

Deno.test("No configured secret survives redaction, and the keys that hold them stay", () => {
  const config = resolveConfig({ ...SECRETS, MCP_PLUGIN_MODEL_NAME: "small" });
  const text = JSON.stringify(redactConfig(config));
  for (const secret of Object.values(SECRETS).filter((s) => !s.startsWith("nats:"))) {
    assert.ok(!text.includes(secret), `${secret} leaked`);
  }
  assert.ok(!text.includes("nats-password"));
  const redacted = redactConfig(config);
  assert.equal(redacted.server.authToken, "[redacted]");
  assert.equal(redacted.pluginEnv.MCP_PLUGIN_MODEL_NAME, "small", "non-secret values stay");
  assert.equal(config.server.authToken, SECRETS.MCP_SERVER_AUTH_TOKEN, "the original is untouched");
});

Deno.test("Each server of a comma-separated NATS_URL (a NATS cluster) has its credentials redacted", () => {
  const config = resolveConfig({
    NATS_URL: "nats://a:first-secret@127.0.0.1:4222,nats://b:second-secret@127.0.0.1:4223",
  });
  const redacted = redactConfig(config).natsUrl ?? "";
  assert.ok(!redacted.includes("first-secret") && !redacted.includes("second-secret"), redacted);
  assert.match(redacted, /127\.0\.0\.1:4222.*,.*127\.0\.0\.1:4223/);
  assert.ok(configSecrets(config).includes("first-secret"));
  assert.ok(configSecrets(config).includes("second-secret"));
});

Deno.test("The trace exporter's headers (a collector's API key) and URL credentials are redacted", () => {
  const config = resolveConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "https://user:otlp-url-secret@collector.example.com:4318",
    OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=otlp-header-secret",
  });
  const redacted = redactConfig(config);
  const text = JSON.stringify(redacted);
  assert.ok(!text.includes("otlp-header-secret"));
  assert.ok(!text.includes("otlp-url-secret"));
  assert.equal(redacted.tracing.headers["x-api-key"], "[redacted]", "the header's name stays");
  assert.ok(configSecrets(config).includes("otlp-header-secret"));
});

Deno.test("A fleet server's header and env values, also per tenant, are redacted, their names kept", () => {
  const fleet = parseFleetConfig(
    `proxy_servers:
  - id: web
    url: https://user:pw@mcp.example.com/mcp?key=query-secret
    headers: { Authorization: Bearer header-secret }
  - id: local
    command: ["deno", "run", "x.ts"]
    env: { API_TOKEN: env-secret }
  - id: per-tenant
    command: ["deno", "run", "y.ts"]
    scope: tenant
    tenants: { acme: { env: { API_TOKEN: tenant-env-secret } } }
  - id: per-tenant-web
    url: https://mcp.example.com/mcp
    scope: tenant
    tenants: { acme: { headers: { Authorization: Bearer tenant-header-secret } } }
`,
    "fleet.yaml",
    {},
    { separator: "__", healthIntervalSeconds: 30 },
  );
  const text = JSON.stringify(fleet.servers.map(redactServer));
  const secrets = ["header-secret", "env-secret", "query-secret", ":pw@"];
  for (const secret of [...secrets, "tenant-env-secret", "tenant-header-secret"]) {
    assert.ok(!text.includes(secret), `${secret} leaked`);
  }
  assert.match(text, /"Authorization":"\[redacted\]"/);
  assert.match(text, /"API_TOKEN":"\[redacted\]"/);
});

Deno.test("A command argument after a secret-named flag, or in --flag=value form, is redacted; the flag stays", () => {
  assert.deepEqual(
    redactArgs(["server", "--api-key", "abc123", "--token=t0k", "-p", "s3cr3t", "--port", "8080"]),
    ["server", "--api-key", "[redacted]", "--token=[redacted]", "-p", "s3cr3t", "--port", "8080"],
  );
  assert.deepEqual(
    redactArgs(["--auth", "--verbose"]),
    ["--auth", "--verbose"],
    "a flag is no value",
  );
  assert.deepEqual(redactArgs(["--password", "hunter2"]), ["--password", "[redacted]"]);
});

Deno.test("Command arguments shaped like well-known API keys, or URLs with credentials, are redacted", () => {
  assert.deepEqual(
    redactArgs([
      "sk-proj-abcdef",
      "ghp_0123456789abcdef",
      "https://user:pw@db.example/x?token=q",
      "https://plain.example/",
    ]),
    [
      "[redacted]",
      "[redacted]",
      "https://%5Bredacted%5D@db.example/x?token=%5Bredacted%5D",
      "https://plain.example/",
    ],
  );
});

Deno.test("A fleet server's command is shown with its secret arguments redacted", () => {
  const fleet = parseFleetConfig(
    `proxy_servers:
  - id: gh
    command: ["npx", "server-github", "--github-token", "ghs_secret", "--repo", "a/b"]
`,
    "fleet.yaml",
    {},
    { separator: "__", healthIntervalSeconds: 30 },
  );
  const [server] = fleet.servers.map(redactServer);
  assert.deepEqual(server!.command, [
    "npx",
    "server-github",
    "--github-token",
    "[redacted]",
    "--repo",
    "a/b",
  ]);
});

Deno.test("A URL keeps its host and path when redacted", () => {
  assert.equal(redactUrl("https://h.example/p"), "https://h.example/p");
  assert.match(redactUrl("nats://u:p@h:4222"), /^nats:\/\/%5Bredacted%5D@h:4222/);
});
