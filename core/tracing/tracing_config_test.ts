import assert from "node:assert/strict";
import { resolveConfig } from "../config/config.ts";
import { GatewayError } from "../support/errors.ts";
import { TRACING_OFF, tracingConfig } from "./tracing_config.ts";

Deno.test("Tracing is off when no OTEL_* variable names an exporter", () => {
  assert.deepEqual(tracingConfig({}), { config: TRACING_OFF, issues: [] });
  assert.equal(tracingConfig({ OTEL_SERVICE_NAME: "gw" }).config.enabled, false);
});

Deno.test("OTEL_EXPORTER_OTLP_ENDPOINT turns tracing on and gets the traces path", () => {
  const { config } = tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" });
  assert.equal(config.enabled, true);
  assert.equal(config.endpoint, "http://collector:4318/v1/traces");
  assert.equal(config.protocol, "http/protobuf");
});

Deno.test("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given and wins over the base URL", () => {
  const { config } = tracingConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318",
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://b/custom/traces",
  });
  assert.equal(config.endpoint, "https://b/custom/traces");
});

Deno.test("OTEL_TRACES_EXPORTER=otlp alone exports to the default local collector", () => {
  const { config } = tracingConfig({ OTEL_TRACES_EXPORTER: "otlp" });
  assert.equal(config.enabled, true);
  assert.equal(config.endpoint, "http://localhost:4318/v1/traces");
});

Deno.test("OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn tracing off whatever else is set", () => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
  assert.equal(tracingConfig({ ...endpoint, OTEL_SDK_DISABLED: "true" }).config.enabled, false);
  assert.equal(tracingConfig({ ...endpoint, OTEL_TRACES_EXPORTER: "none" }).config.enabled, false);
});

Deno.test("Headers, resource attributes, service name, protocol and sampler are read the OTel way", () => {
  const { config, issues } = tracingConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_EXPORTER_OTLP_HEADERS: "api-key=s%3Dcret, x-team=ops",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.name=from-resource",
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.25",
  });
  assert.deepEqual(issues, []);
  assert.equal(config.protocol, "http/json");
  assert.deepEqual(config.headers, { "api-key": "s=cret", "x-team": "ops" });
  assert.equal(config.serviceName, "from-resource");
  assert.equal(config.resourceAttributes["deployment.environment"], "prod");
  assert.equal(config.sampler, "parentbased_traceidratio");
  assert.equal(config.samplerRatio, 0.25);
  assert.equal(
    tracingConfig({ OTEL_SERVICE_NAME: "named", OTEL_RESOURCE_ATTRIBUTES: "service.name=r" }).config
      .serviceName,
    "named",
  );
});

Deno.test("A bad OTEL_* value fails the configuration naming the variable, never a header's value", () => {
  const error = (() => {
    try {
      resolveConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_EXPORTER_OTLP_HEADERS: "secret-without-key",
        OTEL_TRACES_SAMPLER_ARG: "2",
      });
    } catch (e) {
      return e;
    }
  })();
  assert.ok(error instanceof GatewayError);
  assert.equal(error.code, "config_invalid");
  for (
    const variable of [
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_EXPORTER_OTLP_PROTOCOL",
      "OTEL_EXPORTER_OTLP_HEADERS",
      "OTEL_TRACES_SAMPLER_ARG",
    ]
  ) {
    assert.match(error.message, new RegExp(variable));
  }
  assert.doesNotMatch(error.message, /secret-without-key/);
});

Deno.test("The batch processor's OTEL_BSP_* variables set the export batching", () => {
  const { config, issues } = tracingConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
    OTEL_BSP_SCHEDULE_DELAY: "5000",
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "512",
    OTEL_BSP_MAX_QUEUE_SIZE: "4096",
  });
  assert.deepEqual(issues, []);
  assert.equal(config.batchDelayMs, 5000);
  assert.equal(config.batchSpans, 512);
  assert.equal(config.maxQueuedSpans, 4096);
  const unset = tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" }).config;
  assert.equal(unset.batchDelayMs, TRACING_OFF.batchDelayMs);
});

Deno.test("An OTEL_BSP_* value out of range, or a batch larger than the queue, is refused by name", () => {
  const { issues } = tracingConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
    OTEL_BSP_SCHEDULE_DELAY: "soon",
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "4096",
    OTEL_BSP_MAX_QUEUE_SIZE: "1024",
  });
  assert.deepEqual(issues.map((i) => i.variable), [
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
  ]);
  assert.match(issues[1]!.message, /must not exceed OTEL_BSP_MAX_QUEUE_SIZE \(1024\)/);
});
