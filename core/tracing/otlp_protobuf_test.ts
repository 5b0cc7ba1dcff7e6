import assert from "node:assert/strict";
import protobuf from "protobufjs";
import { encodeAttributes, encodeTraceRequest } from "./otlp_protobuf.ts";

// The messages of opentelemetry-proto's collector/trace/v1 that the encoder writes, with the
// upstream field numbers; decoded with protobufjs, an implementation independent of the encoder.
const PROTO = `
syntax = "proto3";
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9; Status status = 15;
}
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; }
}
`;
const Request = protobuf.parse(PROTO).root.lookupType("ExportTraceServiceRequest");

const hex = (bytes: Uint8Array) =>
  Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

Deno.test("The protobuf encoding decodes as OTLP's ExportTraceServiceRequest, field for field", () => {
  const bytes = encodeTraceRequest(
    { attributes: { "service.name": "agent33" }, scope: { name: "agent33", version: "1.2.3" } },
    [{
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      parentSpanId: "b7ad6b7169203331",
      traceState: "vendor=1",
      name: "tools/call a__b",
      kind: 2,
      startTimeUnixNano: 1_764_570_000_123_456_789n,
      endTimeUnixNano: 1_764_570_000_223_456_789n,
      attributes: { "agent33.verdict": "allow", ok: true, count: 300, ratio: 0.5, "ü": "→ ✓" },
      shared: { proto: encodeAttributes(9, { "agent33.tenant": "acme" }) },
      error: "Unknown tool",
    }],
  );
  const decoded = Request.toObject(Request.decode(bytes), { longs: String }) as {
    resourceSpans: {
      resource: { attributes: unknown[] };
      scopeSpans: { scope: unknown; spans: Record<string, unknown>[] }[];
    }[];
  };
  const rs = decoded.resourceSpans[0]!;
  assert.deepEqual(rs.resource.attributes, [{
    key: "service.name",
    value: { stringValue: "agent33" },
  }]);
  assert.deepEqual(rs.scopeSpans[0]!.scope, { name: "agent33", version: "1.2.3" });
  const span = rs.scopeSpans[0]!.spans[0]!;
  assert.equal(hex(span.traceId as Uint8Array), "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(hex(span.spanId as Uint8Array), "00f067aa0ba902b7");
  assert.equal(hex(span.parentSpanId as Uint8Array), "b7ad6b7169203331");
  assert.equal(span.traceState, "vendor=1");
  assert.equal(span.name, "tools/call a__b");
  assert.equal(span.kind, 2);
  assert.equal(span.startTimeUnixNano, "1764570000123456789");
  assert.equal(span.endTimeUnixNano, "1764570000223456789");
  assert.deepEqual(span.attributes, [
    { key: "agent33.tenant", value: { stringValue: "acme" } },
    { key: "agent33.verdict", value: { stringValue: "allow" } },
    { key: "ok", value: { boolValue: true } },
    { key: "count", value: { intValue: "300" } },
    { key: "ratio", value: { doubleValue: 0.5 } },
    { key: "ü", value: { stringValue: "→ ✓" } },
  ]);
  assert.deepEqual(span.status, { message: "Unknown tool", code: 2 });
});

Deno.test("A large request keeps every length right (submessages past 127 and 16,383 bytes)", () => {
  const spans = Array.from({ length: 300 }, (_, i) => ({
    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    spanId: i.toString(16).padStart(16, "0"),
    name: `span ${i} ${"x".repeat(i)}`,
    kind: 1,
    startTimeUnixNano: 1n,
    endTimeUnixNano: 2n,
    attributes: { i },
  }));
  const decoded = Request.toObject(
    Request.decode(
      encodeTraceRequest({ attributes: {}, scope: { name: "a", version: "b" } }, spans),
    ),
  ) as { resourceSpans: { scopeSpans: { spans: { name: string }[] }[] }[] };
  const names = decoded.resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.name);
  assert.deepEqual(names, spans.map((s) => s.name));
});
