/**
 * Trace export settings from the standard OpenTelemetry variables (`OTEL_*`), as the OTel SDKs
 * read them. Tracing is off unless an OTLP endpoint is named (or `OTEL_TRACES_EXPORTER=otlp`
 * asks for the default one): a gateway that nobody pointed at a collector does no tracing work.
 * @module
 */

/** How spans leave the gateway. */
export interface TracingConfig {
  /** False: no tracer is built and the hot path checks one value. */
  enabled: boolean;
  /** The OTLP/HTTP traces URL (`…/v1/traces`). */
  endpoint: string;
  protocol: "http/protobuf" | "http/json";
  /** OTEL_EXPORTER_OTLP_HEADERS / _TRACES_HEADERS (e.g. an API key); never logged. */
  headers: Record<string, string>;
  /** OTEL_EXPORTER_OTLP_TIMEOUT / _TRACES_TIMEOUT, ms per export request. */
  timeoutMs: number;
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES. */
  resourceAttributes: Record<string, string>;
  sampler:
    | "always_on"
    | "always_off"
    | "traceidratio"
    | "parentbased_always_on"
    | "parentbased_always_off"
    | "parentbased_traceidratio";
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the `traceidratio` samplers. */
  samplerRatio: number;
  /** OTEL_BSP_SCHEDULE_DELAY: ms a span waits for its batch to fill before it is sent anyway. */
  batchDelayMs: number;
  /** OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans per export request. */
  batchSpans: number;
  /** OTEL_BSP_MAX_QUEUE_SIZE: spans waiting or in flight before new ones are dropped. */
  maxQueuedSpans: number;
}

/** Tracing as it is with none of the variables set. */
export const TRACING_OFF: TracingConfig = {
  enabled: false,
  endpoint: "http://localhost:4318/v1/traces",
  protocol: "http/protobuf",
  headers: {},
  timeoutMs: 10_000,
  serviceName: "agent33",
  resourceAttributes: {},
  sampler: "parentbased_always_on",
  samplerRatio: 1,
  batchDelayMs: 1000,
  batchSpans: 2048,
  maxQueuedSpans: 16_384,
};

const SAMPLERS = new Set<TracingConfig["sampler"]>([
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
]);

/** One bad variable: its name and what to set instead. */
export interface TracingIssue {
  variable: string;
  message: string;
}

