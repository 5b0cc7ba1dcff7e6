/**
 * Every environment variable the gateway reads, declared once: the parsed ones (grouped in the
 * `*_settings.ts` files beside this one) feed the config's zod schema, its defaults and the docs
 * table; those another module parses itself (tracing, sync, plugins) are listed with their reader,
 * so docs/configuration.md's table is complete (`deno task docs:config` writes it).
 * @module
 */
import { z } from "zod";
import { AUTH_SETTINGS } from "./auth_settings.ts";
import { CLUSTER_SETTINGS } from "./cluster_settings.ts";
import { ENGINE_SETTINGS } from "./engine_settings.ts";
import { FLEET_SETTINGS } from "./fleet_settings.ts";
import { GOVERNANCE_SETTINGS } from "./governance_settings.ts";
import { SERVER_SETTINGS } from "./server_settings.ts";
import type { Setting, VariableDoc } from "./setting.ts";

export { DEFAULT_PAGE_SIZE } from "./server_settings.ts";

/** Every variable the config parses, by name. */
export const SETTINGS = {
  ...SERVER_SETTINGS,
  ...AUTH_SETTINGS,
  ...FLEET_SETTINGS,
  ...ENGINE_SETTINGS,
  ...GOVERNANCE_SETTINGS,
  ...CLUSTER_SETTINGS,
};

type Table = typeof SETTINGS;

/** The parsed variables: each `undefined` when unset (cross-checks need to tell). */
export type ParsedEnv = { [K in keyof Table]: z.output<Table[K]["schema"]> };

/** The parsed variables with the table's defaults applied where unset. */
export type SettledEnv = {
  [K in keyof Table]: Table[K]["default"] extends undefined ? ParsedEnv[K]
    : Exclude<ParsedEnv[K], undefined>;
};

/** The zod schema of the whole environment, one field per declared variable. */
export const ENV_SCHEMA = z.object(
  Object.fromEntries(Object.entries(SETTINGS).map(([name, s]) => [name, s.schema])) as {
    [K in keyof Table]: Table[K]["schema"];
  },
);

/** `parsed` with every unset variable that has a default set to it (arrays copied, not shared). */
export function withDefaults(parsed: ParsedEnv): SettledEnv {
  const settled: Record<string, unknown> = { ...parsed };
  for (const [name, s] of Object.entries(SETTINGS) as [string, Setting][]) {
    if (settled[name] === undefined && s.default !== undefined) {
      settled[name] = Array.isArray(s.default) ? [...s.default] : s.default;
    }
  }
  return settled as SettledEnv;
}

/** A variable another module reads and validates itself, declared here for the docs. */
export interface ReadElsewhere extends VariableDoc {
  name: string;
  /** The module that parses it. */
  readBy: string;
}

/** The variables the config does not parse itself, with the module that does. */
export const READ_ELSEWHERE: readonly ReadElsewhere[] = [
  {
    name: "MCP_DISCOVERY_TRUSTED",
    group: "discovery",
    readBy: "core/operator/sync_routes.ts",
    shownDefault: "none",
    meaning: "Discovery sources whose candidates are proposed enabled, e.g. `k8s,tailscale`",
  },
  {
    name: "MCP_K8S_API",
    group: "discovery",
    readBy: "plugins/discovery-k8s/connection.ts",
    shownDefault: "none (a kubeconfig, else in-cluster)",
    meaning:
      "Kubernetes API server URL k8s discovery lists Services from, before any kubeconfig ([kubernetes.md](kubernetes.md))",
  },
  {
    name: "MCP_K8S_TOKEN",
    group: "discovery",
    readBy: "plugins/discovery-k8s/connection.ts",
    shownDefault: "none",
    meaning: "Bearer token sent to `MCP_K8S_API`",
  },
  {
    name: "MCP_K8S_NAMESPACE",
    group: "discovery",
    readBy: "plugins/discovery-k8s/mod.ts",
    shownDefault: "none (all namespaces)",
    meaning: "The one namespace k8s discovery lists Services in",
  },
  {
    name: "MCP_SYNC_ALLOW_PRIVATE",
    group: "discovery",
    readBy: "core/proxy/fleet_origin.ts",
    shownDefault: "`false`",
    meaning:
      "`true`: registry remotes may point at loopback, link-local and private hosts, at sync and at each connection ([sync-and-discovery.md](sync-and-discovery.md))",
  },
  {
    name: "MCP_SYNC_ENV_ALLOW",
    group: "discovery",
    readBy: "core/proxy/fleet_origin.ts",
    shownDefault: "none",
    meaning:
      "Variables entries written by sync or discovery may reference, e.g. `GITHUB_TOKEN`; never an `MCP_*` one ([sync-and-discovery.md](sync-and-discovery.md))",
  },
  {
    name: "MCP_SYNC_TRUSTED_REGISTRIES",
    group: "discovery",
    readBy: "core/sync/sync_run.ts",
    shownDefault: "none",
    meaning: "Registries (URLs, paths, `file://` URLs) whose new entries sync writes enabled",
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "none (no tracing)",
    meaning:
      "OTLP/HTTP collector base URL (`/v1/traces` is added); setting it, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, used as given), turns tracing on ([observability.md](observability.md))",
  },
  {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`http/protobuf`",
    meaning:
      "`http/protobuf` or `http/json` (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` wins); `grpc` is refused",
  },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "none",
    meaning:
      "`key=value,…` (values percent-encoded) sent with every export, e.g. an API key; `OTEL_EXPORTER_OTLP_TRACES_HEADERS` adds to it",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TIMEOUT",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`10000`",
    meaning: "Milliseconds one export may take (`…_TRACES_TIMEOUT` wins)",
  },
  {
    name: "OTEL_TRACES_EXPORTER",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`otlp` once an endpoint is set",
    meaning:
      "`otlp`, or `none` to turn tracing off; `otlp` alone exports to `http://localhost:4318`",
  },
  {
    name: "OTEL_SDK_DISABLED",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`false`",
    meaning: "`true` turns tracing off whatever else is set",
  },
  {
    name: "OTEL_SERVICE_NAME",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`agent33`",
    meaning: "The spans' `service.name` (else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`)",
  },
  {
    name: "OTEL_RESOURCE_ATTRIBUTES",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "none",
    meaning: "`key=value,…` resource attributes (e.g. `deployment.environment=prod`)",
  },
  {
    name: "OTEL_TRACES_SAMPLER",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`parentbased_always_on`",
    meaning:
      "`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`, `parentbased_traceidratio` (ratio in `OTEL_TRACES_SAMPLER_ARG`, 0–1)",
  },
  {
    name: "OTEL_BSP_SCHEDULE_DELAY",
    group: "observability",
    readBy: "core/tracing/tracing_config.ts",
    shownDefault: "`1000`",
    meaning:
      "Milliseconds a span waits for its export batch to fill; `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (`2048`) spans per batch, `OTEL_BSP_MAX_QUEUE_SIZE` (`16384`) waiting before new ones are dropped",
  },
  {
    name: "MCP_PLUGIN_<NAME>_<KEY>",
    group: "plugins",
    readBy: "core/config/config.ts",
    shownDefault: "none",
    meaning: "Config slice of plugin `<name>`: `ctx.config.<key>`",
  },
  {
    name: "MCP_PLUGIN_SCANNER_MODEL_PROVIDER",
    group: "plugins",
    readBy: "plugins/scanner-model/mod.ts",
    shownDefault: "none (off)",
    meaning:
      "A model provider (`scripted`, `openai:<model>`) that gives the scanner a second opinion in the background; see docs/scanner.md (`…_SEVERITY`, default `medium`)",
  },
];
