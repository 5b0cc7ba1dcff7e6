/**
 * Test support: the messages of opentelemetry-proto's `collector/trace/v1` that the gateway's
 * protobuf export writes, with the upstream field numbers, read by protobufjs (an implementation
 * independent of the gateway's encoder).
 * @module
 */
import protobuf from "protobufjs";

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
  fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10; Status status = 15;
}
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; }
}
`;

const Request = protobuf.parse(PROTO).root.lookupType("ExportTraceServiceRequest");

/** An `ExportTraceServiceRequest` decoded: fixed64/int64 as decimal strings, bytes as Uint8Array. */
export interface DecodedTraceRequest {
  resourceSpans?: {
    resource?: { attributes?: unknown[] };
    scopeSpans?: { scope?: unknown; spans?: Record<string, unknown>[] }[];
  }[];
}

/** Decodes a protobuf export body; unset fields stay absent. */
export function decodeTraceRequest(bytes: Uint8Array): DecodedTraceRequest {
  return Request.toObject(Request.decode(bytes), { longs: String }) as DecodedTraceRequest;
}

/** Bytes as lower-case hex (how OTLP JSON writes ids). */
export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
