/**
 * The effective configuration as an operator may see it: every value that can hold a secret is
 * replaced by a marker, keeping its key so the operator still sees that it is set.
 * @module
 */
import type { GatewayConfig } from "../config.ts";
import type { FleetServer } from "../proxy/fleet_config.ts";

/** What a secret is replaced with. */
export const REDACTED = "[redacted]";

// Plugin variables are free-form; these words mark the ones that hold credentials.
const SECRET_NAME = /SECRET|TOKEN|PASSW|KEY|CREDENTIAL|AUTH|PRIVATE/i;

/** The gateway configuration with the auth token, JWT secret, approval secret and credentials redacted. */
export function redactConfig(config: GatewayConfig): GatewayConfig {
  const copy = structuredClone(config);
  if (copy.server.authToken !== undefined) copy.server.authToken = REDACTED;
  if (copy.server.jwt.secret !== undefined) copy.server.jwt.secret = REDACTED;
  if (copy.governance.approvalSecret !== undefined) copy.governance.approvalSecret = REDACTED;
  if (copy.natsUrl !== undefined) copy.natsUrl = redactUrl(copy.natsUrl);
  for (const key of Object.keys(copy.pluginEnv)) {
    if (SECRET_NAME.test(key)) copy.pluginEnv[key] = REDACTED;
  }
  return copy;
}

/** A fleet server with its header and env values, URL credentials and secret arguments redacted. */
export function redactServer(server: FleetServer): FleetServer {
  const copy = structuredClone(server);
  for (const key of Object.keys(copy.headers)) copy.headers[key] = REDACTED;
  for (const key of Object.keys(copy.env)) copy.env[key] = REDACTED;
  if (copy.url !== undefined) copy.url = redactUrl(copy.url);
  if (copy.command !== undefined) copy.command = redactArgs(copy.command);
  return copy;
}

// Prefixes of API keys that travel on command lines (OpenAI, Anthropic, GitHub, Slack, AWS, GitLab).
const KEY_SHAPE = /^(sk-|sk_|ghp_|gho_|ghs_|github_pat_|xox[abpr]-|AKIA[0-9A-Z]{12}|glpat-)/;
const FLAG = /^--?([A-Za-z0-9][\w.-]*)$/;
const FLAG_WITH_VALUE = /^(--?[A-Za-z0-9][\w.-]*)=(.*)$/s;

/**
 * A command line with its secrets redacted: the value of a flag whose name says it holds one
 * (`--api-key X`, `--token=X`), URL credentials and query values, and arguments shaped like
 * well-known API keys. Flag names and everything else stay, so the operator still sees the command.
 */
export function redactArgs(args: readonly string[]): string[] {
  return args.map((arg, i) => {
    const assigned = FLAG_WITH_VALUE.exec(arg);
    if (assigned && SECRET_NAME.test(assigned[1]!)) return `${assigned[1]}=${REDACTED}`;
    const previous = i > 0 ? FLAG.exec(args[i - 1]!) : null;
    if (previous && SECRET_NAME.test(previous[1]!) && !arg.startsWith("-")) return REDACTED;
    if (KEY_SHAPE.test(arg)) return REDACTED;
    return arg.includes("://") ? redactUrl(arg) : arg;
  });
}

/** A URL without its password and query values (tokens often travel there). */
export function redactUrl(text: string): string {
  const url = URL.parse(text);
  if (url === null) return text;
  if (url.password) url.password = REDACTED;
  for (const key of [...new Set(url.searchParams.keys())]) url.searchParams.set(key, REDACTED);
  return url.href;
}
