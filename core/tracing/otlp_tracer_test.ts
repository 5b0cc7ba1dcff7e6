import assert from "node:assert/strict";
import { silentLogger } from "../support/logger.ts";
import { OtlpTracer } from "./otlp_tracer.ts";
import { tracingConfig } from "./tracing_config.ts";

Deno.test("traceidratio samples about its ratio of new traces, whatever the id's top bit", async () => {
  const { config } = tracingConfig({
    // Nothing listens there: an export fails at once and is logged once.
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
    OTEL_TRACES_SAMPLER: "traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.25",
  });
  const tracer = new OtlpTracer(config, silentLogger);
  const shared = tracer.shared({});
  let sampled = 0;
  for (let i = 0; i < 4000; i++) {
    const span = tracer.request("tools/call t", {}, shared, {});
    if (span.carrier().traceparent.endsWith("-01")) sampled++;
    span.end();
  }
  await tracer.shutdown();
  assert.ok(sampled > 800 && sampled < 1200, `${sampled} of 4000 sampled at 0.25`);
});
