import assert from "node:assert/strict";
import { resolveConfig } from "../config.ts";
import { parseFleetConfig } from "../proxy/fleet_config.ts";
import { redactConfig, redactServer, redactUrl } from "./admin_redaction.ts";

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

Deno.test("A fleet server's header and env values are redacted, their names kept", () => {
  const fleet = parseFleetConfig(
    `proxy_servers:
  - id: web
    url: https://user:pw@mcp.example.com/mcp?key=query-secret
    headers: { Authorization: Bearer header-secret }
  - id: local
    command: ["deno", "run", "x.ts"]
    env: { API_TOKEN: env-secret }
`,
    "fleet.yaml",
    {},
    { separator: "__", healthIntervalSeconds: 30 },
  );
  const text = JSON.stringify(fleet.servers.map(redactServer));
  for (const secret of ["header-secret", "env-secret", "query-secret", ":pw@"]) {
    assert.ok(!text.includes(secret), `${secret} leaked`);
  }
  assert.match(text, /"Authorization":"\[redacted\]"/);
  assert.match(text, /"API_TOKEN":"\[redacted\]"/);
});

Deno.test("A URL keeps its host and path when redacted", () => {
  assert.equal(redactUrl("https://h.example/p"), "https://h.example/p");
  assert.match(redactUrl("nats://u:p@h:4222"), /^nats:\/\/u:%5Bredacted%5D@h:4222/);
});
