/**
 * `deno task bench`: `tools/call` latency and throughput through the gateway against a direct
 * connection to the same upstream, in one run, and the gateway's memory per upstream.
 *
 * ```
 * deno task bench                       # everything (~2-3 minutes on 2 cores)
 * deno task bench --quick               # fewer calls and rounds (~30 s)
 * deno task bench --scenario gw-stdio   # one scenario (latency ones also run "direct" for ratios)
 * ```
 *
 * The table goes to stdout, progress to stderr, and every raw number to
 * `bench/results/<timestamp>.json`.
 * @module
 */
import { parseArgs } from "node:util";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  bounded,
  type Child,
  cpuMicros,
  descendantsOf,
  descendantsRssKiB,
  explained,
  ROOT,
  rssKiB,
  stopAll,
} from "./processes.ts";
import { type FleetMemory, renderTable, type Results, type ScenarioResult } from "./report.ts";
import {
  closeClient,
  connectLegacySse,
  connectStdio,
  connectStreamableHttp,
  directPlan,
  echoCall,
  EVERYTHING,
  faultServer,
  type HttpGateway,
  spawnDirect,
  spawnStdioGateway,
  startEverythingHttp,
  startHttpGateway,
  useGatewayRoot,
  waitFleetReady,
  waitForTool,
  writeFleet,
} from "./setup.ts";
import {
  type Call,
  type LatencyRound,
  latencyRound,
  median,
  type ThroughputRound,
  throughputRound,
} from "./stats.ts";
import { benchGovernance } from "./governance.ts";
import { benchTracing } from "./tracing.ts";
import { benchTracingCost } from "./tracing_cost.ts";
import { benchScanner } from "./scanner.ts";
import { benchToolsList } from "./tools_list.ts";
import { benchCluster } from "./cluster.ts";
import { binaryInstalled } from "../tests/support/needs_binary.ts";
import { natsServerCommands } from "../tools/cluster/nats_cluster.ts";
import { haproxyCommands } from "../tools/cluster/haproxy.ts";
import {
  type LeanClient,
  leanEchoCall,
  leanHttp,
  leanStdio,
  leanWaitForTool,
} from "./lean_client.ts";
import { type OtlpSink, startOtlpSink } from "./otlp_sink.ts";

/** Latency scenarios, in table order. */
const LATENCY = [
  "direct",
  "direct-http",
  "gw-stdio",
  "gw-http-sse",
  "gw-http-json",
  "gw-legacy-sse",
  "direct-lean",
  "gw-stdio-lean",
  "gw-stdio-inline-lean",
  "gw-http-json-lean",
  "gw-http-sse-lean",
  "gw-stdio-traced-lean",
  "gw-http-json-traced-lean",
] as const;
type LatencyName = (typeof LATENCY)[number];
const ALL = [
  ...LATENCY,
  "throughput",
  "memory",
  "governance",
  "tracing",
  "tracing-cost",
  "tools-list",
  "scanner",
  "cluster",
] as const;
type ScenarioName = (typeof ALL)[number];

const LABELS: Record<LatencyName, string> = {
  "direct": "direct: SDK client → upstream (stdio)",
  "direct-http": "direct: SDK client → upstream's own Streamable HTTP",
  "gw-stdio": "gateway stdio → stdio upstream",
  "gw-http-sse": "gateway Streamable HTTP (SSE) → stdio",
  "gw-http-json": "gateway Streamable HTTP (JSON) → stdio",
  "gw-legacy-sse": "gateway legacy SSE → stdio",
  "direct-lean": "direct: lean client → upstream (stdio)",
  "gw-stdio-lean": "lean client → gateway stdio → stdio",
  "gw-stdio-inline-lean": "lean client → gateway stdio → stdio, isolation: inline",
  "gw-http-json-lean": "lean client → gateway HTTP (JSON) → stdio",
  "gw-http-sse-lean": "lean client → gateway HTTP (SSE) → stdio",
  "gw-stdio-traced-lean": "the same stdio gateway with OTLP trace export on",
  "gw-http-json-traced-lean": "the same HTTP (JSON) gateway with OTLP trace export on",
};

