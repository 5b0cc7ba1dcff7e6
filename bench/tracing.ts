/**
 * Bench: the CPU one traced `tools/call` costs the gateway, in process: the request span, its
 * governance and upstream spans, the upstream's traceparent, and the export of all three to an
 * OTLP sink, for each OTLP encoding. The CPU is this (main) thread's, where the tracer and its
 * `fetch` run; the sink receives in a worker, on a thread of its own, so it is not counted.
 * @module
 */
import process from "node:process";
import { silentLogger } from "../core/support/logger.ts";
import { OtlpTracer } from "../core/tracing/otlp_tracer.ts";
import { tracingConfig } from "../core/tracing/tracing_config.ts";
import { median } from "./stats.ts";

/** CPU per traced call by encoding, medians over rounds. */
export interface TracingResult {
  protobufUsPerCall: number;
  jsonUsPerCall: number;
  rounds: { protocol: string; usPerCall: number }[];
}

/** A worker that accepts OTLP posts on a free port and answers with its URL. */
async function startSink(): Promise<{ url: string; stop(): void }> {
  const source = `
    const http = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
      await request.arrayBuffer();
      return new Response(new Uint8Array(0));
    });
    self.postMessage("http://127.0.0.1:" + http.addr.port);
    self.onmessage = () => http.shutdown().then(() => self.close());
  `;
  const worker = new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
  const url = await new Promise<string>((resolve) => {
    worker.onmessage = (event) => resolve(event.data as string);
  });
  return { url, stop: () => worker.terminate() };
}

/** One call's spans, as the bridge and the pipeline make them for a proxied tool. */
function tracedCall(tracer: OtlpTracer, shared: ReturnType<OtlpTracer["shared"]>, i: number) {
  const meta = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" };
  const span = tracer.request("tools/call", "everything__echo", meta, undefined, shared);
  span.set("mcp.method.name", "tools/call");
  span.set("jsonrpc.request.id", String(i));
  span.set("gen_ai.tool.name", "everything__echo");
  const governance = span.child("governance");
  governance.set("agent33.verdict", "allow");
  governance.end();
  span.set("agent33.verdict", "allow");
  span.set("agent33.upstream", "everything");
  span.set("agent33.breaker.state", "CLOSED");
  const upstream = span.child("tools/call", { "gen_ai.tool.name": "echo" }, "client", "echo");
  upstream.set("mcp.method.name", "tools/call");
  upstream.set("agent33.upstream", "everything");
  upstream.set("agent33.upstream.transport", "stdio");
  if (!upstream.carrier().traceparent) throw new Error("no traceparent");
  upstream.end();
  span.set("agent33.outcome", "ok");
  span.end();
}

/**
 * This thread's CPU time in µs: /proc/thread-self/schedstat, read synchronously so on this very
 * thread; the whole process's (the sink's thread included) where Linux's file is missing.
 */
function threadCpuMicros(): number {
  try {
    return Number(Deno.readTextFileSync("/proc/thread-self/schedstat").split(" ")[0]) / 1000;
  } catch {
    const { user, system } = process.cpuUsage();
    return user + system;
  }
}

/** Measures `calls` traced calls per round and encoding. */
export async function benchTracing(rounds: number, calls: number): Promise<TracingResult> {
  const sink = await startSink();
  const results: { protocol: string; usPerCall: number }[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      for (const protocol of ["http/protobuf", "http/json"]) {
        const { config } = tracingConfig({
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        });
        const tracer = new OtlpTracer(config, silentLogger);
        const shared = tracer.shared({
          "mcp.session.id": crypto.randomUUID(),
          "network.transport": "pipe",
          "agent33.transport": "stdio",
          "agent33.tenant": "default",
        });
        for (let i = 0; i < 2_000; i++) tracedCall(tracer, shared, i);
        await tracer.flush();
        const before = threadCpuMicros();
        for (let i = 0; i < calls; i++) {
          tracedCall(tracer, shared, i);
          // Let exports go out as they would between calls.
          if (i % 256 === 0) await new Promise((resolve) => setTimeout(resolve, 0));
        }
        await tracer.flush();
        const used = threadCpuMicros() - before;
        await tracer.shutdown();
        results.push({ protocol, usPerCall: used / calls });
      }
    }
  } finally {
    sink.stop();
  }
  const of = (protocol: string) =>
    median(results.filter((r) => r.protocol === protocol).map((r) => r.usPerCall));
  return {
    protobufUsPerCall: of("http/protobuf"),
    jsonUsPerCall: of("http/json"),
    rounds: results,
  };
}
