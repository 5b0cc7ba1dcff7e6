/**
 * Bench support: the gateway as `main.ts serve` starts it, with OTEL_* export configured, whose
 * tracing SIGUSR1 switches off and on (`kernel.tracing.tracer` absent is exactly the untraced
 * gateway's path), so the tracing-cost bench can compare both states in one process and no
 * process-to-process difference enters the figure. Each switch is acknowledged on stderr as
 * `tracing on #n` / `tracing off #n`. A measuring instrument, never used by the gateway.
 *
 * ```
 * deno run -A bench/traced_gateway.ts --transport stdio|http
 * ```
 * @module
 */
import { parseArgs } from "node:util";
import { loadEnvironment, resolveConfig } from "../core/config/config.ts";
import { Kernel } from "../core/kernel.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { transport: { type: "string" } },
  strict: true,
});
const say = (text: string) => Deno.stderr.writeSync(new TextEncoder().encode(`${text}\n`));
const env = await loadEnvironment();
const kernel = new Kernel({
  config: resolveConfig(env, {
    transport: values.transport ?? "stdio",
    host: "127.0.0.1",
    port: "0",
    noAuth: true,
    noAuthAdmin: true,
  }),
  env,
});
const info = await kernel.start();
const tracer = kernel.tracing.tracer;
if (!tracer) throw new Error("traced_gateway.ts needs OTEL_EXPORTER_OTLP_ENDPOINT");
if (info.url) say(`listening on ${info.url}`);
let switches = 0;
Deno.addSignalListener("SIGUSR1", () => {
  kernel.tracing.tracer = kernel.tracing.tracer ? undefined : tracer;
  say(`tracing ${kernel.tracing.tracer ? "on" : "off"} #${++switches}`);
});
const stop = () => void kernel.stop();
Deno.addSignalListener("SIGTERM", stop);
await kernel.done;
Deno.exit(0);