/** Every figure is a ratio to the direct stdio connection with the same kind of client. */
const BASELINE = (name: LatencyName): LatencyName =>
  name.endsWith("-lean") ? "direct-lean" : "direct";

/** Throughput scenarios (each at every concurrency): every latency scenario but the upstream's own HTTP, a latency reference only. */
const THROUGHPUT: LatencyName[] = LATENCY.filter((name) => name !== "direct-http");
/** Calls in flight for throughput. */
const CONCURRENCY = [16, 64];

const HELP = `Usage: deno task bench [--quick] [--scenario NAME]... [options]

Scenarios: ${ALL.join(", ")}
  (a gateway latency scenario also runs its baseline: "direct" for the SDK client, "direct-lean"
   for the lean raw JSON-RPC client; "throughput" runs ${THROUGHPUT.join(", ")}
   — or, beside latency scenarios, only those and their baselines
   with ${CONCURRENCY.join(" and ")} calls in flight; "tracing-cost" runs untraced and traced
   gateways side by side in alternating rounds and reports the difference of their CPU per call)

Options:
  --quick              fewer calls and rounds
  --scenario NAME      run only NAME (repeatable, or comma-separated)
  --rounds N           rounds per scenario
  --calls N            measured sequential calls per round
  --warmup N           warm-up calls per round
  --upstreams N,...    fleet sizes of the memory scenario (default 1,10,20,50; quick 1,5)
  --root DIR           benchmark the gateway (main.ts, fixture upstream) of another checkout
  --no-save            do not write bench/results/<timestamp>.json
  -h, --help           this help`;

const out = (text: string) => Deno.stdout.writeSync(new TextEncoder().encode(text + "\n"));
const t0 = performance.now();
const progress = (text: string) =>
  Deno.stderr.writeSync(
    new TextEncoder().encode(`[${((performance.now() - t0) / 1000).toFixed(1)}s] ${text}\n`),
  );

/** How much to measure. */
export interface Settings {
  quick: boolean;
  rounds: number;
  warmup: number;
  calls: number;
  throughputCalls: number;
  throughputWarmup: number;
  memoryFleets: number[];
  scenarios: ScenarioName[];
  save: boolean;
  /** The checkout whose gateway runs. */
  root: string;
}

function parseSettings(args: string[]): Settings | undefined {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: "boolean" },
      scenario: { type: "string", multiple: true },
      rounds: { type: "string" },
      calls: { type: "string" },
      warmup: { type: "string" },
      upstreams: { type: "string" },
      root: { type: "string" },
      "no-save": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    out(HELP);
    return undefined;
  }
  const quick = values.quick ?? false;
  const int = (name: string, raw: string | undefined, fallback: number, min: number) => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) {
      throw new Error(`--${name} must be an integer ≥ ${min}, received "${raw}"`);
    }
    return n;
  };
  const requested = (values.scenario ?? []).flatMap((s) => s.split(",")).map((s) => s.trim())
    .filter(Boolean);
  for (const name of requested) {
    if (!(ALL as readonly string[]).includes(name)) {
      throw new Error(`unknown scenario "${name}"; choose from ${ALL.join(", ")}`);
    }
  }
  const calls = int("calls", values.calls, quick ? 300 : 1500, 10);
  const fleets = values.upstreams === undefined
    ? (quick ? [1, 5] : [1, 10, 20, 50])
    : values.upstreams.split(",").map((n) => int("upstreams", n.trim(), 1, 1));
  if (fleets.length < 2) throw new Error("--upstreams needs at least two fleet sizes, e.g. 1,20");
  return {
    quick,
    rounds: int("rounds", values.rounds, quick ? 2 : 3, 1),
    warmup: int("warmup", values.warmup, quick ? 50 : 200, 0),
    calls,
    throughputCalls: quick ? 800 : 3000,
    throughputWarmup: quick ? 100 : 300,
    memoryFleets: [...new Set(fleets)].sort((a, b) => a - b),
    scenarios: requested.length ? requested as ScenarioName[] : [...ALL],
    save: !values["no-save"],
    root: values.root === undefined ? ROOT : checkout(values.root),
  };
}

/** A directory holding a gateway `main.ts`, as an absolute path ending with "/". */
function checkout(dir: string): string {
  const root = Deno.realPathSync(dir) + "/";
  try {
    Deno.statSync(`${root}main.ts`);
  } catch {
    throw new Error(`--root ${dir} holds no main.ts; point it at a checkout of the gateway`);
  }
  return root;
}

