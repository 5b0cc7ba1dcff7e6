/**
 * Bench support: the results record (written as JSON) and the table printed to stdout.
 * @module
 */
import type { LatencyRound, ThroughputRound } from "./stats.ts";
import type { ScannerResult } from "./scanner.ts";
import type { ClusterResult } from "./cluster.ts";
import type { TracingCostResult } from "./tracing_cost.ts";

/** One latency scenario: medians over rounds of the per-round median and p99. */
export interface ScenarioResult {
  label: string;
  /** The scenario this one is a ratio to (the direct stdio connection with the same client). */
  baseline: string;
  medianMs: number;
  p99Ms: number;
  rounds: LatencyRound[];
}

/** Throughput of one side, medians over rounds. */
export interface ThroughputResult {
  callsPerSecond: number;
  medianMs: number;
  p99Ms: number;
  /** CPU of the serving process per call (µs, all its threads): gateway, or upstream when direct. */
  serverCpuUsPerCall?: number;
  rounds: ThroughputRound[];
}

/** Gateway memory with one fleet size. */
export interface FleetMemory {
  upstreams: number;
  /** Where the stdio relays ran: a worker each (the default) or the kernel's thread. */
  isolation: "worker" | "inline";
  readySeconds: number;
  gatewayKiB: number;
  upstreamProcesses: number;
  upstreamsKiB: number;
}

/** Everything one run measured. */
export interface Results {
  timestamp: string;
  machine: Record<string, unknown>;
  settings: Record<string, unknown>;
  /** The checkout whose gateway ran. */
  gateway: { root: string; revision: { commit: string; changedFiles: number } | null };
  upstream: { package: string; tool: string; arguments: unknown; argv: string[] };
  latency: Record<string, ScenarioResult>;
  /** What the traced scenarios exported to the bench's OTLP sink, and the in-process cost. */
  tracing?: {
    spansBytesReceived?: number;
    exports?: number;
    inProcess?: { protobufUsPerCall: number; jsonUsPerCall: number; rounds: unknown[] };
    /** The gateway's CPU per call with tracing off and on, end to end (bench/tracing_cost.ts). */
    endToEnd?: TracingCostResult;
  };
  throughput?: {
    concurrency: number[];
    calls: number;
    rows: Record<
      string,
      { label: string; baseline: string; byConcurrency: Record<string, ThroughputResult> }
    >;
  };
  memory?: {
    upstream: string;
    fleets: FleetMemory[];
    perUpstreamGatewayKiB: number;
    /** The same with `isolation: inline` (when both ends were measured inline). */
    perUpstreamInlineKiB?: number;
    perUpstreamChildKiB: number;
  };
  /** VmRSS of the latency-phase processes after their runs (gateways: plus their upstreams). */
  processRssKiB: Record<
    string,
    { self: number | null; upstreams?: number; upstreamProcesses?: number }
  >;
  /** tools/list over a large aggregated fleet, in process. */
  toolsList?: {
    upstreams: number;
    toolsPerUpstream: number;
    tools: number;
    pageSize: number;
    roundTrips: number;
    coldMs: number;
    cachedMedianMs: number;
    cachedP99Ms: number;
    leanCachedMedianMs: number;
    leanCachedP99Ms: number;
  };
  /** The cost of one governance check, in process. */
  governance?: { medianUs: number; p99Us: number; rounds: unknown[]; policy: string };
  /** The scanner's worst case: a ~4 MiB hostile descriptor set. */
  scanner?: ScannerResult;
  /** Cluster mode: the shared state's cost per call and throughput of 1 and 3 replicas. */
  cluster?: ClusterResult;
  durationSeconds: number;
}

const ms = (v: number) => v.toFixed(3);
const ratio = (v: number, base: number | undefined) =>
  base === undefined || !Number.isFinite(v / base) ? "—" : `×${(v / base).toFixed(2)}`;
const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;

