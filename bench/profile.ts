/**
 * Where the gateway's CPU goes under load: a V8 CPU profile of the gateway while a lean client
 * keeps calls in flight, taken over the inspector protocol, summed by function and by file. Run it
 * on two checkouts and compare the tables to find what a change costs; the `.cpuprofile` opens in
 * Chrome DevTools. With `--traced` the attached inspector also reports every export's `fetch`
 * (Deno's inspector network bridge, ~20 µs a call here) which no gateway pays without it: to
 * compare traced with untraced, profile with the gateway's own `deno run --cpu-prof` instead.
 *
 *     deno run -A bench/profile.ts [--root <checkout>] [--transport stdio|http] [--in-flight 16]
 *       [--calls 20000] [--top 30] [--out gateway.cpuprofile] [--traced] [--heap | --threads]
 *       [--instructions] [--warmup 2000] [--message-bytes N] [--env NAME=VALUE]...
 *
 * `--threads` attaches no inspector and reports CPU per call by thread instead (from
 * /proc/<pid>/task/<tid>/schedstat, grouped by thread name: the main thread, the upstream's relay
 * worker, V8's helper threads, Tokio's), for costs the main thread's profile does not see.
 *
 * `--instructions` runs the gateway under valgrind's callgrind (Debian's `valgrind`) and counts
 * the machine instructions it executes per call, by thread: unlike CPU time on a shared VM (±10 %
 * from run to run), the count repeats within about 3 % on the main thread, so a change of a few
 * thousand instructions per call shows in one run. The gateway runs some 50 times slower, hence
 * the few calls (`--calls 2000`). Instructions are not time (a cache miss costs more than an add,
 * and `rep movsb` counts per byte), but the same code at the same count costs the same.
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
import {
  type LeanClient,
  leanEchoCall,
  leanHttp,
  leanStdio,
  leanWaitForTool,
} from "./lean_client.ts";
import { freePort } from "../tools/cluster/process.ts";
import { cpuMicros, stopAll, threadNanos } from "./processes.ts";
import {
  EVERYTHING,
  getGatewayRoot,
  spawnStdioGateway,
  startHttpGateway,
  useGatewayFlags,
  useGatewayRoot,
  useGatewayWrapper,
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

/** `function file:line`, the key of the by-function tables. */
function frameLabel(f: CallFrame, root: string): string {
  return `${f.functionName || "(anonymous)"} ${shortUrl(f.url, root)}:${f.lineNumber + 1}`;
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

/** A gateway under a lean client's load, ready to be measured. */
interface Profiled {
  root: string;
  pid: number;
  port: number;
  call: () => Promise<void>;
  calls: number;
  inFlight: number;
  top: number;
  out?: string;
  /** "N calls at M in flight over T", the head of every report. */
  what: string;
}

/** CPU per call by thread, from /proc (no inspector attached). */
async function byThread(p: Profiled): Promise<void> {
  const before = await threadNanos(p.pid);
  const round = await throughputRound(p.call, p.inFlight, p.calls, 0);
  const after = await threadNanos(p.pid);
  const spent = new Map<string, number>();
  for (const [tid, { name, ns }] of after) {
    spent.set(name, (spent.get(name) ?? 0) + (ns - (before.get(tid)?.ns ?? 0)) / 1000);
  }
  const total = [...spent.values()].reduce((a, b) => a + b, 0);
  out(
    `${p.what}, ${Math.round(round.callsPerSecond)} calls/s, ` +
      `${(total / p.calls).toFixed(1)} µs CPU per call`,
  );
  printTable("by thread", spent, total, p.calls, p.top, "µs per call");
}

/** Where callgrind writes, one file per thread and dump (made with --instructions). */
let callgrindDir = "";

/** valgrind's callgrind around the gateway: instrumentation off until the measured round. */
const callgrind = (dir: string) => [
  "valgrind",
  "--tool=callgrind",
  "--instr-atstart=no",
  "--smc-check=all-non-file",
  "--separate-threads=yes",
  "--dump-instr=no",
  `--callgrind-out-file=${dir}/callgrind.%p`,
];

/** Runs `callgrind_control` on the gateway (instrumentation on, zero the counts, dump them). */
async function callgrindControl(flag: string, pid: number): Promise<void> {
  const out = await new Deno.Command("callgrind_control", {
    args: [flag, String(pid)],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`callgrind_control ${flag} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** The per-thread totals of callgrind's dump of `pid`, once every thread's file is written. */
async function dumpedInstructions(pid: number): Promise<Map<string, number>> {
  for (let tries = 0; tries < 100; tries++) {
    const totals = new Map<string, number>();
    for await (const entry of Deno.readDir(callgrindDir)) {
      // callgrind.<pid>.<dump>-<thread>: the first dump is the one asked for.
      const thread = entry.name.match(new RegExp(`^callgrind\\.${pid}\\.1-(\\d+)$`))?.[1];
      if (thread === undefined) continue;
      const text = await Deno.readTextFile(`${callgrindDir}/${entry.name}`);
      const total = text.match(/^(?:totals|summary): *(\d+)/m)?.[1];
      if (total !== undefined) totals.set(`thread ${thread}`, Number(total));
    }
    if (totals.size > 0 && totals.has("thread 01")) return totals;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`callgrind wrote no dump of ${pid} to ${callgrindDir}`);
}

/** Machine instructions per call by thread, counted by callgrind over the measured round. */
async function instructions(p: Profiled): Promise<void> {
  await callgrindControl("--instr=on", p.pid);
  // Calls with instrumentation on first: callgrind translates the code they run once.
  await throughputRound(p.call, p.inFlight, 300, 0);
  await callgrindControl("--zero", p.pid);
  await throughputRound(p.call, p.inFlight, p.calls, 0);
  await callgrindControl("--dump", p.pid);
  const counts = await dumpedInstructions(p.pid);
  // For callgrind_annotate: V8's builtins show by address, which --v8-flags=--log-code names.
  if (p.out) await Deno.copyFile(`${callgrindDir}/callgrind.${p.pid}.1-01`, p.out);
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  out(
    `${p.what}, ${(total / p.calls / 1000).toFixed(1)}k instructions per call ` +
      `(thread 01 is the main thread; the others are its workers and V8's helpers)`,
  );
  const busy = new Map([...counts].filter(([, n]) => n / p.calls >= 100));
  printTable("by thread", busy, total, p.calls, p.top, "instructions per call");
}

/** Bytes allocated per call by function and by file (sampled, collected objects included). */
async function heapProfile(p: Profiled): Promise<void> {
  const session = await inspectorSession(p.port);
  await session.send("HeapProfiler.enable");
  await session.send("HeapProfiler.startSampling", {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await throughputRound(p.call, p.inFlight, p.calls, 0);
  const { profile } = await session.send<{ profile: { head: HeapNode } }>(
    "HeapProfiler.stopSampling",
  );
  session.close();
  if (p.out) await Deno.writeTextFile(p.out, JSON.stringify(profile));
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  const walk = (node: HeapNode) => {
    const fn = frameLabel(node.callFrame, p.root);
    const file = shortUrl(node.callFrame.url, p.root);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + node.selfSize);
    byFile.set(file, (byFile.get(file) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const bytes = [...byFile.values()].reduce((a, b) => a + b, 0);
  out(`${p.what}, ${(bytes / p.calls).toFixed(0)} bytes allocated per call (sampled)`);
  printTable("by function", byFunction, bytes, p.calls, p.top, "bytes per call");
  printTable("by file", byFile, bytes, p.calls, p.top, "bytes per call");
}

/** The main thread's self time per call by function and by file. */
async function cpuProfile(p: Profiled): Promise<void> {
  const session = await inspectorSession(p.port);
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: 100 });
  await session.send("Profiler.start");
  const cpu0 = await cpuMicros(p.pid);
  const round = await throughputRound(p.call, p.inFlight, p.calls, 0);
  const cpu1 = await cpuMicros(p.pid);
  const { profile } = await session.send<{ profile: CpuProfile }>("Profiler.stop");
  session.close();
  if (p.out) await Deno.writeTextFile(p.out, JSON.stringify(profile));
  const sampled = profile.timeDeltas.reduce((a, b) => a + b, 0);
  const all = cpu0 === undefined || cpu1 === undefined ? "?" : ((cpu1 - cpu0) / p.calls).toFixed(1);
  out(
    `${p.what}, ${Math.round(round.callsPerSecond)} calls/s, gateway CPU ${all} µs per call ` +
      `(all threads), main thread sampled ${(sampled / p.calls).toFixed(1)} µs per call`,
  );
  const idle = selfTimes(profile, (f) => f.functionName).get("(idle)") ?? 0;
  out(`main thread busy ${((sampled - idle) / p.calls).toFixed(1)} µs per call`);
  const table = (title: string, key: (f: CallFrame) => string) =>
    printTable(title, selfTimes(profile, key), sampled, p.calls, p.top, "µs per call");
  table("by function", (f) => frameLabel(f, p.root));
  table("by file", (f) => shortUrl(f.url, p.root));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      root: { type: "string" },
      transport: { type: "string", default: "stdio" },
      "in-flight": { type: "string", default: "16" },
      calls: { type: "string", default: "20000" },
      // Calls before the measured round, for V8 to optimize the call path (more under callgrind).
      warmup: { type: "string", default: "2000" },
      "message-bytes": { type: "string", default: "0" },
      top: { type: "string", default: "30" },
      out: { type: "string" },
      traced: { type: "boolean", default: false },
      heap: { type: "boolean", default: false },
      threads: { type: "boolean", default: false },
      instructions: { type: "boolean", default: false },
      env: { type: "string", multiple: true },
    },
  });
  if (values.root) useGatewayRoot(values.root);
  const port = freePort();
  if (values.instructions) {
    const found = await new Deno.Command("valgrind", { args: ["--version"], stdout: "null" })
      .output().then((o) => o.success, () => false);
    if (!found) {
      out("--instructions needs valgrind: sudo apt-get install -y valgrind");
      Deno.exit(2);
    }
    callgrindDir = await Deno.makeTempDir({ prefix: "agent33-callgrind-" });
    useGatewayWrapper(callgrind(callgrindDir));
  } else if (!values.threads) useGatewayFlags([`--inspect=127.0.0.1:${port}`]);
  const fleet = await writeFleet([EVERYTHING]);
  let sink: OtlpSink | undefined;
  // More of the gateway's environment (`--env OTEL_TRACES_SAMPLER=traceidratio`), and with
  // --traced, export to a sink in this process (as the bench's traced scenarios do).
  const env: Record<string, string> = Object.fromEntries(
    (values.env ?? []).map((pair) => {
      const at = pair.indexOf("=");
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
  if (values.traced) {
    sink = startOtlpSink();
    Object.assign(env, {
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_SERVICE_NAME: "agent33-profile",
      // Under callgrind the gateway runs ~50 times slower: a 1 s batch delay would post ~50
      // times as often per call as at full speed, so batches are sealed by size, as under load.
      ...(values.instructions ? { OTEL_BSP_SCHEDULE_DELAY: "600000" } : {}),
      ...env,
    });
  }
  try {
    let client: LeanClient;
    let pid: number;
    if (values.transport === "http") {
      const gateway = await startHttpGateway("gateway (HTTP, profiled)", fleet.path, {
        MCP_HTTP_RESPONSE_MODE: "json",
        ...env,
      });
      await waitFleetReady(gateway, 1, 60_000);
      client = await leanHttp(`${gateway.url}/mcp`);
      pid = gateway.child.process.pid;
    } else {
      const child = spawnStdioGateway(fleet.path, env);
      client = await leanStdio(child);
      pid = child.process.pid;
    }
    await leanWaitForTool(client, "everything__echo", "profiled gateway", 60_000);
    // An echo of "hi" by default; --message-bytes N for a call whose arguments and answer are
    // N characters each, as a real tool call's are.
    const bytes = Number(values["message-bytes"]);
    const message = bytes > 0 ? "lorem ipsum ".repeat(Math.ceil(bytes / 12)).slice(0, bytes) : "hi";
    const call = leanEchoCall(client, "everything__echo", message);
    await throughputRound(call, Number(values["in-flight"]), Number(values.warmup), 500);
    const profiled: Profiled = {
      root: getGatewayRoot(),
      pid,
      port,
      call,
      calls: Number(values.calls),
      inFlight: Number(values["in-flight"]),
      top: Number(values.top),
      ...(values.out === undefined ? {} : { out: values.out }),
      what: `${getGatewayRoot()}: ${values.calls} calls at ${values["in-flight"]} in flight ` +
        `over ${values.transport}`,
    };
    if (values.instructions) await instructions(profiled);
    else if (values.threads) await byThread(profiled);
    else if (values.heap) await heapProfile(profiled);
    else await cpuProfile(profiled);
    await client.close();
  } finally {
    await stopAll();
    await sink?.close();
    await fleet.remove();
    if (callgrindDir) await Deno.remove(callgrindDir, { recursive: true });
  }
}

if (import.meta.main) await main();