/** The commit of a checkout and how many files differ from it (read-only git), if it is one. */
async function revision(root: string): Promise<{ commit: string; changedFiles: number } | null> {
  const git = async (...args: string[]) => {
    const result = await new Deno.Command("git", {
      args: ["--no-optional-locks", "-C", root, ...args],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!result.success) throw new Error(`git ${args.join(" ")} failed`);
    return new TextDecoder().decode(result.stdout);
  };
  try {
    const commit = (await git("rev-parse", "HEAD")).trim();
    const changed = (await git("status", "--porcelain")).split("\n").filter(Boolean).length;
    return { commit, changedFiles: changed };
  } catch {
    return null;
  }
}

/** Clients and processes of the latency and throughput phase. */
interface Endpoints {
  children: Child[];
  clients: Client[];
  leans: LeanClient[];
  calls: Partial<Record<LatencyName, Call>>;
  /** The process serving each scenario (an HTTP gateway serves two), for errors and RSS. */
  servers: Partial<Record<LatencyName, Child>>;
  /** The OTLP sink of the traced scenarios, once started. */
  sink?: OtlpSink;
}

async function setUpEndpoints(
  wanted: Set<LatencyName>,
  endpoints: Endpoints,
  fleetPath: string,
  inlineFleetPath: string,
) {
  const { children, clients, leans, calls, servers } = endpoints;
  const track = (child: Child) => (children.push(child), child);
  const toolOf = (name: LatencyName) => name.startsWith("direct") ? "echo" : "everything__echo";
  /** Lists tools until `tool` is there; every client does, so all validate results alike. */
  const serve = async (name: LatencyName, child: Child, connect: () => Promise<Client>) => {
    servers[name] = child;
    const tool = toolOf(name);
    const client = await explained(`${name}: connecting`, child, connect());
    clients.push(client);
    await explained(`${name}: waiting for ${tool}`, child, waitForTool(client, tool, name, 60_000));
    calls[name] = echoCall(client, tool);
  };
  const serveLean = async (name: LatencyName, child: Child, connect: () => Promise<LeanClient>) => {
    servers[name] = child;
    const tool = toolOf(name);
    const client = await explained(`${name}: connecting`, child, connect());
    leans.push(client);
    await explained(
      `${name}: waiting for ${tool}`,
      child,
      leanWaitForTool(client, tool, name, 60_000),
    );
    calls[name] = leanEchoCall(client, tool);
  };
  const httpGateway = async (name: string, mode: "sse" | "json"): Promise<HttpGateway> => {
    progress(`starting ${name}`);
    const gateway = await startHttpGateway(name, fleetPath, { MCP_HTTP_RESPONSE_MODE: mode });
    track(gateway.child);
    await waitFleetReady(gateway, 1, 60_000);
    return gateway;
  };
  const tasks: Promise<void>[] = [];
  const task = (fn: () => Promise<void>) => tasks.push(fn());
  // Traced gateways export (OTLP/HTTP protobuf, the default) to a sink in this process, so the
  // gateway's CPU column holds the tracing and export work and none of the receiving.
  const traced = () => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: (endpoints.sink ??= startOtlpSink()).url,
    OTEL_SERVICE_NAME: "agent33-bench",
  });
  if (wanted.has("gw-stdio-traced-lean")) {
    task(async () => {
      progress("starting gateway (stdio, lean client, tracing on)");
      const child = track(spawnStdioGateway(fleetPath, traced()));
      await serveLean("gw-stdio-traced-lean", child, () => leanStdio(child));
    });
  }
  if (wanted.has("gw-http-json-traced-lean")) {
    task(async () => {
      progress("starting gateway (HTTP, JSON responses, tracing on)");
      const gateway = await startHttpGateway("gateway (HTTP, JSON, traced)", fleetPath, {
        MCP_HTTP_RESPONSE_MODE: "json",
        ...traced(),
      });
      track(gateway.child);
      await waitFleetReady(gateway, 1, 60_000);
      await serveLean(
        "gw-http-json-traced-lean",
        gateway.child,
        () => leanHttp(`${gateway.url}/mcp`),
      );
    });
  }
  if (wanted.has("direct")) {
    task(async () => {
      progress(`starting direct upstream: ${directPlan(EVERYTHING).argv.slice(1).join(" ")}`);
      const child = track(spawnDirect(EVERYTHING));
      await serve("direct", child, () => connectStdio(child));
    });
  }
  if (wanted.has("direct-lean")) {
    task(async () => {
      const child = track(spawnDirect(EVERYTHING));
      await serveLean("direct-lean", child, () => leanStdio(child));
    });
  }
  if (wanted.has("direct-http")) {
    task(async () => {
      progress("starting the upstream in its own Streamable HTTP mode");
      const upstream = await startEverythingHttp();
      track(upstream.child);
      await serve("direct-http", upstream.child, () => connectStreamableHttp(upstream));
    });
  }
  if (wanted.has("gw-stdio")) {
    task(async () => {
      progress("starting gateway (stdio)");
      const child = track(spawnStdioGateway(fleetPath));
      await serve("gw-stdio", child, () => connectStdio(child));
    });
  }
  if (wanted.has("gw-stdio-lean")) {
    task(async () => {
      progress("starting gateway (stdio, lean client)");
      const child = track(spawnStdioGateway(fleetPath));
      await serveLean("gw-stdio-lean", child, () => leanStdio(child));
    });
  }
  if (wanted.has("gw-stdio-inline-lean")) {
    task(async () => {
      progress("starting gateway (stdio, lean client, isolation: inline)");
      const child = track(spawnStdioGateway(inlineFleetPath));
      await serveLean("gw-stdio-inline-lean", child, () => leanStdio(child));
    });
  }
  if (wanted.has("gw-http-sse") || wanted.has("gw-legacy-sse") || wanted.has("gw-http-sse-lean")) {
    task(async () => {
      const gateway = await httpGateway("gateway (HTTP, SSE responses)", "sse");
      if (wanted.has("gw-http-sse")) {
        await serve("gw-http-sse", gateway.child, () => connectStreamableHttp(gateway));
      }
      if (wanted.has("gw-http-sse-lean")) {
        await serveLean("gw-http-sse-lean", gateway.child, () => leanHttp(`${gateway.url}/mcp`));
      }
      if (wanted.has("gw-legacy-sse")) {
        await serve("gw-legacy-sse", gateway.child, () => connectLegacySse(gateway));
      }
    });
  }
  if (wanted.has("gw-http-json") || wanted.has("gw-http-json-lean")) {
    task(async () => {
      const gateway = await httpGateway("gateway (HTTP, JSON responses)", "json");
      if (wanted.has("gw-http-json")) {
        await serve("gw-http-json", gateway.child, () => connectStreamableHttp(gateway));
      }
      if (wanted.has("gw-http-json-lean")) {
        await serveLean("gw-http-json-lean", gateway.child, () => leanHttp(`${gateway.url}/mcp`));
      }
    });
  }
  // Wait for every start, then report the first failure (the finally stops what did start).
  const settled = await Promise.allSettled(tasks);
  const failure = settled.find((s) => s.status === "rejected");
  if (failure) throw (failure as PromiseRejectedResult).reason;
}

