/**
 * Where the gateway's CPU goes under load: a V8 CPU profile of the gateway while a lean client
 * keeps calls in flight, taken over the inspector protocol (Deno has no `--cpu-prof`), summed by
 * function and by file. Run it on two checkouts and compare the tables to find what a change
 * costs; the `.cpuprofile` opens in Chrome DevTools.
 *
 *     deno run -A bench/profile.ts [--root <checkout>] [--transport stdio|http] [--in-flight 16]
 *       [--calls 20000] [--top 30] [--out gateway.cpuprofile] [--traced] [--heap | --threads]
 *       [--env NAME=VALUE]...
 *
 * `--threads` attaches no inspector and reports CPU per call by thread instead (from
 * /proc/<pid>/task/<tid>/schedstat, grouped by thread name: the main thread, the upstream's relay
 * worker, V8's helper threads, Tokio's), for costs the main thread's profile does not see.
 *
 * `--heap` samples allocations instead (every 4 KiB, collected objects included): bytes allocated
 * per call by function and by file, for what the garbage collector's share comes from.
 *
 * Sampling is every 100 µs on the gateway's main thread (its workers are separate isolates the
 * profile does not cover); the figures are shares of the samples, so a busy machine changes the
 * totals more than the shares.
 * @module
 */
import { parseArgs } from "node:util";
import { leanEchoCall, leanHttp, leanStdio, leanWaitForTool } from "./lean_client.ts";
import { freePort } from "../tools/cluster/process.ts";
import { cpuMicros, stopAll } from "./processes.ts";
import {
  EVERYTHING,
  getGatewayRoot,
  spawnStdioGateway,
  startHttpGateway,
  useGatewayFlags,
  useGatewayRoot,
  waitFleetReady,
  writeFleet,
} from "./setup.ts";
import { throughputRound } from "./stats.ts";
import { type OtlpSink, startOtlpSink } from "./otlp_sink.ts";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapNode[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const encoder = new TextEncoder();
const out = (text: string) => void Deno.stdout.writeSync(encoder.encode(text + "\n"));

/** A minimal Chrome DevTools Protocol session over the inspector's WebSocket. */
async function inspectorSession(port: number) {
  let targets: { webSocketDebuggerUrl: string; type?: string }[] = [];
  for (let attempt = 0; targets.length === 0; attempt++) {
    try {
      targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
    } catch (error) {
      if (attempt > 100) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  let next = 0;
  const waiting = new Map<number, (result: unknown) => void>();
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data as string) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  };
  return {
    send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
      const id = ++next;
      socket.send(JSON.stringify({ id, method, params }));
      return new Promise((resolve) => waiting.set(id, resolve as (r: unknown) => void));
    },
    close: () => socket.close(),
  };
}

/** CPU each live thread of `pid` has run (ns), with its name, by thread id. */
async function threadNanos(pid: number): Promise<Map<string, { name: string; ns: number }>> {
  const threads = new Map<string, { name: string; ns: number }>();
  for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      const dir = `/proc/${pid}/task/${task.name}`;
      const name = (await Deno.readTextFile(`${dir}/comm`)).trim().replace(/[0-9]+$/, "#");
      const ns = Number((await Deno.readTextFile(`${dir}/schedstat`)).split(" ")[0]);
      threads.set(task.name, { name, ns });
    } catch {
      // Ended between the listing and the read: nothing more to add.
    }
  }
  return threads;
}

/** Self time per key (µs), from the samples and their time deltas. */
function selfTimes(profile: CpuProfile, key: (frame: CallFrame) => string): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    if (!node) return;
    const k = key(node.callFrame);
    totals.set(k, (totals.get(k) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  });
  return totals;
}