/** A fixed-width table: the first column left-aligned, the rest right-aligned. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** The human-readable report. */
export function renderTable(results: Results): string {
  const parts: string[] = [];
  const s = results.settings as {
    rounds: number;
    calls: number;
    warmup: number;
    quick: boolean;
  };
  const m = results.machine as { osRelease: string; hardwareConcurrency: number; cpu?: string };
  parts.push(
    `AGENT-33 bench ${results.timestamp}${s.quick ? " (quick)" : ""} — Deno ${
      (results.machine.deno as { deno: string }).deno
    }, Linux ${m.osRelease}, ${m.hardwareConcurrency} CPUs${m.cpu ? ` (${m.cpu})` : ""}`,
  );
  const load = (key: string) => (results.machine[key] as number[] | null)?.join(" ") ?? "?";
  parts.push(
    `Load average before: ${load("loadAverageBefore")}; after: ${load("loadAverageAfter")}` +
      " (other work on the machine adds noise)",
  );
  const rev = results.gateway.revision;
  parts.push(
    `Gateway: ${results.gateway.root}main.ts` +
      (rev
        ? ` at ${rev.commit.slice(0, 12)}, ${rev.changedFiles} changed file(s) in the tree`
        : ""),
  );
  parts.push(
    `Upstream: ${results.upstream.package}, tool ${results.upstream.tool} ${
      JSON.stringify(results.upstream.arguments)
    }`,
  );

  const names = Object.keys(results.latency);
  if (names.length) {
    parts.push("");
    parts.push(
      `tools/call latency, sequential: ${s.rounds} rounds × ${s.calls} calls after ${s.warmup} warm-up; ` +
        "median over rounds of each round's figure",
    );
    parts.push(table(
      ["scenario", "median ms", "vs direct", "p99 ms", "vs direct", "round medians ms"],
      names.map((name) => {
        const r = results.latency[name]!;
        const base = results.latency[r.baseline];
        return [
          r.label,
          ms(r.medianMs),
          ratio(r.medianMs, base?.medianMs),
          ms(r.p99Ms),
          ratio(r.p99Ms, base?.p99Ms),
          r.rounds.map((x) => x.medianMs.toFixed(3)).join(" / "),
        ];
      }),
    ));
  }

  const tp = results.throughput;
  if (tp) {
    parts.push("");
    parts.push(
      `Throughput: calls/s with ${
        tp.concurrency.join(" and ")
      } calls in flight, ${tp.calls} calls ` +
        `per round, ${s.rounds} rounds (median); ratio to the direct connection with the same client; ` +
        "server CPU/call: the gateway process (all threads), or the upstream when direct",
    );
    const header = ["scenario"];
    for (const c of tp.concurrency) {
      header.push(`${c} in flight`, "vs direct", "median ms", "server CPU/call");
    }
    parts.push(table(
      header,
      Object.values(tp.rows).map((row) => {
        const cells = [row.label];
        for (const c of tp.concurrency) {
          const r = row.byConcurrency[String(c)]!;
          const base = tp.rows[row.baseline]?.byConcurrency[String(c)];
          cells.push(
            r.callsPerSecond.toFixed(0),
            ratio(r.callsPerSecond, base?.callsPerSecond),
            ms(r.medianMs),
            r.serverCpuUsPerCall === undefined ? "?" : `${r.serverCpuUsPerCall.toFixed(0)} µs`,
          );
        }
        return cells;
      }),
    ));
  }

  const mem = results.memory;
  if (mem) {
    parts.push("");
    parts.push(
      `Memory: VmRSS after the fleet is READY (upstream: deno ${mem.upstream}, FAULT=none)`,
    );
    parts.push(table(
      ["fleet", "relays", "gateway RSS", "upstream processes", "their RSS (sum)", "ready after"],
      mem.fleets.map((f) => [
        `${f.upstreams} upstream${f.upstreams === 1 ? "" : "s"}`,
        f.isolation === "inline" ? "inline" : "workers",
        mib(f.gatewayKiB),
        String(f.upstreamProcesses),
        mib(f.upstreamsKiB),
        `${f.readySeconds.toFixed(1)} s`,
      ]),
    ));
    const workers = mem.fleets.filter((f) => f.isolation === "worker");
    const [one, many] = [workers[0]!, workers[workers.length - 1]!];
    parts.push(
      `Gateway cost per upstream = (RSS${many.upstreams} − RSS${one.upstreams}) / ${
        many.upstreams - one.upstreams
      } = ${mib(mem.perUpstreamGatewayKiB)}` +
        ` (${
          ratio(mem.perUpstreamGatewayKiB, mem.perUpstreamChildKiB)
        } of one upstream process's own ${mib(mem.perUpstreamChildKiB)})`,
    );
    if (mem.perUpstreamInlineKiB !== undefined) {
      parts.push(`With isolation: inline: ${mib(mem.perUpstreamInlineKiB)} per upstream`);
    }
  }

  const rss = results.processRssKiB;
  if (Object.keys(rss).length) {
    parts.push("");
    parts.push(
      "RSS after the latency runs: " +
        Object.entries(rss).map(([name, r]) =>
          `${name} ${r.self === null ? "?" : mib(r.self)}` +
          (r.upstreams !== undefined ? ` (+ upstream ${mib(r.upstreams)})` : "")
        ).join(", "),
    );
  }
  if (results.toolsList) {
    const t = results.toolsList;
    parts.push("");
    parts.push(
      `tools/list of ${t.tools} aggregated tools (${t.upstreams} upstreams × ${t.toolsPerUpstream}, ` +
        `page size ${t.pageSize}: ${t.roundTrips} round trip${t.roundTrips === 1 ? "" : "s"}, ` +
        `SDK client in process): cold ${t.coldMs.toFixed(1)} ms, cached median ` +
        `${t.cachedMedianMs.toFixed(2)} ms, p99 ${
          t.cachedP99Ms.toFixed(2)
        } ms; the gateway's own ` +
        `part (raw request in, response serialized, no SDK client): cached median ` +
        `${t.leanCachedMedianMs.toFixed(2)} ms, p99 ${t.leanCachedP99Ms.toFixed(2)} ms`,
    );
  }
  if (results.tracing?.inProcess) {
    const t = results.tracing.inProcess;
    parts.push("");
    parts.push(
      `Tracing, one traced tools/call in process (3 spans, traceparent, OTLP export): ` +
        `${t.protobufUsPerCall.toFixed(1)} µs CPU with http/protobuf, ` +
        `${t.jsonUsPerCall.toFixed(1)} µs with http/json`,
    );
  }
  if (results.tracing?.endToEnd) {
    const t = results.tracing.endToEnd;
    parts.push("");
    parts.push(
      `Tracing end to end: gateway CPU per tools/call (every thread), lean client, ` +
        `${t.concurrency} in flight, ${t.processes} gateway(s) per kind, ${t.rounds} rounds × ` +
        `${t.callsPerRound} calls; median of each round's traced − untraced difference`,
    );
    for (
      const [label, r] of [
        ["stdio", t.stdio],
        ["Streamable HTTP (JSON)", t.http],
        ["stdio, one gateway switched", t.toggled.stdio],
        ["HTTP, one gateway switched", t.toggled.http],
      ] as const
    ) {
      parts.push(
        `  ${label.padEnd(27)} off ${r.offUsPerCall.toFixed(1)} µs, on ${
          r.onUsPerCall.toFixed(1)
        } µs: +${r.diffUsPerCall.toFixed(1)} µs (quartiles ${r.diffQuartilesUs[0].toFixed(1)}..${
          r.diffQuartilesUs[1].toFixed(1)
        }) = ${r.percent.toFixed(1)} %`,
      );
    }
  }
  if (results.governance) {
    const g = results.governance;
    const direct = results.latency["direct-lean"]?.medianMs ?? results.latency.direct?.medianMs;
    parts.push("");
    parts.push(
      `Governance check (ToolGovernance.check, ${g.policy}): median ${g.medianUs.toFixed(1)} µs, ` +
        `p99 ${g.p99Us.toFixed(1)} µs per call` +
        (direct ? ` (${(g.medianUs / 10 / direct).toFixed(1)}% of a direct call)` : ""),
    );
  }
  if (results.scanner) {
    const sc = results.scanner;
    parts.push("");
    parts.push(
      `Scanner worst case (${(sc.bytes / 1024 / 1024).toFixed(1)} MiB hostile set, ${sc.servers} ` +
        `servers, ${sc.tools} tools, ${sc.findings} findings): in process median ` +
        `${sc.inProcessMedianMs.toFixed(0)} ms; in the gateway's scan worker median ` +
        `${sc.workerMedianMs.toFixed(0)} ms, longest event-loop stall meanwhile ` +
        `${sc.workerMaxStallMs.toFixed(1)} ms`,
    );
  }
  if (results.cluster) parts.push("", renderCluster(results.cluster));
  parts.push("");
  parts.push(`Ran in ${results.durationSeconds.toFixed(1)} s`);
  return parts.join("\n");
}