/** Bound for one round of one scenario: generous, but a hang never stalls the run for long. */
function roundBoundMs(calls: number): number {
  return 60_000 + calls * 50;
}

async function runLatencyAndThroughput(settings: Settings, results: Results): Promise<void> {
  // Latency is measured for the requested scenarios plus their baselines.
  const requested = LATENCY.filter((name) => settings.scenarios.includes(name));
  const measured = LATENCY.filter((name) =>
    requested.includes(name) || requested.some((r) => BASELINE(r) === name)
  );
  const throughput = settings.scenarios.includes("throughput");
  if (measured.length === 0 && !throughput) return;
  // Beside latency scenarios, throughput measures just those (e.g. traced against untraced).
  const throughputOf = measured.length === 0
    ? THROUGHPUT
    : THROUGHPUT.filter((name) => measured.includes(name));
  const wanted = new Set<LatencyName>([...measured, ...(throughput ? throughputOf : [])]);

  const fleet = await writeFleet([EVERYTHING]);
  const inlineFleet = await writeFleet([EVERYTHING], { isolation: "inline" });
  const endpoints: Endpoints = { children: [], clients: [], leans: [], calls: {}, servers: {} };
  try {
    await setUpEndpoints(wanted, endpoints, fleet.path, inlineFleet.path);
    const rounds: Partial<Record<LatencyName, LatencyRound[]>> = {};
    for (let round = 1; round <= settings.rounds; round++) {
      // Scenarios take turns within each round, so drift over the run hits all of them alike.
      for (const name of measured) {
        progress(`latency round ${round}/${settings.rounds}: ${name}`);
        const result = await explained(
          `${name}: latency round ${round}`,
          endpoints.servers[name],
          bounded(
            latencyRound(endpoints.calls[name]!, settings.warmup, settings.calls),
            roundBoundMs(settings.calls + settings.warmup),
            `latency round ${round} of ${name}`,
          ),
        );
        (rounds[name] ??= []).push(result);
      }
    }
    for (const name of measured) {
      results.latency[name] = summarizeLatency(LABELS[name], BASELINE(name), rounds[name]!);
    }

    if (throughput) {
      const tp: Record<string, Record<number, ThroughputRound[]>> = {};
      for (let round = 1; round <= settings.rounds; round++) {
        for (const name of throughputOf) {
          for (const concurrency of CONCURRENCY) {
            progress(
              `throughput round ${round}/${settings.rounds}: ${name}, ${concurrency} in flight`,
            );
            ((tp[name] ??= {})[concurrency] ??= []).push(
              await explained(
                `${name}: throughput round ${round}`,
                endpoints.servers[name],
                bounded(
                  throughputRound(
                    endpoints.calls[name]!,
                    concurrency,
                    settings.throughputCalls,
                    settings.throughputWarmup,
                    () => cpuMicros(endpoints.servers[name]!.process.pid),
                  ),
                  roundBoundMs(settings.throughputCalls + settings.throughputWarmup),
                  `throughput round ${round} of ${name}`,
                ),
              ),
            );
          }
        }
      }
      results.throughput = {
        concurrency: CONCURRENCY,
        calls: settings.throughputCalls,
        rows: Object.fromEntries(throughputOf.map((name) => [name, {
          label: LABELS[name],
          baseline: BASELINE(name),
          byConcurrency: Object.fromEntries(
            CONCURRENCY.map((c) => [String(c), summarizeThroughput(tp[name]![c]!)]),
          ),
        }])),
      };
    }

    // Resident memory of each process after the runs (the gateways hold one upstream each).
    const seen = new Set<Child>();
    for (const [name, child] of Object.entries(endpoints.servers)) {
      if (seen.has(child)) continue; // HTTP gateways serve several scenarios
      seen.add(child);
      const pid = child.process.pid;
      const upstreams = name.startsWith("direct") ? undefined : await descendantsRssKiB(pid);
      results.processRssKiB[name] = {
        self: (await rssKiB(pid)) ?? null,
        ...(upstreams ? { upstreams: upstreams.kib, upstreamProcesses: upstreams.count } : {}),
      };
    }
  } finally {
    await Promise.all(endpoints.clients.map(closeClient));
    await Promise.all(endpoints.leans.map((c) => c.close().catch(() => {})));
    await Promise.all(endpoints.children.map((c) => c.stop()));
    if (endpoints.sink) {
      results.tracing = {
        ...results.tracing,
        spansBytesReceived: endpoints.sink.bytes,
        exports: endpoints.sink.requests,
      };
      await endpoints.sink.close();
    }
    await fleet.remove();
    await inlineFleet.remove();
  }
}