function shortUrl(url: string, root: string): string {
  if (url === "") return "(native)";
  return url.replace(`file://${root}`, "").replace(/^.*\/node_modules\/(?:\.deno\/)?/, "npm:")
    .replace(/^.*registry\.npmjs\.org\//, "npm:");
}

function printTable(
  title: string,
  totals: Map<string, number>,
  total: number,
  calls: number,
  top: number,
  unit: string,
) {
  out(`\n${title} (self; % of the total, ${unit})`);
  const rows = [...totals].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [key, amount] of rows) {
    const share = (100 * amount / total).toFixed(1).padStart(5);
    out(`${share} %  ${(amount / calls).toFixed(2).padStart(9)}  ${key}`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      root: { type: "string" },
      transport: { type: "string", default: "stdio" },
      "in-flight": { type: "string", default: "16" },
      calls: { type: "string", default: "20000" },
      top: { type: "string", default: "30" },
      out: { type: "string" },
      traced: { type: "boolean", default: false },
      heap: { type: "boolean", default: false },
      threads: { type: "boolean", default: false },
      env: { type: "string", multiple: true },
    },
  });
  if (values.root) useGatewayRoot(values.root);
  const root = getGatewayRoot();
  const calls = Number(values.calls);
  const inFlight = Number(values["in-flight"]);
  const top = Number(values.top);
  const port = freePort();
  if (!values.threads) useGatewayFlags([`--inspect=127.0.0.1:${port}`]);
  const fleet = await writeFleet([EVERYTHING]);
  let sink: OtlpSink | undefined;
  // Export on, to a sink in this process (as the bench's traced scenarios do).
  // More of the gateway's environment (`--env OTEL_TRACES_SAMPLER=traceidratio`).
  const extra = Object.fromEntries(
    (values.env ?? []).map((
      pair,
    ) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
  );
  const env = (): Record<string, string> =>
    values.traced
      ? {
        OTEL_EXPORTER_OTLP_ENDPOINT: (sink ??= startOtlpSink()).url,
        OTEL_SERVICE_NAME: "agent33-profile",
        ...extra,
      }
      : extra;
  try {
    const { client, pid } = values.transport === "http"
      ? await (async () => {
        const gateway = await startHttpGateway("gateway (HTTP, profiled)", fleet.path, {
          MCP_HTTP_RESPONSE_MODE: "json",
          ...env(),
        });
        await waitFleetReady(gateway, 1, 60_000);
        return { client: await leanHttp(`${gateway.url}/mcp`), pid: gateway.child.process.pid };
      })()
      : await (async () => {
        const child = spawnStdioGateway(fleet.path, env());
        return { client: await leanStdio(child), pid: child.process.pid };
      })();
    await leanWaitForTool(client, "everything__echo", "profiled gateway", 60_000);
    const call = leanEchoCall(client, "everything__echo");
    await throughputRound(call, inFlight, 2_000, 500);
    if (values.threads) {
      const before = await threadNanos(pid);
      const round = await throughputRound(call, inFlight, calls, 0);
      const after = await threadNanos(pid);
      await client.close();
      const spent = new Map<string, number>();
      for (const [tid, { name, ns }] of after) {
        const was = before.get(tid)?.ns ?? 0;
        spent.set(name, (spent.get(name) ?? 0) + (ns - was) / 1000);
      }
      const total = [...spent.values()].reduce((a, b) => a + b, 0);
      out(
        `${root}: ${calls} calls at ${inFlight} in flight over ${values.transport}, ` +
          `${Math.round(round.callsPerSecond)} calls/s, ${
            (total / calls).toFixed(1)
          } µs CPU per call`,
      );
      printTable("by thread", spent, total, calls, top, "µs per call");
      return;
    }
    const session = await inspectorSession(port);
    if (values.heap) {
      await session.send("HeapProfiler.enable");
      await session.send("HeapProfiler.startSampling", {
        samplingInterval: 4096,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      await throughputRound(call, inFlight, calls, 0);
      const { profile } = await session.send<{ profile: { head: HeapNode } }>(
        "HeapProfiler.stopSampling",
      );
      session.close();
      await client.close();
      if (values.out) await Deno.writeTextFile(values.out, JSON.stringify(profile));
      const byFunction = new Map<string, number>();
      const byFile = new Map<string, number>();
      const walk = (node: HeapNode) => {
        const f = node.callFrame;
        const file = shortUrl(f.url, root);
        const fn = `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
        byFunction.set(fn, (byFunction.get(fn) ?? 0) + node.selfSize);
        byFile.set(file, (byFile.get(file) ?? 0) + node.selfSize);
        for (const child of node.children) walk(child);
      };
      walk(profile.head);
      const bytes = [...byFile.values()].reduce((a, b) => a + b, 0);
      out(
        `${root}: ${calls} calls at ${inFlight} in flight over ${values.transport}, ` +
          `${(bytes / calls).toFixed(0)} bytes allocated per call (sampled)`,
      );
      printTable("by function", byFunction, bytes, calls, top, "bytes per call");
      printTable("by file", byFile, bytes, calls, top, "bytes per call");
      return;
    }
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    await session.send("Profiler.start");
    const cpu0 = await cpuMicros(pid);
    const round = await throughputRound(call, inFlight, calls, 0);
    const cpu1 = await cpuMicros(pid);
    const { profile } = await session.send<{ profile: CpuProfile }>("Profiler.stop");
    session.close();
    await client.close();
    if (values.out) await Deno.writeTextFile(values.out, JSON.stringify(profile));
    const sampled = profile.timeDeltas.reduce((a, b) => a + b, 0);
    out(
      `${root}: ${calls} calls at ${inFlight} in flight over ${values.transport}, ` +
        `${Math.round(round.callsPerSecond)} calls/s, gateway CPU ${
          cpu0 === undefined || cpu1 === undefined ? "?" : ((cpu1 - cpu0) / calls).toFixed(1)
        } µs per call (all threads), main thread sampled ${
          (sampled / calls).toFixed(1)
        } µs per call`,
    );
    const idle = selfTimes(profile, (f) => f.functionName).get("(idle)") ?? 0;
    out(`main thread busy ${((sampled - idle) / calls).toFixed(1)} µs per call`);
    printTable(
      "by function",
      selfTimes(
        profile,
        (f) => `${f.functionName || "(anonymous)"} ${shortUrl(f.url, root)}:${f.lineNumber + 1}`,
      ),
      sampled,
      calls,
      top,
      "µs per call",
    );
    printTable(
      "by file",
      selfTimes(profile, (f) => shortUrl(f.url, root)),
      sampled,
      calls,
      top,
      "µs per call",
    );
  } finally {
    await stopAll();
    await sink?.close();
    await fleet.remove();
  }
}

if (import.meta.main) await main();
