/**
 * An OTLP/HTTP endpoint for the traced bench scenarios: accepts `POST /v1/traces` (any encoding),
 * counts the bytes and discards them, as a collector would answer.
 * @module
 */

/** A running sink. */
export interface OtlpSink {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  bytes: number;
  requests: number;
  close(): Promise<void>;
}

/** Starts the sink on a free loopback port. */
export function startOtlpSink(): OtlpSink {
  const sink = { bytes: 0, requests: 0 } as OtlpSink;
  const http = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const body = new Uint8Array(await request.arrayBuffer());
      sink.bytes += body.byteLength;
      sink.requests++;
      return new Response(new Uint8Array(0), {
        headers: {
          "content-type": request.headers.get("content-type") ?? "application/x-protobuf",
        },
      });
    },
  );
  sink.url = `http://127.0.0.1:${http.addr.port}`;
  sink.close = () => http.shutdown();
  return sink;
}