function summarizeLatency(
  label: string,
  baseline: string,
  rounds: LatencyRound[],
): ScenarioResult {
  return {
    label,
    baseline,
    medianMs: median(rounds.map((r) => r.medianMs)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
    rounds,
  };
}

function summarizeThroughput(rounds: ThroughputRound[]) {
  const cpu = rounds.flatMap((r) =>
    r.serverCpuUsPerCall === undefined ? [] : [r.serverCpuUsPerCall]
  );
  return {
    callsPerSecond: median(rounds.map((r) => r.callsPerSecond)),
    medianMs: median(rounds.map((r) => r.medianMs)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
    ...(cpu.length === 0 ? {} : { serverCpuUsPerCall: median(cpu) }),
    rounds,
  };
}

/** Samples a process's VmRSS a few times after it settled and keeps the median. */
async function settledRss(pid: number, samples: number): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < samples; i++) {
    await new Promise((r) => setTimeout(r, 250));
    const rss = await rssKiB(pid);
    if (rss === undefined) throw new Error(`process ${pid} is gone while reading its RSS`);
    values.push(rss);
  }
  return median(values);
}

async function runMemory(settings: Settings, results: Results): Promise<void> {
  if (!settings.scenarios.includes("memory")) return;
  const sizes = settings.memoryFleets;
  const fleets: NonNullable<Results["memory"]>["fleets"] = [];
  // Every size with a relay worker per upstream (the default); the smallest and the largest again
  // with the relays in the kernel's thread (isolation: inline), for the trade-off in docs/fleet.md.
  const runs = [
    ...sizes.map((size) => ({ size, isolation: "worker" as const })),
    ...[...new Set([sizes[0]!, sizes[sizes.length - 1]!])].map((size) => ({
      size,
      isolation: "inline" as const,
    })),
  ];
  for (const { size, isolation } of runs) {
    const servers = Array.from(
      { length: size },
      (_, i) => faultServer(`f${String(i + 1).padStart(2, "0")}`),
    );
    const fleet = await writeFleet(servers, isolation === "inline" ? { isolation } : {});
    let gateway: HttpGateway | undefined;
    try {
      progress(`memory: starting a gateway with ${size} fault_server upstream(s), ${isolation}`);
      const started = performance.now();
      gateway = await startHttpGateway(`gateway (${size} upstreams)`, fleet.path);
      await waitFleetReady(gateway, size, 60_000 + size * 5_000);
      const readySeconds = (performance.now() - started) / 1000;
      progress(
        `memory: ${size} upstream(s) READY after ${readySeconds.toFixed(1)} s; sampling RSS`,
      );
      await new Promise((r) => setTimeout(r, 1_000));
      const pid = gateway.child.process.pid;
      const gatewayKiB = await settledRss(pid, settings.quick ? 3 : 6);
      const children = await descendantsOf(pid);
      const upstreams = await descendantsRssKiB(pid);
      fleets.push({
        upstreams: size,
        isolation,
        readySeconds,
        gatewayKiB,
        upstreamProcesses: children.length,
        upstreamsKiB: upstreams.kib,
      });
    } finally {
      await gateway?.child.stop();
      await fleet.remove();
    }
  }
  const perUpstream = (isolation: FleetMemory["isolation"]) => {
    const of = fleets.filter((f) => f.isolation === isolation);
    const [one, many] = [of[0]!, of[of.length - 1]!];
    return many.upstreams === one.upstreams
      ? undefined
      : (many.gatewayKiB - one.gatewayKiB) / (many.upstreams - one.upstreams);
  };
  const largest = fleets.filter((f) => f.isolation === "worker").at(-1)!;
  results.memory = {
    upstream: directPlan(faultServer("f01")).argv.slice(1).join(" "),
    fleets,
    perUpstreamGatewayKiB: perUpstream("worker") ?? 0,
    perUpstreamInlineKiB: perUpstream("inline"),
    perUpstreamChildKiB: largest.upstreamsKiB / Math.max(1, largest.upstreamProcesses),
  };
}

