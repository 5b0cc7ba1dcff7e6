/**
 * The environment variables of the upstream fleet, its data directory, plugins and discovery: each declared once, with its
 * parser, default and meaning (core/config/settings/settings.ts joins the groups; docs are generated).
 * @module
 */
import { DEFAULT_DATA_DIR } from "../data_dir.ts";
import { int, list, setting, text } from "./setting.ts";

/** The variables of the upstream fleet, its data directory, plugins and discovery. */
export const FLEET_SETTINGS = {
  MCP_DISCOVERY: setting({
    group: "discovery",
    schema: list,
    default: [],
    shownDefault: "none (off)",
    meaning:
      "Discovery plugins the gateway keeps running, e.g. `k8s,lan` ([sync-and-discovery.md](sync-and-discovery.md#running-discovery-in-the-gateway))",
  }),
  MCP_DISCOVERY_TIMEOUT_MS: setting({
    group: "discovery",
    schema: int("MCP_DISCOVERY_TIMEOUT_MS", 100, 600_000),
    default: 10_000,
    meaning:
      "How long one discovery list (or a forced `?discover=true` round) may take; a slower source is reported and retried with backoff",
  }),
  MCP_DISCOVERY_INTERVAL_SECONDS: setting({
    group: "discovery",
    schema: int("MCP_DISCOVERY_INTERVAL_SECONDS", 1, 86_400),
    default: 60,
    meaning:
      "How often running discovery lists sources without a live feed (`lan`, `tailscale`) again",
  }),
  MCP_PROXY_CONFIG_PATH: setting({
    group: "fleet",
    schema: text,
    shownDefault: "none (`--demo`: `demo/fleet.yaml`)",
    meaning: "Fleet YAML of upstream MCP servers (`--config`)",
  }),
  MCP_PROXY_STARTUP_WAIT: setting({
    group: "fleet",
    schema: int("MCP_PROXY_STARTUP_WAIT", 0, 600),
    default: 10,
    meaning:
      "Seconds a list (`tools/list`, `resources/list`, `resources/templates/list`, `prompts/list`) waits for upstreams still on their first start, so a client that lists once right after connecting sees the whole fleet; `0` answers at once",
  }),
  MCP_DATA_DIR: setting({
    group: "fleet",
    schema: text,
    default: DEFAULT_DATA_DIR,
    meaning:
      "The one directory the gateway writes state to, resolved against the working directory and created (owner-only) at start when a fleet is configured; `--demo` keeps its audit log, approvals and the memory server's graph there. A fleet file's `${MCP_DATA_DIR}` is its absolute path",
  }),
  MCP_PROXY_HEALTH_CHECK_INTERVAL: setting({
    group: "fleet",
    schema: int("MCP_PROXY_HEALTH_CHECK_INTERVAL", 1, 86_400),
    default: 30,
    meaning: "Seconds between upstream health checks",
  }),
  MCP_PROXY_TOOL_SEPARATOR: setting({
    group: "fleet",
    schema: text.refine((v) => v === undefined || /^[A-Za-z0-9_.-]{1,8}$/.test(v), {
      message:
        "MCP_PROXY_TOOL_SEPARATOR must be 1–8 characters valid in a tool name (letters, digits, _ - .), e.g. __",
    }),
    default: "__",
    meaning: "Separator in `<server_id><separator><tool>`",
  }),
  MCP_PLUGIN_PATHS: setting({
    group: "plugins",
    schema: text,
    shownDefault: "none",
    meaning: "Extra plugin directories, separated by `:`",
  }),
  NATS_URL: setting({
    group: "fleet",
    schema: text.refine(
      (v) =>
        v === undefined ||
        v.split(",").every((u) => /^(nats|tls|wss?):\/\/./.test(u.trim()) || !u.includes("://")),
      {
        message:
          "NATS_URL must look like nats://127.0.0.1:4222 (several servers of one cluster: comma-separated)",
      },
    ),
    shownDefault: "none (in-process bus)",
    meaning:
      "NATS server for fleet events, e.g. `nats://127.0.0.1:4222`; the servers of one NATS cluster comma-separated",
  }),
};
