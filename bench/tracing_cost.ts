/**
 * Bench: what tracing costs the gateway end to end — the gateway process's CPU (every thread,
 * from the scheduler's accounting, see `cpuNanos`) per lean-client `tools/call` to a stdio
 * upstream, with tracing off and with OTLP protobuf export on (to a sink in this process, so the
 * receiving is not counted), over stdio and over Streamable HTTP (JSON responses).
 *
 * Identical gateways differ by several µs per call from process to process (JIT decisions, memory
 * layout), and the shared machine's load moves every figure between runs, so: `processes`
 * gateways of each kind run at once, all of them take turns in short rounds (the order reversed
 * every other round), and the figure is the median over rounds of that round's difference
 * (mean of the traced gateways minus mean of the untraced ones), with its interquartile range.
 * @module
 */
import { type Child, cleanEnv, cpuNanos, explained, ROOT, spawnChild } from "./processes.ts";
import {
  type LeanClient,
  leanEchoCall,
  leanHttp,
  leanStdio,
  leanWaitForTool,
} from "./lean_client.ts";
import { startOtlpSink } from "./otlp_sink.ts";
import {
  EVERYTHING,
  spawnStdioGateway,
  startHttpGateway,
  waitFleetReady,
  writeFleet,
} from "./setup.ts";
import { quantile } from "./stats.ts";

/** Calls each gateway serves before it is measured. */
const WARMUP_CALLS = 20_000;

/** The cost of tracing for one transport. */
export interface TracingCostRow {
  /** Medians over rounds of the untraced and the traced gateways' CPU per call. */
  offUsPerCall: number;
  onUsPerCall: number;
  /** Median over rounds of (traced − untraced), and its quartiles. */
  diffUsPerCall: number;
  diffQuartilesUs: [number, number];
  /** diffUsPerCall as a share of offUsPerCall. */
  percent: number;
  /** Each round's CPU per call, per gateway: `off` then `on`, `processes` of each. */
  rounds: { off: number[]; on: number[] }[];
}

/** {@link benchTracingCost}'s result. */
export interface TracingCostResult {
  rounds: number;
  callsPerRound: number;
  concurrency: number;
  processes: number;
  stdio: TracingCostRow;
  http: TracingCostRow;
  /** One gateway per transport whose tracing is switched off and on between rounds. */
  toggled: { stdio: TracingCostRow; http: TracingCostRow };
}

interface Gateway {
  transport: "stdio" | "http";
  traced: boolean;
  child: Child;
  client: LeanClient;
  call: () => Promise<void>;
}

/** Runs `count` calls with `concurrency` in flight. */
async function load(call: () => Promise<void>, count: number, concurrency: number) {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next++ < count) await call();
  }));
}

/** The gateway's CPU (every thread) per call over `calls` calls, after 100 to warm up, in µs. */
async function cpuPerCall(g: Gateway, calls: number, concurrency: number): Promise<number> {
  await load(g.call, 100, concurrency);
  const pid = g.child.process.pid;
  const before = await cpuNanos(pid);
  await load(g.call, calls, concurrency);
  const after = await cpuNanos(pid);
  if (before === undefined || after === undefined) throw new Error(`${g.child.name} ended`);
  return (after - before) / 1000 / calls;
}

async function start(
  transport: "stdio" | "http",
  traced: boolean,
  fleetPath: string,
  tracedEnv: Record<string, string>,
): Promise<Gateway> {
  const env = traced ? tracedEnv : {};
  let child: Child;
  let client: LeanClient;
  if (transport === "stdio") {
    child = spawnStdioGateway(fleetPath, env);
    client = await explained("tracing cost: connecting", child, leanStdio(child));
  } else {
    const name = `gateway (HTTP, JSON${traced ? ", traced" : ""})`;
    const gateway = await startHttpGateway(name, fleetPath, {
      MCP_HTTP_RESPONSE_MODE: "json",
      ...env,
    });
    child = gateway.child;
    await waitFleetReady(gateway, 1, 60_000);
    client = await explained("tracing cost: connecting", child, leanHttp(`${gateway.url}/mcp`));
  }
  await explained(
    "tracing cost: waiting for the tool",
    child,
    leanWaitForTool(client, "everything__echo", `${transport} gateway`, 60_000),
  );
  return { transport, traced, child, client, call: leanEchoCall(client, "everything__echo") };
}

/** bench/traced_gateway.ts: tracing on, switched by SIGUSR1. */
async function startToggled(
  transport: "stdio" | "http",
  fleetPath: string,
  tracedEnv: Record<string, string>,
): Promise<Gateway> {
  const child = spawnChild(
    `toggled gateway (${transport})`,
    Deno.execPath(),
    [
      "run",
      "-A",
      "--v8-flags=--max-semi-space-size=2",
      `${ROOT}bench/traced_gateway.ts`,
      "--transport",
      transport,
    ],
    {
      env: cleanEnv({
        MCP_PROXY_CONFIG_PATH: fleetPath,
        MCP_HTTP_RESPONSE_MODE: "json",
        ...tracedEnv,
      }),
      cwd: ROOT,
      stdin: transport === "stdio" ? "piped" : "null",
      stdout: transport === "stdio" ? "piped" : "null",
      gracefully: transport === "stdio" ? "close-stdin" : "sigterm",
    },
  );
  const client = transport === "stdio"
    ? await explained("tracing cost: connecting", child, leanStdio(child))
    : await explained(
      "tracing cost: connecting",
      child,
      child.waitForStderr(/listening on (http:\/\/\S+)/, 60_000).then((m) =>
        leanHttp(`${m[1]}/mcp`)
      ),
    );
  await explained(
    "tracing cost: waiting for the tool",
    child,
    leanWaitForTool(client, "everything__echo", `${transport} gateway`, 60_000),
  );
  return { transport, traced: true, child, client, call: leanEchoCall(client, "everything__echo") };
}