async function machine() {
  let cpu: string | undefined;
  let memTotalKiB: number | undefined;
  try {
    cpu = (await Deno.readTextFile("/proc/cpuinfo")).match(/^model name\s*:\s*(.+)$/m)?.[1];
    memTotalKiB = Number(
      (await Deno.readTextFile("/proc/meminfo")).match(/^MemTotal:\s+(\d+)/m)?.[1],
    );
  } catch { /* not Linux */ }
  return {
    os: Deno.build.os,
    arch: Deno.build.arch,
    osRelease: Deno.osRelease(),
    hardwareConcurrency: navigator.hardwareConcurrency,
    ...(cpu ? { cpu } : {}),
    ...(memTotalKiB ? { memTotalKiB } : {}),
    deno: Deno.version,
    // Other work on the machine skews a run; these make a noisy one recognisable.
    loadAverageBefore: await loadAverage(),
  };
}

/** 1, 5 and 15 minute load averages, or null off Linux. */
async function loadAverage(): Promise<number[] | null> {
  try {
    return (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).map(Number);
  } catch {
    return null;
  }
}

async function main(): Promise<number> {
  let settings: Settings | undefined;
  try {
    settings = parseSettings(Deno.args);
  } catch (error) {
    Deno.stderr.writeSync(new TextEncoder().encode(`${(error as Error).message}\n\n${HELP}\n`));
    return 2;
  }
  if (!settings) return 0;
  useGatewayRoot(settings.root);

  // Ctrl-C (or SIGTERM) still ends every child process.
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  let interrupted = false;
  const interrupt = () => {
    interrupted = true;
    progress("interrupted: stopping child processes");
    void stopAll().finally(() => Deno.exit(130));
  };
  for (const signal of signals) Deno.addSignalListener(signal, interrupt);

  const timestamp = new Date().toISOString();
  const results: Results = {
    timestamp,
    machine: await machine(),
    settings: { ...settings },
    gateway: { root: settings.root, revision: await revision(settings.root) },
    upstream: {
      package: EVERYTHING.command![2]!,
      tool: "echo",
      arguments: { message: "hi" },
      argv: directPlan(EVERYTHING).argv.slice(1),
    },
    latency: {},
    processRssKiB: {},
    durationSeconds: 0,
  };
  try {
    await runLatencyAndThroughput(settings, results);
    await runMemory(settings, results);
    if (settings.scenarios.includes("tools-list")) {
      progress("tools-list: 50 upstreams × 100 tools, in process");
      results.toolsList = settings.quick
        ? await benchToolsList(10, 50, 20)
        : await benchToolsList(50, 100, 200);
    }
    if (settings.scenarios.includes("scanner")) {
      progress("scanner: worst case, a ~4 MiB hostile descriptor set");
      results.scanner = await benchScanner(settings.quick ? 1 : 3);
    }
    if (settings.scenarios.includes("tracing")) {
      progress("tracing: one traced tools/call's spans and their export, in process");
      results.tracing = {
        ...results.tracing,
        inProcess: await benchTracing(settings.rounds, settings.quick ? 5_000 : 50_000),
      };
    }
    if (settings.scenarios.includes("tracing-cost")) {
      results.tracing = {
        ...results.tracing,
        endToEnd: await benchTracingCost({
          // Short rounds, many of them: each round's difference is one sample of the cost.
          rounds: settings.rounds * 4,
          calls: settings.calls,
          concurrency: 16,
          processes: settings.quick ? 1 : 2,
          progress,
        }),
      };
    }
    if (settings.scenarios.includes("governance")) {
      progress("governance: ToolGovernance.check in process");
      results.governance = await benchGovernance(
        `${settings.root}policies`,
        settings.rounds,
        settings.quick ? 2_000 : 20_000,
      );
    }
    if (settings.scenarios.includes("cluster")) {
      if (binaryInstalled(natsServerCommands()) && binaryInstalled(haproxyCommands())) {
        results.cluster = await benchCluster(settings.quick, settings.rounds, progress);
      } else {
        progress(
          "cluster: skipped, nats-server or haproxy is missing (apt-get install -y nats-server haproxy)",
        );
      }
    }
  } catch (error) {
    // After an interrupt, failures are only the children being stopped.
    if (!interrupted) {
      progress(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    return 1;
  } finally {
    await stopAll();
    for (const signal of signals) Deno.removeSignalListener(signal, interrupt);
  }
  results.durationSeconds = (performance.now() - t0) / 1000;
  results.machine.loadAverageAfter = await loadAverage();

  out(renderTable(results));
  if (settings.save) {
    const dir = `${ROOT}bench/results`;
    await Deno.mkdir(dir, { recursive: true });
    // Colons are not portable in file names; the exact timestamp is inside the file.
    const path = `${dir}/${timestamp.replaceAll(":", "-")}.json`;
    await Deno.writeTextFile(path, JSON.stringify(results, null, 2) + "\n");
    out(`Raw numbers: ${path.slice(ROOT.length)}`);
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main());
