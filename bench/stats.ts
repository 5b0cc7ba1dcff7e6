/**
 * Bench support: timing loops (sequential latency, concurrent throughput) and their statistics.
 * @module
 */

/** One call to time; it must reject on failure. */
export type Call = () => Promise<unknown>;

/** Per-round latency figures in milliseconds. */
export interface LatencyRound {
  calls: number;
  medianMs: number;
  p99Ms: number;
  meanMs: number;
  minMs: number;
  maxMs: number;
}

/** One throughput round. */
export interface ThroughputRound {
  calls: number;
  concurrency: number;
  seconds: number;
  callsPerSecond: number;
  medianMs: number;
  p99Ms: number;
  /** CPU the serving process (gateway, or upstream when direct) spent per call, all threads. */
  serverCpuUsPerCall?: number;
}

/** The q-quantile (0..1) of ascending `sorted` values, linearly interpolated between ranks. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/** The median of any numbers. */
export function median(values: number[]): number {
  return quantile([...values].sort((a, b) => a - b), 0.5);
}

function summarize(samples: number[]): Omit<LatencyRound, "calls"> {
  const sorted = Float64Array.from(samples).sort();
  const list = Array.from(sorted);
  return {
    medianMs: quantile(list, 0.5),
    p99Ms: quantile(list, 0.99),
    meanMs: list.reduce((a, b) => a + b, 0) / list.length,
    minMs: list[0]!,
    maxMs: list[list.length - 1]!,
  };
}

/** `warmup` untimed calls, then `calls` sequential timed calls. */
export async function latencyRound(
  call: Call,
  warmup: number,
  calls: number,
): Promise<LatencyRound> {
  for (let i = 0; i < warmup; i++) await call();
  const samples = new Array<number>(calls);
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await call();
    samples[i] = performance.now() - t0;
  }
  return { calls, ...summarize(samples) };
}

/** `total` calls with `concurrency` in flight at any time (after `warmup` calls the same way). */
export async function throughputRound(
  call: Call,
  concurrency: number,
  total: number,
  warmup: number,
  serverCpu?: () => Promise<number | undefined>,
): Promise<ThroughputRound> {
  const run = async (count: number, samples?: number[]) => {
    let next = 0;
    const lane = async () => {
      while (next < count) {
        next++;
        const t0 = performance.now();
        await call();
        samples?.push(performance.now() - t0);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
  };
  await run(warmup);
  const samples: number[] = [];
  const cpu0 = await serverCpu?.();
  const t0 = performance.now();
  await run(total, samples);
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = await serverCpu?.();
  const { medianMs, p99Ms } = summarize(samples);
  return {
    calls: total,
    concurrency,
    seconds,
    callsPerSecond: total / seconds,
    medianMs,
    p99Ms,
    ...(cpu0 === undefined || cpu1 === undefined
      ? {}
      : { serverCpuUsPerCall: (cpu1 - cpu0) / total }),
  };
}