/** Switches a toggled gateway's tracing and waits for its acknowledgement. */
async function toggle(g: Gateway, switches: number, on: boolean): Promise<void> {
  Deno.kill(g.child.process.pid, "SIGUSR1");
  await g.child.waitForStderr(new RegExp(`^tracing ${on ? "on" : "off"} #${switches}$`), 10_000);
}

/**
 * Rounds on each toggled gateway, tracing off and on in turn (off-on, then on-off), each pair
 * one difference: the same process, so only tracing and the machine's load change between them.
 */
async function measureToggled(
  gateways: Gateway[],
  rounds: number,
  calls: number,
  concurrency: number,
  progress: (text: string) => void,
): Promise<{ stdio: TracingCostRow; http: TracingCostRow }> {
  const measured: Record<string, { off: number[]; on: number[] }[]> = { stdio: [], http: [] };
  const switches = new Map<Gateway, number>(gateways.map((g) => [g, 0]));
  const tracing = new Map<Gateway, boolean>(gateways.map((g) => [g, true]));
  for (let round = 0; round < rounds; round++) {
    progress(`tracing cost, one gateway switched: round ${round + 1}/${rounds}`);
    for (const g of gateways) {
      const pair = { off: [] as number[], on: [] as number[] };
      const states = round % 2 === 0 ? [false, true] : [true, false];
      for (const on of states) {
        if (tracing.get(g) !== on) {
          switches.set(g, switches.get(g)! + 1);
          await toggle(g, switches.get(g)!, on);
          tracing.set(g, on);
        }
        pair[on ? "on" : "off"].push(await cpuPerCall(g, calls, concurrency));
      }
      measured[g.transport]!.push(pair);
    }
  }
  return { stdio: row(measured.stdio!), http: row(measured.http!) };
}

function row(rounds: { off: number[]; on: number[] }[]): TracingCostRow {
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const diffs = sorted(rounds.map((r) => mean(r.on) - mean(r.off)));
  const off = quantile(sorted(rounds.map((r) => mean(r.off))), 0.5);
  const diff = quantile(diffs, 0.5);
  return {
    offUsPerCall: off,
    onUsPerCall: quantile(sorted(rounds.map((r) => mean(r.on))), 0.5),
    diffUsPerCall: diff,
    diffQuartilesUs: [quantile(diffs, 0.25), quantile(diffs, 0.75)],
    percent: (diff / off) * 100,
    rounds,
  };
}

/** Measures tracing's end-to-end CPU cost per call over both transports. */
export async function benchTracingCost(options: {
  rounds: number;
  calls: number;
  concurrency: number;
  processes: number;
  progress: (text: string) => void;
}): Promise<TracingCostResult> {
  const { rounds, calls, concurrency, processes, progress } = options;
  const fleet = await writeFleet([EVERYTHING]);
  const sink = startOtlpSink();
  const tracedEnv = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: "agent33-bench" };
  const gateways: Gateway[] = [];
  try {
    progress(`tracing cost: starting ${processes * 4} gateways (stdio and HTTP, off and on)`);
    // Interleaved, so each traced gateway's turn is next to an untraced one's.
    const kinds = Array.from({ length: processes }).flatMap(() =>
      (["stdio", "http"] as const).flatMap((transport) =>
        [false, true].map((traced) => ({ transport, traced }))
      )
    );
    const started = await Promise.allSettled(
      kinds.map((k) => start(k.transport, k.traced, fleet.path, tracedEnv)),
    );
    for (const s of started) if (s.status === "fulfilled") gateways.push(s.value);
    const failed = started.find((s) => s.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
    // Long enough for V8 to finish optimizing both paths: with 2,000 calls the traced one still is.
    for (const g of gateways) await load(g.call, WARMUP_CALLS, concurrency);
    const measured: Record<"stdio" | "http", { off: number[]; on: number[] }[]> = {
      stdio: [],
      http: [],
    };
    for (let round = 0; round < rounds; round++) {
      progress(`tracing cost: round ${round + 1}/${rounds}`);
      const order = round % 2 === 0 ? gateways : [...gateways].reverse();
      const stdio = { off: [] as number[], on: [] as number[] };
      const http = { off: [] as number[], on: [] as number[] };
      for (const g of order) {
        (g.transport === "stdio" ? stdio : http)[g.traced ? "on" : "off"]
          .push(await cpuPerCall(g, calls, concurrency));
      }
      measured.stdio.push(stdio);
      measured.http.push(http);
    }
    const toggled = [
      await startToggled("stdio", fleet.path, tracedEnv),
      await startToggled("http", fleet.path, tracedEnv),
    ];
    gateways.push(...toggled);
    for (const g of toggled) await load(g.call, WARMUP_CALLS, concurrency);
    return {
      rounds,
      callsPerRound: calls,
      concurrency,
      processes,
      stdio: row(measured.stdio),
      http: row(measured.http),
      toggled: await measureToggled(toggled, rounds, calls, concurrency, progress),
    };
  } finally {
    await Promise.all(gateways.map((g) => g.client.close().catch(() => {})));
    await Promise.all(gateways.map((g) => g.child.stop()));
    await sink.close();
    await fleet.remove();
  }
}
