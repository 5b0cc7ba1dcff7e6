import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { createLogger } from "../support/logger.ts";
import { decodeTraceRequest } from "../../tests/support/otlp_proto.ts";
import { MAX_IN_FLIGHT, SpanExporter } from "./otlp_exporter.ts";
import { ProtobufBatch } from "./otlp_protobuf.ts";
import { recordFinished } from "../../tests/support/finished_spans.ts";
import { SpanStore } from "./span_store.ts";
import { TRACING_OFF, tracingConfig } from "./tracing_config.ts";

const { batchDelayMs: BATCH_DELAY_MS, batchSpans: BATCH_SPANS, maxQueuedSpans: MAX_QUEUED_SPANS } =
  TRACING_OFF;

const RESOURCE = { attributes: { "service.name": "t" }, scope: { name: "t", version: "1" } };

const store = new SpanStore();

/** Adds finished span `i` to `exporter`, its slot freed after as the tracer does. */
function addSpan(exporter: SpanExporter, i: number): void {
  const slot = recordFinished(store, {
    trace: [0x4bf92f35, 0x77b34da6, 0xa3ce929d, 0x0e0e4736],
    id: [1, i + 1],
    name: `span ${i}`,
    kind: 1,
    startMs: 1,
    endMs: 2,
  });
  exporter.add(store, slot);
  store.free(slot);
}

/** A collector on 127.0.0.1 counting the spans it is sent; `hold` keeps every answer until released. */
function collector(hold = false, env: Record<string, string> = {}) {
  const { promise: released, resolve: release } = Promise.withResolvers<void>();
  const { promise: first, resolve: arrived } = Promise.withResolvers<void>();
  const state = { spans: 0, requests: 0, open: 0, mostOpen: 0, names: [] as string[] };
  const http = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    state.open++;
    state.mostOpen = Math.max(state.mostOpen, state.open);
    const body = decodeTraceRequest(new Uint8Array(await req.arrayBuffer()));
    const spans = body.resourceSpans?.[0]?.scopeSpans?.[0]?.spans ?? [];
    state.spans += spans.length;
    state.names.push(...spans.map((s) => String(s.name)));
    state.requests++;
    arrived();
    if (hold) await released;
    state.open--;
    return new Response(null, { status: 200 });
  });
  const { config } = tracingConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${http.addr.port}`,
    ...env,
  });
  return { state, config, first, release: () => release(), close: () => http.shutdown() };
}

Deno.test("A batch goes out when its delay passes on the injected clock, not before", async () => {
  const sink = collector();
  const clock = new ManualClock();
  const batch = new ProtobufBatch(RESOURCE);
  const exporter = new SpanExporter(sink.config, createLogger({ sink: () => {} }), clock, batch);
  try {
    addSpan(exporter, 0);
    clock.advance(BATCH_DELAY_MS - 1);
    assert.equal(batch.count, 1, "still waiting for more spans");
    clock.advance(1);
    assert.equal(batch.count, 0, "sealed and posted");
    await sink.first;
    assert.equal(sink.state.spans, 1);
  } finally {
    await exporter.flush();
    await sink.close();
  }
});

Deno.test("A full batch goes out at once, without waiting for the delay", async () => {
  const sink = collector();
  const batch = new ProtobufBatch(RESOURCE);
  const exporter = new SpanExporter(
    sink.config,
    createLogger({ sink: () => {} }),
    new ManualClock(),
    batch,
  );
  try {
    for (let i = 0; i < BATCH_SPANS; i++) addSpan(exporter, i);
    assert.equal(batch.count, 0);
    await sink.first;
    assert.deepEqual({ ...sink.state, names: sink.state.names.length }, {
      spans: BATCH_SPANS,
      requests: 1,
      open: 0,
      mostOpen: 1,
      names: BATCH_SPANS,
    });
  } finally {
    await exporter.flush();
    await sink.close();
  }
});

Deno.test("Spans beyond the bound, waiting on a collector that does not answer, are dropped and reported", async () => {
  const sink = collector(true);
  const lines: string[] = [];
  const logger = createLogger({ sink: (line) => lines.push(line) });
  const exporter = new SpanExporter(
    sink.config,
    logger,
    new ManualClock(),
    new ProtobufBatch(RESOURCE),
  );
  try {
    for (let i = 0; i < MAX_QUEUED_SPANS + 100; i++) addSpan(exporter, i);
    await sink.first;
  } finally {
    sink.release();
    await exporter.flush();
    await sink.close();
  }
  assert.equal(sink.state.spans, MAX_QUEUED_SPANS, "every span within the bound arrives");
  assert.ok(sink.state.mostOpen <= MAX_IN_FLIGHT, `at most ${MAX_IN_FLIGHT} posts at once`);
  assert.ok(lines.some((line) => line.includes("100 spans dropped")), lines.join("\n"));
});

Deno.test("A batch arrives as it was sealed though the next spans reuse its buffer at once", async () => {
  for (const hold of [false, true]) {
    // One span per batch, so each span seals a batch; held, posts wait and later batches queue.
    const sink = collector(hold);
    const config = { ...sink.config, batchSpans: 1 };
    const exporter = new SpanExporter(
      config,
      createLogger({ sink: () => {} }),
      new ManualClock(),
      new ProtobufBatch(RESOURCE),
    );
    const count = MAX_IN_FLIGHT * 3;
    try {
      for (let i = 0; i < count; i++) addSpan(exporter, i);
      await sink.first;
    } finally {
      sink.release();
      await exporter.flush();
      await sink.close();
    }
    const expected = Array.from({ length: count }, (_, i) => `span ${i}`);
    assert.deepEqual(sink.state.names.toSorted(), expected.toSorted(), hold ? "held" : "at once");
  }
});
