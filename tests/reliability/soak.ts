/**
 * Soak: many tools/call at high concurrency across several real upstreams while one of them is
 * killed (SIGKILL) every few seconds. Every request id must be answered exactly once (a result or
 * an error, never silence), the fleet must recover, and no child process may outlive the gateway.
 *
 *     deno task soak                     # 10,000 calls, 64 in flight, a kill every 2 s
 *     deno task soak --calls 2000 --concurrency 32 --kill-every 1000 --mode sse
 * @module
 */
import { parseArgs } from "node:util";
import { faultServer, writeFleet } from "../support/fleet.ts";
import { openSession, startGateway } from "../support/gateway.ts";

/** What a soak run measured. */
export interface SoakResult {
  calls: number;
  answered: number;
  duplicates: number;
  missing: number;
  ok: number;
  errors: number;
  kills: number;
  seconds: number;
  rssStartMiB: number;
  /** After the first quarter of the calls: the baseline for "flat after warm-up". */
  rssWarmMiB: number;
  rssEndMiB: number;
  leakedProcesses: number[];
  heapWarmAndEndMiB: number[];
  finalStates: Record<string, string>;
}

/** Runs a soak against an in-process gateway with `upstreams` fault-fixture upstreams. */
export async function runSoak(options: {
  calls: number;
  concurrency: number;
  upstreams: number;
  killEveryMs: number;
  /** The Streamable HTTP response mode (MCP_HTTP_RESPONSE_MODE); JSON unless given. */
  mode?: "json" | "sse";
}): Promise<SoakResult> {
  const ids = Array.from({ length: options.upstreams }, (_, i) => `u${i}`);
  const fleet = await writeFleet(
    // The last upstream's relay runs inline (isolation: inline), the others in workers: both
    // relays go through the same kills.
    "proxy_servers:" + ids.map((id, i) =>
      faultServer(id, {
        extra: `    isolation: ${i === ids.length - 1 && ids.length > 1 ? "inline" : "worker"}\n` +
          "    breaker: { threshold: 1000, base: 0.2, max: 1 }\n" +
          "    timeouts: { connect: 30, call: 10 }\n",
      })
    ).join(""),
  );
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_HTTP_RESPONSE_MODE: options.mode ?? "json",
    MCP_POLICY_PATH: "/nonexistent/policies",
  }, {
    // Only the lines naming child pids: a soak's debug log would itself grow the heap.
    keepLog: (line) => line.includes("upstream started"),
  });
  const pids = new Set<number>();
  const pidsOf = () => {
    const latest = new Map<string, number>();
    for (const line of gateway.logs) {
      const match = /upstream started server=(\S+) pid=(\d+)/.exec(line);
      if (match) {
        latest.set(match[1]!, Number(match[2]));
        pids.add(Number(match[2]));
      }
    }
    return latest;
  };
  try {
    await gateway.kernel.fleetStarted;
    const headers = await openSession(gateway);

    // Answers per id, allocated before the baseline: the driver's own bookkeeping does not grow.
    const answers = new Uint16Array(options.calls);
    let stray = 0;
    let ok = 0;
    let errors = 0;
    let kills = 0;
    const rssStart = Deno.memoryUsage().rss;
    const started = performance.now();
    let round = 0;
    const killer = setInterval(() => {
      const victim = ids[round++ % ids.length]!;
      const pid = pidsOf().get(victim);
      if (pid === undefined) return;
      try {
        Deno.kill(pid, "SIGKILL");
        kills++;
      } catch { /* already gone */ }
    }, options.killEveryMs);
    let next = 0;
    let rssWarm = 0;
    const worker = async () => {
      while (next < options.calls) {
        const id = next++;
        if (id === Math.floor(options.calls / 4)) rssWarm = settledRss();
        const server = ids[id % ids.length]!;
        const body = await postToolCall(gateway.url, headers, id, `${server}__ok`);
        if (Number.isInteger(body.id) && body.id! >= 0 && body.id! < options.calls) {
          answers[body.id!]!++;
        } else {
          stray++;
        }
        if (body.result) ok++;
        else errors++;
      }
    };
    try {
      await Promise.all(Array.from({ length: options.concurrency }, worker));
    } finally {
      clearInterval(killer);
    }
    const seconds = (performance.now() - started) / 1000;
    // Recovery: every upstream comes back.
    const deadline = Date.now() + 30_000;
    while (
      gateway.kernel.proxy.handles().some((h) => h.state !== "READY") && Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const finalStates = Object.fromEntries(
      gateway.kernel.proxy.handles().map((h) => [h.id, h.state]),
    );
    pidsOf();
    const rssEnd = settledRss();
    await gateway.stop();
    await new Promise((r) => setTimeout(r, 200));
    const leaked = [...pids].filter(alive);
    let duplicates = 0;
    let missing = 0;
    for (let id = 0; id < options.calls; id++) {
      const count = answers[id]!;
      if (count === 0) missing++;
      if (count > 1) duplicates += count - 1;
    }
    return {
      calls: options.calls,
      answered: answers.reduce((a, b) => a + b, stray),
      duplicates,
      missing,
      ok,
      errors,
      kills,
      seconds,
      rssStartMiB: rssStart / 2 ** 20,
      rssWarmMiB: rssWarm / 2 ** 20,
      rssEndMiB: rssEnd / 2 ** 20,
      leakedProcesses: leaked,
      heapWarmAndEndMiB: heapSamples.slice(-2),
      finalStates,
    };
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

/** A JSON-RPC reply as the soak reads it. */
export interface CallReply {
  id?: number;
  result?: unknown;
  error?: unknown;
}

/**
 * One `tools/call` POST on a JSON-response-mode session (`headers` from `openSession`), given up
 * after `timeoutMs`. The deadline is cleared as soon as the reply is read: an
 * `AbortSignal.timeout()` per call keeps its signal, timer and dependent-signal set (~470 bytes)
 * alive until it fires, a minute later, and the soak's heap samples counted that as the
 * gateway's growth (~400 bytes per call).
 */
export async function postToolCall(
  url: string,
  headers: Record<string, string>,
  id: number,
  name: string,
  timeoutMs = 60_000,
): Promise<CallReply> {
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new DOMException(`no reply within ${timeoutMs} ms`, "TimeoutError")),
    timeoutMs,
  );
  try {
    const response = await fetch(`${url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name, arguments: {} },
      }),
      signal: deadline.signal,
    });
    const text = await response.text();
    // SSE response mode: the answer is the last `data:` line of the event stream.
    if (response.headers.get("content-type")?.includes("text/event-stream")) {
      const data = text.split("\n").filter((line) => line.startsWith("data: ")).at(-1);
      return JSON.parse(data?.slice("data: ".length) ?? "null") as CallReply;
    }
    return JSON.parse(text) as CallReply;
  } finally {
    clearTimeout(timer);
  }
}

/** RSS after a full GC when the run has one (`deno task soak` passes --expose-gc), so growth means retention. */
function settledRss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  heapSamples.push(Deno.memoryUsage().heapUsed / 2 ** 20);
  return Deno.memoryUsage().rss;
}

/** JS heap in use (MiB) at each settled sample: growth here is retention, not allocator caching. */
const heapSamples: number[] = [];

/** Whether a process exists and is not a zombie (Linux /proc). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      calls: { type: "string", default: "10000" },
      concurrency: { type: "string", default: "64" },
      upstreams: { type: "string", default: "3" },
      "kill-every": { type: "string", default: "2000" },
      mode: { type: "string", default: "json" },
    },
  });
  if (values.mode !== "json" && values.mode !== "sse") {
    throw new Error(`--mode must be json or sse, not "${values.mode}"`);
  }
  const result = await runSoak({
    calls: Number(values.calls),
    concurrency: Number(values.concurrency),
    upstreams: Number(values.upstreams),
    killEveryMs: Number(values["kill-every"]),
    mode: values.mode,
  });
  const encoder = new TextEncoder();
  Deno.stdout.writeSync(encoder.encode(JSON.stringify(result, null, 2) + "\n"));
  const passed = result.missing === 0 && result.duplicates === 0 &&
    result.leakedProcesses.length === 0 &&
    Object.values(result.finalStates).every((s) => s === "READY");
  Deno.exit(passed ? 0 : 1);
}
