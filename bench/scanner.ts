/**
 * Bench: the scanner's worst case, a ~4 MiB hostile descriptor set (core/scanner/hostile_set.ts)
 * scanned with the built-in rules: in process (what `deno task scan` pays) and through the
 * gateway's scan worker, with the longest event-loop stall seen while the worker scans.
 * @module
 */
import { BUILTIN_PLUGIN_DIR } from "../core/plugin_host/plugin_loader.ts";
import { hostileDescriptors } from "../core/scanner/hostile_set.ts";
import { scanServers } from "../core/scanner/scan.ts";
import { WorkerScan } from "../core/scanner/worker_scan.ts";
import { BUILTIN_RULES } from "../plugins/scanner-rules/mod.ts";
import { median } from "./stats.ts";

/** The scanner's worst-case figures. */
export interface ScannerResult {
  bytes: number;
  servers: number;
  tools: number;
  findings: number;
  inProcessMedianMs: number;
  workerMedianMs: number;
  /** The longest gap between 1 ms timer ticks on the main thread while the worker scanned. */
  workerMaxStallMs: number;
}

/** Scans the hostile set `rounds` times each way. */
export async function benchScanner(rounds: number): Promise<ScannerResult> {
  const set = hostileDescriptors();
  const inProcess: number[] = [];
  let findings = 0;
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    findings = scanServers(set, BUILTIN_RULES).findings.length;
    inProcess.push(performance.now() - t);
  }
  const worker = new WorkerScan([BUILTIN_PLUGIN_DIR]);
  const inWorker: number[] = [];
  let stall = 0;
  try {
    await worker.scan([]); // rules loaded
    for (let i = 0; i < rounds; i++) {
      let last = performance.now();
      const ticker = setInterval(() => {
        const now = performance.now();
        stall = Math.max(stall, now - last);
        last = now;
      }, 1);
      const t = performance.now();
      await worker.scan(set);
      inWorker.push(performance.now() - t);
      clearInterval(ticker);
    }
  } finally {
    worker.close();
  }
  return {
    bytes: JSON.stringify(set).length,
    servers: set.length,
    tools: set.reduce((n, s) => n + s.tools.length, 0),
    findings,
    inProcessMedianMs: median(inProcess),
    workerMedianMs: median(inWorker),
    workerMaxStallMs: stall,
  };
}