/** Reads the `OTEL_*` variables; issues name each bad one (the caller fails the config with them). */
export function tracingConfig(
  env: Record<string, string | undefined>,
): { config: TracingConfig; issues: TracingIssue[] } {
  const issues: TracingIssue[] = [];
  const get = (name: string) => {
    const value = env[name]?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  const issue = (variable: string, message: string) => issues.push({ variable, message });

  const disabled = get("OTEL_SDK_DISABLED")?.toLowerCase() === "true";
  const exporters = (get("OTEL_TRACES_EXPORTER") ?? "").toLowerCase().split(",").map((s) =>
    s.trim()
  ).filter(Boolean);
  for (const exporter of exporters) {
    if (exporter !== "otlp" && exporter !== "none") {
      issue(
        "OTEL_TRACES_EXPORTER",
        `OTEL_TRACES_EXPORTER "${exporter}" is not supported; use otlp (OTLP over HTTP) or none`,
      );
    }
  }
  const tracesEndpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const baseEndpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT");
  // The signal's own URL is used as given; the base URL gets the signal's path (the OTLP spec).
  const endpoint = tracesEndpoint ??
    (baseEndpoint === undefined
      ? TRACING_OFF.endpoint
      : `${baseEndpoint.replace(/\/+$/, "")}/v1/traces`);
  for (
    const [variable, value] of [
      ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tracesEndpoint],
      ["OTEL_EXPORTER_OTLP_ENDPOINT", baseEndpoint],
    ] as const
  ) {
    if (value !== undefined && !/^https?:\/\/[^/\s]+/i.test(value)) {
      issue(variable, `${variable} must be an http(s) URL, e.g. http://127.0.0.1:4318`);
    }
  }
  const protocol = (get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ??
    get("OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf").toLowerCase();
  if (protocol !== "http/protobuf" && protocol !== "http/json") {
    issue(
      get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
        : "OTEL_EXPORTER_OTLP_PROTOCOL",
      `OTLP protocol "${protocol}" is not supported; use http/protobuf or http/json ` +
        "(a collector's port 4318)",
    );
  }
  const headers = {
    ...keyValues(get("OTEL_EXPORTER_OTLP_HEADERS"), "OTEL_EXPORTER_OTLP_HEADERS", issue),
    ...keyValues(
      get("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
      "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
      issue,
    ),
  };
  const timeoutName = get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") === undefined
    ? "OTEL_EXPORTER_OTLP_TIMEOUT"
    : "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
  const timeoutMs = wholeSetting(get, issue, timeoutName, TRACING_OFF.timeoutMs, 100, 600_000, MS);
  const resourceAttributes = keyValues(
    get("OTEL_RESOURCE_ATTRIBUTES"),
    "OTEL_RESOURCE_ATTRIBUTES",
    issue,
  );
  const serviceName = get("OTEL_SERVICE_NAME") ?? resourceAttributes["service.name"] ??
    TRACING_OFF.serviceName;
  const sampler = (get("OTEL_TRACES_SAMPLER") ?? TRACING_OFF.sampler).toLowerCase();
  if (!SAMPLERS.has(sampler as TracingConfig["sampler"])) {
    issue(
      "OTEL_TRACES_SAMPLER",
      `OTEL_TRACES_SAMPLER "${sampler}" is not supported; use one of ${[...SAMPLERS].join(", ")}`,
    );
  }
  const ratioText = get("OTEL_TRACES_SAMPLER_ARG");
  const samplerRatio = ratioText === undefined ? 1 : Number(ratioText);
  if (!(samplerRatio >= 0 && samplerRatio <= 1)) {
    issue("OTEL_TRACES_SAMPLER_ARG", "OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1");
  }
  const { batchDelayMs, batchSpans, maxQueuedSpans } = batchSettings(get, issue);
  const asked = exporters.includes("otlp") || tracesEndpoint !== undefined ||
    baseEndpoint !== undefined;
  const enabled = !disabled && asked &&
    !(exporters.length > 0 && exporters.every((e) => e === "none"));
  return {
    config: {
      enabled,
      endpoint,
      protocol: protocol === "http/json" ? "http/json" : "http/protobuf",
      headers,
      timeoutMs,
      serviceName,
      resourceAttributes,
      sampler: sampler as TracingConfig["sampler"],
      samplerRatio,
      batchDelayMs,
      batchSpans,
      maxQueuedSpans,
    },
    issues,
  };
}

const MS = " of milliseconds";

/** `variable` as a whole number from `least` to `most` (`fallback` when unset); an issue otherwise. */
function wholeSetting(
  get: (name: string) => string | undefined,
  issue: (variable: string, message: string) => void,
  variable: string,
  fallback: number,
  least: number,
  most: number,
  unit = "",
): number {
  const text = get(variable);
  const value = text === undefined ? fallback : Number(text);
  if (Number.isInteger(value) && value >= least && value <= most) return value;
  issue(variable, `${variable} must be a whole number${unit} from ${least} to ${most}`);
  return fallback;
}

/** The batch processor's `OTEL_BSP_*` variables, each a whole number in its range. */
function batchSettings(
  get: (name: string) => string | undefined,
  issue: (variable: string, message: string) => void,
): Pick<TracingConfig, "batchDelayMs" | "batchSpans" | "maxQueuedSpans"> {
  const whole = (variable: string, fallback: number, least: number, most: number, unit = "") =>
    wholeSetting(get, issue, variable, fallback, least, most, unit);
  const batchDelayMs = whole("OTEL_BSP_SCHEDULE_DELAY", TRACING_OFF.batchDelayMs, 1, 600_000, MS);
  const maxQueuedSpans = whole(
    "OTEL_BSP_MAX_QUEUE_SIZE",
    TRACING_OFF.maxQueuedSpans,
    1,
    1_048_576,
  );
  const batchSpans = whole(
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    Math.min(TRACING_OFF.batchSpans, maxQueuedSpans),
    1,
    65_536,
  );
  if (batchSpans > maxQueuedSpans) {
    issue(
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
      `OTEL_BSP_MAX_EXPORT_BATCH_SIZE (${batchSpans}) must not exceed OTEL_BSP_MAX_QUEUE_SIZE ` +
        `(${maxQueuedSpans})`,
    );
  }
  return { batchDelayMs, batchSpans, maxQueuedSpans };
}

/** `k=v,k2=v2` with percent-encoded values (the W3C Baggage form the OTel spec uses). */
function keyValues(
  text: string | undefined,
  variable: string,
  issue: (variable: string, message: string) => void,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const pair of text.split(",")) {
    if (pair.trim() === "") continue;
    const at = pair.indexOf("=");
    const key = at <= 0 ? "" : pair.slice(0, at).trim();
    if (key === "") {
      // The value may be a secret: the message names the variable, not its text.
      issue(variable, `${variable} must be key=value pairs separated by commas`);
      continue;
    }
    try {
      out[key] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      issue(variable, `${variable} has a value that is not valid percent-encoding (key ${key})`);
    }
  }
  return out;
}