/** The cluster scenario's lines. */
function renderCluster(c: ClusterResult): string {
  const [one, three] = [c.throughput.find((t) => t.replicas === 1), c.throughput.at(-1)];
  const us = (v: number) => `${v.toFixed(1)} µs`;
  return [
    `Cluster mode (${c.natsNodes} NATS nodes, KV replicas ${c.kvReplicas}), shared session state per call: ` +
    `cache hit median ${us(c.hit.medianUs)}, p99 ${us(c.hit.p99Us)}; cold replica (one KV read) ` +
    `median ${us(c.cold.medianUs)}, p99 ${us(c.cold.p99Us)}`,
    `Cluster mode end to end (one replica, sequential lean HTTP calls): ${
      ms(c.endToEnd.clusterMs)
    } ms ` +
    `against ${ms(c.endToEnd.singleMs)} ms with MCP_CLUSTER off (${
      c.endToEnd.addedUs.toFixed(0)
    } µs added); NATS messages per call ${c.endToEnd.natsMessagesPerCall.cluster.toFixed(2)} ` +
    `against ${c.endToEnd.natsMessagesPerCall.single.toFixed(2)}`,
    `Cluster throughput, ${c.concurrency} in flight (${c.spread}): ` +
    c.throughput.map((t) =>
      `${t.replicas} replica${t.replicas === 1 ? "" : "s"} ${
        t.callsPerSecond.toFixed(0)
      } calls/s ` +
      `(median ${ms(t.medianMs)} ms)`
    ).join(", ") +
    (one && three ? ` = ×${(three.callsPerSecond / one.callsPerSecond).toFixed(2)}` : "") +
    `; on ${c.cores} cores every replica, upstream, NATS node and the client share the CPU, ` +
    `so this shows the coordination cost, not the scale-out gain`,
  ].join("\n");
}
