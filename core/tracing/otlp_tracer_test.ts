import assert from "node:assert/strict";
import { createLogger, silentLogger } from "../support/logger.ts";
import { OtlpTracer } from "./otlp_tracer.ts";
import { MAX_SLOTS } from "./span_store.ts";
import { tracingConfig } from "./tracing_config.ts";

/** A tracer with `env`'s settings, exporting where nothing listens (an export fails at once, logged once). */
function tracerWith(env: Record<string, string> = {}, logger = silentLogger): OtlpTracer {
  const { config } = tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", ...env });
  return new OtlpTracer(config, logger);
}

Deno.test("traceidratio samples about its ratio of new traces, whatever the id's top bit", async () => {
  const tracer = tracerWith({
    OTEL_TRACES_SAMPLER: "traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.25",
  });
  const shared = tracer.shared({});
  let sampled = 0;
  for (let i = 0; i < 4000; i++) {
    const span = tracer.request("tools/call", "t", undefined, undefined, shared);
    if (span.carrier().traceparent.endsWith("-01")) sampled++;
    span.end();
  }
  await tracer.shutdown();
  assert.ok(sampled > 800 && sampled < 1200, `${sampled} of 4000 sampled at 0.25`);
});

Deno.test("A span's handle used after the span ended changes nothing, even once its slot is reused", async () => {
  const tracer = tracerWith();
  const shared = tracer.shared({});
  const first = tracer.request("tools/call", "a", undefined, undefined, shared);
  const firstParent = first.carrier().traceparent;
  first.end();
  const second = tracer.request("tools/call", "b", undefined, undefined, shared);
  const slot = tracer.store.names.indexOf("tools/call");
  first.set("late", "x");
  first.fail("late", "x");
  first.end();
  assert.equal(tracer.store.counts[slot], 0, "the reused slot got none of the late attributes");
  assert.equal(tracer.store.errors[slot], undefined);
  // A child of the ended span still carries a valid context, of a trace of its own.
  const orphan = first.child("governance").carrier().traceparent;
  assert.match(orphan, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  assert.notEqual(orphan.slice(3, 35), firstParent.slice(3, 35));
  assert.notEqual(second.carrier().traceparent, firstParent);
  second.end();
  await tracer.shutdown();
});

Deno.test("A child carries its parent's trace id and its own span id", async () => {
  const tracer = tracerWith();
  const parentId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const meta = { traceparent: `00-${parentId}-00f067aa0ba902b7-01`, tracestate: "v=1" };
  const span = tracer.request("tools/call", "t", meta, undefined, tracer.shared({}));
  const child = span.child("tools/call", {}, "client", "echo");
  const [, trace, id, flags] = child.carrier().traceparent.split("-");
  assert.equal(trace, parentId);
  assert.equal(span.traceId, parentId);
  assert.notEqual(id, span.carrier().traceparent.split("-")[2]);
  assert.equal(flags, "01");
  assert.equal(child.carrier().tracestate, "v=1");
  child.end();
  span.end();
  await tracer.shutdown();
});

Deno.test("Spans keep their ids and parents while the store grows under them", async () => {
  const tracer = tracerWith();
  const shared = tracer.shared({});
  const open = Array.from({ length: 300 }, (_, i) => {
    const meta = { traceparent: `00-${i.toString(16).padStart(32, "a")}-00f067aa0ba902b7-01` };
    const span = tracer.request("tools/call", `t${i}`, meta, undefined, shared);
    return { i, span, child: span.child("governance") };
  });
  assert.ok(tracer.store.size >= 600, "the store grew past its first columns");
  for (const { i, span, child } of open) {
    const trace = i.toString(16).padStart(32, "a");
    assert.equal(span.traceId, trace);
    assert.equal(child.carrier().traceparent.split("-")[1], trace);
    child.end();
    span.end();
  }
  await tracer.shutdown();
});

Deno.test("A span past the store's open-span bound records nothing but still carries its trace on, and says so once", async () => {
  const lines: string[] = [];
  const tracer = tracerWith({}, createLogger({ sink: (l) => lines.push(l) }));
  const shared = tracer.shared({});
  const open = Array.from(
    { length: MAX_SLOTS },
    () => tracer.request("tools/call", "t", undefined, undefined, shared),
  );
  const parent = "4bf92f3577b34da6a3ce929d0e0e4736";
  const meta = { traceparent: `00-${parent}-00f067aa0ba902b7-01`, tracestate: "v=1" };
  const lost = tracer.request("tools/call", "t", meta, undefined, shared);
  const again = tracer.request("tools/call", "t", undefined, undefined, shared);
  assert.equal(lost.traceId, parent);
  const carried = lost.child("tools/call", {}, "client", "echo").carrier();
  assert.match(carried.traceparent, new RegExp(`^00-${parent}-[0-9a-f]{16}-01$`));
  assert.equal(carried.tracestate, "v=1");
  assert.match(again.carrier().traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  assert.equal(lines.filter((l) => l.includes("a span was not recorded")).length, 1);
  for (const span of open) span.end();
  await tracer.shutdown();
});

Deno.test("An unsampled request takes no slot and records nothing, but passes its caller's trace on unsampled", async () => {
  const tracer = tracerWith();
  const parent = "4bf92f3577b34da6a3ce929d0e0e4736";
  // parentbased_always_on (the default) follows the caller's "not sampled" flag.
  const meta = { traceparent: `00-${parent}-00f067aa0ba902b7-00`, tracestate: "v=1" };
  const span = tracer.request("tools/call", "t", meta, undefined, tracer.shared({}));
  assert.equal(span.recording, false);
  assert.equal(span.traceId, parent);
  const upstream = span.child("tools/call", { "gen_ai.tool.name": "echo" }, "client", "echo");
  assert.equal(upstream.recording, false);
  const carried = upstream.carrier();
  assert.match(carried.traceparent, new RegExp(`^00-${parent}-[0-9a-f]{16}-00$`));
  assert.notEqual(carried.traceparent.split("-")[2], "00f067aa0ba902b7", "its own span id");
  assert.equal(carried.tracestate, "v=1");
  upstream.end();
  span.end();
  assert.equal(tracer.store.size, 0, "no slot was made");
  await tracer.shutdown();
});

Deno.test("A sampled span records until it ends", async () => {
  const tracer = tracerWith();
  const span = tracer.request("tools/call", "t", undefined, undefined, tracer.shared({}));
  const child = span.child("governance");
  assert.equal(span.recording, true);
  assert.equal(child.recording, true);
  child.end();
  assert.equal(child.recording, false);
  assert.equal(span.recording, true);
  span.end();
  assert.equal(span.recording, false);
  await tracer.shutdown();
});
