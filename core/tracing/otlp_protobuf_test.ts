import assert from "node:assert/strict";
import { jsonAttributes, JsonBatch } from "./otlp_json.ts";
import { encodeAttributes, ProtobufBatch } from "./otlp_protobuf.ts";
import { type OtlpResource, unixNanoDecimal, unixNanoWords } from "./span_batch.ts";
import { MAX_ATTRIBUTES, type SpanStore, SpanStore as Store } from "./span_store.ts";
import { type FinishedFields, recordFinished } from "../../tests/support/finished_spans.ts";
import { decodeTraceRequest, hex } from "../../tests/support/otlp_proto.ts";

interface Decoded {
  resourceSpans: {
    resource: { attributes: unknown[] };
    scopeSpans: { scope: unknown; spans: Record<string, unknown>[] }[];
  }[];
}
const decode = (bytes: Uint8Array) => decodeTraceRequest(bytes) as Decoded;
const spansOf = (bytes: Uint8Array) => decode(bytes).resourceSpans[0]!.scopeSpans[0]!.spans;

/**
 * The reference: Unix nanoseconds of a performance.now() reading in BigInt arithmetic, the time
 * origin's nanoseconds plus the reading's.
 */
function referenceNanos(now: number): string {
  const origin = performance.timeOrigin;
  const whole = Math.floor(origin);
  const originNanos = BigInt(whole) * 1_000_000n +
    BigInt(Math.min(999_999, Math.round((origin - whole) * 1e6)));
  return String(originNanos + BigInt(Math.round(now * 1e6)));
}

const RESOURCE: OtlpResource = {
  attributes: { "service.name": "agent33" },
  scope: { name: "agent33", version: "1.2.3" },
};

const store: SpanStore = new Store();

/** A finished span in a slot of the test's store; its undefined attributes left out as set() does. */
function span(overrides: Partial<FinishedFields> = {}): number {
  return recordFinished(store, {
    trace: [0x4bf92f35, 0x77b34da6, 0xa3ce929d, 0x0e0e4736],
    id: [0x00f067aa, 0x0ba902b7],
    name: "governance",
    kind: 1,
    startMs: 1.5,
    endMs: 2.25,
    ...overrides,
  });
}

const shared = (attributes: Record<string, string>) => ({
  attributes,
  proto: encodeAttributes(9, attributes),
  json: jsonAttributes(attributes),
});

