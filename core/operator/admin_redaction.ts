/**
 * The effective configuration as an operator may see it: every value that can hold a secret is
 * replaced by a marker, keeping its key so the operator still sees that it is set. The patterns
 * and markers are core/support/redact.ts's, the one redaction used everywhere.
 * @module
 */
import type { GatewayConfig } from "../config/config.ts";
import type { FleetServer } from "../proxy/fleet_config.ts";
import { redactArgs, REDACTED, redactUrl, SECRET_NAME } from "../support/redact.ts";

/** The gateway configuration with the auth token, JWT secret, approval secret and credentials redacted. */
export function redactConfig(config: GatewayConfig): GatewayConfig {
  const copy = structuredClone(config);
  if (copy.server.authToken !== undefined) copy.server.authToken = REDACTED;
  if (copy.server.adminToken !== undefined) copy.server.adminToken = REDACTED;
  if (copy.server.jwt.secret !== undefined) copy.server.jwt.secret = REDACTED;
  if (copy.governance.approvalSecret !== undefined) copy.governance.approvalSecret = REDACTED;
  // NATS_URL may list the servers of a NATS cluster, comma-separated: redact each.
  if (copy.natsUrl !== undefined) copy.natsUrl = copy.natsUrl.split(",").map(redactUrl).join(",");
  for (const key of Object.keys(copy.pluginEnv)) {
    if (SECRET_NAME.test(key)) copy.pluginEnv[key] = REDACTED;
  }
  // OTEL_EXPORTER_OTLP_HEADERS carry a collector's API key; its URL may carry credentials.
  for (const key of Object.keys(copy.tracing.headers)) copy.tracing.headers[key] = REDACTED;
  copy.tracing.endpoint = redactUrl(copy.tracing.endpoint);
  return copy;
}

/** The secrets in the gateway configuration, for `registerSecrets` (core/support/redact.ts). */
export function configSecrets(config: GatewayConfig): string[] {
  const out = [
    config.server.authToken,
    config.server.adminToken,
    config.server.jwt.secret,
    config.governance.approvalSecret,
  ].filter((v): v is string => v !== undefined);
  for (const server of config.natsUrl?.split(",") ?? []) {
    const nats = URL.parse(server.trim());
    if (nats?.password) out.push(nats.password, decodeURIComponent(nats.password));
  }
  for (const [key, value] of Object.entries(config.pluginEnv)) {
    if (SECRET_NAME.test(key)) out.push(value);
  }
  out.push(...Object.values(config.tracing.headers).filter((v) => v.length >= 4));
  return out;
}

/** A fleet server with its header and env values, URL credentials and secret arguments redacted. */
export function redactServer(server: FleetServer): FleetServer {
  const copy = structuredClone(server);
  for (const key of Object.keys(copy.headers)) copy.headers[key] = REDACTED;
  for (const key of Object.keys(copy.env)) copy.env[key] = REDACTED;
  for (const own of Object.values(copy.tenants ?? {})) {
    for (const key of Object.keys(own.headers)) own.headers[key] = REDACTED;
    for (const key of Object.keys(own.env)) own.env[key] = REDACTED;
  }
  if (copy.url !== undefined) copy.url = redactUrl(copy.url);
  if (copy.command !== undefined) copy.command = redactArgs(copy.command);
  return copy;
}
