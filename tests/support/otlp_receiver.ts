/**
 * Test support: an OTLP/HTTP trace receiver on 127.0.0.1 (what a collector's port 4318 does for
 * `POST /v1/traces` with `application/json` or `application/x-protobuf`), keeping every span it
 * was sent.
 * @module
 */
import { decodeTraceRequest, hex } from "./otlp_proto.ts";

/** One received span, its ids in hex and its attributes flattened. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
  /** The `service.name` of the resource it came with. */
  service?: string;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the requests it was sent. */
  contentTypes: string[];
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

function flatten(
  attributes: OtlpAttribute[] | undefined,
): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    const v = value.stringValue ?? value.boolValue ?? value.doubleValue ??
      (value.intValue === undefined ? undefined : Number(value.intValue));
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/** An export request as OTLP JSON has it (ids in hex). */
interface OtlpBody {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: OtlpAttribute[];
        status?: { code?: number };
      }[];
    }[];
  }[];
}

/** A protobuf export request in the JSON shape: the same fields, ids turned to hex. */
function fromProtobuf(bytes: Uint8Array): OtlpBody {
  const decoded = decodeTraceRequest(bytes);
  return {
    resourceSpans: (decoded.resourceSpans ?? []).map((rs) => ({
      resource: { attributes: (rs.resource?.attributes ?? []) as OtlpAttribute[] },
      scopeSpans: (rs.scopeSpans ?? []).map((ss) => ({
        spans: (ss.spans ?? []).map((span) => ({
          traceId: hex(span.traceId as Uint8Array),
          spanId: hex(span.spanId as Uint8Array),
          ...(span.parentSpanId ? { parentSpanId: hex(span.parentSpanId as Uint8Array) } : {}),
          name: span.name as string,
          kind: span.kind as number,
          attributes: (span.attributes ?? []) as OtlpAttribute[],
          status: (span.status ?? {}) as { code?: number },
        })),
      })),
    })),
  };
}

/** Starts the receiver on a free port. */
export function startOtlpReceiver(): OtlpReceiver {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const http = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const url = new URL(request.url);
      if (request.method !== "POST" || url.pathname !== "/v1/traces") {
        await request.body?.cancel();
        return new Response(null, { status: 404 });
      }
      const type = request.headers.get("content-type") ?? "";
      contentTypes.push(type);
      const body = type.startsWith("application/json")
        ? await request.json() as OtlpBody
        : type.startsWith("application/x-protobuf")
        ? fromProtobuf(new Uint8Array(await request.arrayBuffer()))
        : undefined;
      if (body === undefined) {
        await request.body?.cancel();
        return new Response(null, { status: 415 });
      }
      for (const resourceSpans of body.resourceSpans ?? []) {
        const service = flatten(resourceSpans.resource?.attributes)["service.name"];
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              ...(span.parentSpanId ? { parentSpanId: span.parentSpanId } : {}),
              name: span.name,
              kind: span.kind,
              attributes: flatten(span.attributes),
              status: span.status?.code ?? 0,
              ...(typeof service === "string" ? { service } : {}),
            });
          }
        }
      }
      return Response.json({});
    },
  );
  return {
    url: `http://127.0.0.1:${http.addr.port}`,
    spans,
    contentTypes,
    close: () => http.shutdown(),
  };
}