Deno.test("The protobuf encoding decodes as OTLP's ExportTraceServiceRequest, field for field", () => {
  const batch = new ProtobufBatch(RESOURCE);
  batch.add(
    store,
    span({
      parent: [0xb7ad6b71, 0x69203331],
      traceState: "vendor=1",
      name: "tools/call",
      target: "a__b",
      kind: 2,
      startMs: 1234.567891,
      endMs: 1334.000001,
      attributes: { "agent33.verdict": "allow", ok: true, count: 300, ratio: 0.5, "ü": "→ ✓" },
      shared: shared({ "agent33.tenant": "acme" }),
      error: "Unknown tool",
    }),
  );
  assert.equal(batch.count, 1);
  const decoded = decode(batch.take());
  const rs = decoded.resourceSpans[0]!;
  assert.deepEqual(rs.resource.attributes, [{
    key: "service.name",
    value: { stringValue: "agent33" },
  }]);
  assert.deepEqual(rs.scopeSpans[0]!.scope, { name: "agent33", version: "1.2.3" });
  const s = rs.scopeSpans[0]!.spans[0]!;
  assert.equal(hex(s.traceId as Uint8Array), "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(hex(s.spanId as Uint8Array), "00f067aa0ba902b7");
  assert.equal(hex(s.parentSpanId as Uint8Array), "b7ad6b7169203331");
  assert.equal(s.traceState, "vendor=1");
  assert.equal(s.name, "tools/call a__b");
  assert.equal(s.kind, 2);
  assert.equal(s.startTimeUnixNano, referenceNanos(1234.567891));
  assert.equal(s.endTimeUnixNano, referenceNanos(1334.000001));
  assert.deepEqual(s.attributes, [
    { key: "agent33.tenant", value: { stringValue: "acme" } },
    { key: "agent33.verdict", value: { stringValue: "allow" } },
    { key: "ok", value: { boolValue: true } },
    { key: "count", value: { intValue: "300" } },
    { key: "ratio", value: { doubleValue: 0.5 } },
    { key: "ü", value: { stringValue: "→ ✓" } },
  ]);
  assert.deepEqual(s.status, { message: "Unknown tool", code: 2 });
});

Deno.test("A root span has no parent_span_id, and an unfailed span no status", () => {
  const batch = new ProtobufBatch(RESOURCE);
  batch.add(store, span());
  const s = spansOf(batch.take())[0]!;
  assert.equal(s.parentSpanId, undefined);
  assert.equal(s.status, undefined);
  assert.equal(s.traceState, undefined);
});

Deno.test("Timestamps are the Unix nanoseconds of the time origin plus the reading, as BigInt arithmetic has them", () => {
  const readings = [
    0,
    0.000001,
    0.4999995,
    999.9999999,
    86_400_000 * 365.25 * 30,
    performance.now(),
  ];
  for (let i = 0; i < 2000; i++) readings.push(Math.random() * 10 ** (i % 12));
  // Readings a nanosecond either side of a whole Unix second, where a quotient may round over.
  const originNanos = Number(referenceNanos(0).slice(-9));
  for (const seconds of [1, 1_000, 100_000, 10_000_000]) {
    for (const d of [-1, 0, 1]) readings.push((seconds * 1e9 - originNanos + d) / 1e6);
  }
  for (const now of readings) {
    const words = new Uint32Array(2);
    unixNanoWords(now, words);
    const [low, high] = words as unknown as [number, number];
    assert.ok(low >= 0 && low < 2 ** 32 && Number.isInteger(low), `low word of ${now}`);
    assert.equal(String((BigInt(high) << 32n) + BigInt(low)), referenceNanos(now), `at ${now}`);
    assert.equal(unixNanoDecimal(now), referenceNanos(now), `JSON's decimal form at ${now}`);
  }
});

Deno.test("A take() lends the batch's buffer until the next add, and the spans after it make a request of their own", () => {
  const batch = new ProtobufBatch(RESOURCE);
  batch.add(store, span({ name: "first", attributes: { a: "x".repeat(5000) } }));
  const lent = batch.take();
  const first = lent.slice();
  assert.deepEqual(spansOf(lent).map((s) => s.name), ["first"]);
  assert.equal(batch.count, 0);
  batch.add(store, span({ name: "second" }));
  batch.add(store, span({ name: "third" }));
  assert.deepEqual(spansOf(batch.take()).map((s) => s.name), ["second", "third"]);
  assert.deepEqual(spansOf(first).map((s) => s.name), ["first"]);
});

Deno.test("A large request keeps every length right (values past 127 bytes, spans past 16,383, non-ASCII)", () => {
  const batch = new ProtobufBatch(RESOURCE);
  const sizes = [0, 1, 60, 100, 126, 127, 128, 200, 16_383, 16_384, 70_000];
  const values = sizes.flatMap((n) => ["x".repeat(n), "é".repeat(n)]);
  for (const [i, value] of values.entries()) {
    batch.add(
      store,
      span({ name: `span ${i}`, target: value, attributes: { i, value }, error: value }),
    );
  }
  const spans = spansOf(batch.take());
  assert.deepEqual(spans.map((s) => s.name), values.map((v, i) => `span ${i} ${v}`));
  assert.deepEqual(
    spans.map((s) =>
      (s.attributes as { value: { stringValue?: string } }[])[1]!.value.stringValue ?? ""
    ),
    values,
  );
  assert.deepEqual(spans.map((s) => (s.status as { message?: string }).message ?? ""), values);
});

Deno.test("Negative, fractional and non-finite numbers are doubles; undefined attributes are left out", () => {
  const batch = new ProtobufBatch(RESOURCE);
  const attributes = {
    neg: -3,
    half: 0.5,
    nan: NaN,
    big: 2 ** 60,
    gone: undefined,
  } as unknown as Record<string, number>;
  batch.add(store, span({ attributes }));
  const decoded = spansOf(batch.take())[0]!.attributes as {
    key: string;
    value: { doubleValue: number };
  }[];
  assert.deepEqual(decoded.map((a) => a.key), ["neg", "half", "nan", "big"]);
  assert.deepEqual(decoded.map((a) => a.value.doubleValue), [-3, 0.5, NaN, 2 ** 60]);
});

Deno.test("The JSON encoding carries the same span as the protobuf one", () => {
  const one = span({
    parent: [0xb7ad6b71, 0x69203331],
    traceState: "vendor=1",
    name: "tools/call a__b",
    kind: 3,
    startMs: 10.25,
    endMs: 11.5,
    attributes: { "agent33.verdict": "allow", ok: false, count: 7 },
    shared: shared({ "agent33.tenant": "acme" }),
    error: "boom",
  });
  const json = new JsonBatch(RESOURCE);
  json.add(store, one);
  const body = JSON.parse(new TextDecoder().decode(json.take())) as {
    resourceSpans: { scopeSpans: { scope: unknown; spans: Record<string, unknown>[] }[] }[];
  };
  assert.deepEqual(body.resourceSpans[0]!.scopeSpans[0]!.scope, RESOURCE.scope);
  const fromJson = body.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
  const proto = new ProtobufBatch(RESOURCE);
  proto.add(store, one);
  const fromProto = spansOf(proto.take())[0]!;
  assert.equal(fromJson.traceId, hex(fromProto.traceId as Uint8Array));
  assert.equal(fromJson.spanId, hex(fromProto.spanId as Uint8Array));
  assert.equal(fromJson.parentSpanId, hex(fromProto.parentSpanId as Uint8Array));
  assert.equal(fromJson.startTimeUnixNano, fromProto.startTimeUnixNano);
  assert.equal(fromJson.endTimeUnixNano, fromProto.endTimeUnixNano);
  for (const field of ["traceState", "name", "kind"]) {
    assert.equal(fromJson[field], fromProto[field]);
  }
  assert.deepEqual(
    (fromJson.attributes as { key: string }[]).map((a) => a.key),
    (fromProto.attributes as { key: string }[]).map((a) => a.key),
  );
  assert.deepEqual(fromJson.status, { code: 2, message: "boom" });
});

Deno.test("An attribute whose value repeats decodes the same every time, and so does one whose value never does", () => {
  const batch = new ProtobufBatch(RESOURCE);
  for (let i = 0; i < 200; i++) {
    batch.add(
      store,
      span({ attributes: { "agent33.upstream": "everything", "jsonrpc.request.id": `${i}` } }),
    );
  }
  const spans = spansOf(batch.take());
  assert.equal(spans.length, 200);
  spans.forEach((s, i) =>
    assert.deepEqual(s.attributes, [
      { key: "agent33.upstream", value: { stringValue: "everything" } },
      { key: "jsonrpc.request.id", value: { stringValue: `${i}` } },
    ])
  );
});

Deno.test("Integers on either side of 2³¹ and up to 2⁵³ keep every bit in their varint", () => {
  const values = [0, 127, 128, 16_383, 16_384, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 5, 2 ** 53 - 1];
  const batch = new ProtobufBatch(RESOURCE);
  batch.add(store, span({ attributes: Object.fromEntries(values.map((v, i) => [`n${i}`, v])) }));
  const decoded = spansOf(batch.take())[0]!.attributes as {
    value: { intValue: number | string | { toString(): string } };
  }[];
  assert.deepEqual(decoded.map((a) => String(a.value.intValue)), values.map(String));
});

Deno.test("A span keeps its first 16 attributes and counts the rest as dropped", () => {
  const batch = new ProtobufBatch(RESOURCE);
  const many = Object.fromEntries(
    Array.from({ length: MAX_ATTRIBUTES + 3 }, (_, i) => [`a${i}`, `v${i}`]),
  );
  batch.add(store, span({ attributes: many }));
  const s = spansOf(batch.take())[0]!;
  assert.deepEqual(
    (s.attributes as { key: string }[]).map((a) => a.key),
    Object.keys(many).slice(0, MAX_ATTRIBUTES),
  );
  assert.equal(s.droppedAttributesCount, 3);
  const json = new JsonBatch(RESOURCE);
  json.add(store, span({ attributes: many }));
  const body = JSON.parse(new TextDecoder().decode(json.take()));
  assert.equal(body.resourceSpans[0].scopeSpans[0].spans[0].droppedAttributesCount, 3);
});

Deno.test("Spans of one name whose attributes, kind or shared attributes differ each decode as their own", () => {
  const batch = new ProtobufBatch(RESOURCE);
  const outcomes = ["ok", "tool_error", "denied", "error", "ok", "timeout", "ok", "x", "y"];
  const acme = shared({ "agent33.tenant": "acme" });
  const other = shared({ "agent33.tenant": "other" });
  const made = outcomes.flatMap((outcome, i) => [
    { outcome, kind: 2 + (i % 2), tenant: i % 3 === 0 ? acme : other, id: `${i}` },
  ]);
  for (const m of made) {
    batch.add(
      store,
      span({
        name: "tools/call",
        target: "a__b",
        kind: m.kind,
        shared: m.tenant,
        attributes: { "jsonrpc.request.id": m.id, "agent33.outcome": m.outcome },
      }),
    );
  }
  const spans = spansOf(batch.take());
  assert.deepEqual(
    spans.map((s) => [
      s.name,
      s.kind,
      ...(s.attributes as { value: { stringValue: string } }[])
        .map((a) => a.value.stringValue),
    ]),
    made.map((m) => [
      "tools/call a__b",
      m.kind,
      m.tenant === acme ? "acme" : "other",
      m.outcome,
      m.id,
    ]),
  );
});

Deno.test("OTLP JSON batches after a take() are requests of their own, as large as they grow", () => {
  const json = new JsonBatch(RESOURCE);
  const names = (body: Uint8Array) =>
    (JSON.parse(new TextDecoder().decode(body)) as {
      resourceSpans: { scopeSpans: { spans: { name: string }[] }[] }[];
    }).resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.name);
  json.add(store, span({ name: "first" }));
  assert.deepEqual(names(json.take()), ["first"]);
  // Past the buffer's first 64 KiB: it grows with the head kept in front.
  for (let i = 0; i < 40; i++) {
    json.add(store, span({ name: `big ${i}`, attributes: { a: "é".repeat(1000) } }));
  }
  assert.deepEqual(names(json.take()), Array.from({ length: 40 }, (_, i) => `big ${i}`));
  json.add(store, span({ name: "last" }));
  assert.deepEqual(names(json.take()), ["last"]);
});

Deno.test("A span's request id is encoded whatever its form, and its other attributes still match their template", () => {
  const ids: (string | number)[] = ["7", "", "a".repeat(100), "a".repeat(101), "é-1", 42];
  for (const id of ids) {
    const fields = {
      name: "tools/call",
      target: "t",
      attributes: { v: "allow", "jsonrpc.request.id": id },
    };
    const proto = new ProtobufBatch(RESOURCE);
    // Twice: the second span is written from the first one's template.
    proto.add(store, span(fields));
    proto.add(store, span(fields));
    for (const decoded of spansOf(proto.take())) {
      const attributes = decoded.attributes as { key: string; value: Record<string, unknown> }[];
      const value = attributes.find((a) => a.key === "jsonrpc.request.id")?.value;
      assert.deepEqual(
        value,
        typeof id === "string" ? { stringValue: id } : { intValue: String(id) },
        `proto, id ${JSON.stringify(id)}`,
      );
      assert.deepEqual(attributes.find((a) => a.key === "v")?.value, { stringValue: "allow" });
    }
    const json = new JsonBatch(RESOURCE);
    json.add(store, span(fields));
    const body = JSON.parse(new TextDecoder().decode(json.take())) as {
      resourceSpans: {
        scopeSpans: { spans: { attributes: { key: string; value: unknown }[] }[] }[];
      }[];
    };
    const attributes = body.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.attributes;
    assert.deepEqual(
      attributes.find((a) => a.key === "jsonrpc.request.id")?.value,
      typeof id === "string" ? { stringValue: id } : { intValue: String(id) },
      `JSON, id ${JSON.stringify(id)}`,
    );
  }
});
