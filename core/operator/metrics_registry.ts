/**
 * A small in-house metrics registry (counters, gauges, fixed-bucket histograms) that renders the
 * Prometheus text format 0.0.4. Every family bounds its series so label values that come from
 * callers (tool names, event fields) cannot grow memory without limit.
 * @module
 */
import {
  escapeHelp,
  formatSample,
  formatValue,
  isLabelName,
  isMetricName,
} from "./metrics_exposition.ts";

/** Label values of one series, keyed by the family's label names. */
export type Labels<L extends string> = { readonly [K in L]: string };

/** The value a folded label takes once its family is full. */
export const OTHER_LABEL_VALUE = "(other)";

/** Default most series per family before new ones are folded. */
export const DEFAULT_MAX_SERIES = 10_000;

/** What a metric family is declared with. */
export interface FamilyOptions<L extends string> {
  /** Metric name; counters should end in `_total`. */
  name: string;
  help: string;
  labelNames?: readonly L[];
  /**
   * Labels replaced by `(other)` for series that arrive once the family is full; default every
   * label. List only the unbounded ones, so the folded series keep the bounded labels' detail.
   */
  fold?: readonly L[];
}

/** What the registry is built from. */
export interface MetricRegistryOptions {
  /** Most series per family before folding; default {@link DEFAULT_MAX_SERIES}. */
  maxSeries?: number;
}

type MetricType = "counter" | "gauge" | "histogram";

interface Series<S> {
  values: string[];
  state: S;
}

/** The shared part of every family: labels, the series map and its bound. */
abstract class Family<L extends string, S> {
  readonly name: string;
  readonly help: string;
  abstract readonly type: MetricType;
  readonly labelNames: readonly L[];
  #fold: boolean[];
  #maxSeries: number;
  #series = new Map<string, Series<S>>();
  #folds = 0;

  constructor(options: FamilyOptions<L>, maxSeries: number, reserved: readonly string[] = []) {
    if (!isMetricName(options.name)) throw new TypeError(`Invalid metric name "${options.name}"`);
    const labelNames = options.labelNames ?? [];
    for (const label of labelNames) {
      if (!isLabelName(label) || reserved.includes(label)) {
        throw new TypeError(`Invalid label name "${label}" for metric ${options.name}`);
      }
    }
    if (new Set(labelNames).size !== labelNames.length) {
      throw new TypeError(`Duplicate label names for metric ${options.name}`);
    }
    const fold = options.fold ?? labelNames;
    for (const label of fold) {
      if (!labelNames.includes(label)) {
        throw new TypeError(`Cannot fold "${label}": not a label of metric ${options.name}`);
      }
    }
    this.name = options.name;
    this.help = options.help;
    this.labelNames = labelNames;
    this.#fold = labelNames.map((l) => fold.includes(l));
    this.#maxSeries = maxSeries;
  }

  /** How many observations were folded into `(other)` series because the family was full. */
  get folds(): number {
    return this.#folds;
  }

  /** How many series the family holds. */
  get size(): number {
    return this.#series.size;
  }

  /** Forgets every series (for values recomputed at each scrape). */
  reset(): void {
    this.#series.clear();
  }

  /** The state of the series for `labels`, created (or folded, when full) as needed. */
  protected slot(labels: Labels<L>): S {
    let values = this.labelNames.map((l) => String(labels[l] ?? ""));
    let key = JSON.stringify(values);
    let found = this.#series.get(key);
    if (found) return found.state;
    if (this.#series.size >= this.#maxSeries) {
      this.#folds++;
      values = values.map((v, i) => (this.#fold[i] ? OTHER_LABEL_VALUE : v));
      key = JSON.stringify(values);
      found = this.#series.get(key);
      if (found) return found.state;
      // Folded series keep the unfolded labels, which should be bounded; if they are not after
      // all, a second full family's worth collapses into the one all-(other) series.
      if (this.#series.size >= 2 * this.#maxSeries) {
        values = values.map(() => OTHER_LABEL_VALUE);
        key = JSON.stringify(values);
        found = this.#series.get(key);
        if (found) return found.state;
      }
    }
    const state = this.initial();
    this.#series.set(key, { values, state });
    return state;
  }

  protected abstract initial(): S;

  /** Sample lines of one series. */
  protected abstract lines(labels: [string, string][], state: S): string[];

  /** The family's exposition: HELP, TYPE and samples; empty when it has no series. */
  render(): string[] {
    if (this.#series.size === 0) return [];
    const out = [
      `# HELP ${this.name} ${escapeHelp(this.help)}`,
      `# TYPE ${this.name} ${this.type}`,
    ];
    for (const { values, state } of this.#series.values()) {
      const labels = this.labelNames.map((l, i): [string, string] => [l, values[i]!]);
      out.push(...this.lines(labels, state));
    }
    return out;
  }
}

/** A monotonically increasing count. */
export class Counter<L extends string> extends Family<L, { value: number }> {
  readonly type = "counter";

  /** Adds `by` (default 1; never negative) to the series for `labels`. */
  inc(labels: Labels<L>, by = 1): void {
    if (!(by >= 0)) throw new RangeError(`A counter only goes up; ${this.name} got ${by}`);
    this.slot(labels).value += by;
  }

  /** Sets the total of a count kept elsewhere (e.g. a bus's own counter), read at scrape time. */
  setTotal(labels: Labels<L>, total: number): void {
    this.slot(labels).value = total;
  }

  protected initial() {
    return { value: 0 };
  }

  protected lines(labels: [string, string][], state: { value: number }): string[] {
    return [formatSample(this.name, labels, state.value)];
  }
}

/** A value that goes up and down. */
export class Gauge<L extends string> extends Family<L, { value: number }> {
  readonly type = "gauge";

  /** Sets the series for `labels` to `value`. */
  set(labels: Labels<L>, value: number): void {
    this.slot(labels).value = value;
  }

  /** Adds `by` (negative to decrease) to the series for `labels`. */
  inc(labels: Labels<L>, by = 1): void {
    this.slot(labels).value += by;
  }

  protected initial() {
    return { value: 0 };
  }

  protected lines(labels: [string, string][], state: { value: number }): string[] {
    return [formatSample(this.name, labels, state.value)];
  }
}

interface HistogramState {
  /** Observations per bucket (not cumulative); the last slot is above every bound. */
  counts: number[];
  sum: number;
  count: number;
}

/** Observations counted into fixed buckets, with their sum and count. */
export class Histogram<L extends string> extends Family<L, HistogramState> {
  readonly type = "histogram";
  readonly buckets: readonly number[];

  constructor(options: FamilyOptions<L> & { buckets: readonly number[] }, maxSeries: number) {
    super(options, maxSeries, ["le"]);
    const { buckets } = options;
    if (buckets.length === 0) throw new RangeError(`Histogram ${options.name} needs buckets`);
    buckets.forEach((b, i) => {
      if (!Number.isFinite(b) || (i > 0 && !(b > buckets[i - 1]!))) {
        throw new RangeError(
          `Histogram ${options.name} buckets must be finite and increasing; +Inf is implicit`,
        );
      }
    });
    this.buckets = [...buckets];
  }

  /** Records one observation (NaN is ignored: it would poison the sum). */
  observe(labels: Labels<L>, value: number): void {
    if (Number.isNaN(value)) return;
    const state = this.slot(labels);
    let i = this.buckets.findIndex((b) => value <= b);
    if (i < 0) i = this.buckets.length;
    state.counts[i]!++;
    state.sum += value;
    state.count++;
  }

  protected initial(): HistogramState {
    return { counts: new Array(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  protected lines(labels: [string, string][], state: HistogramState): string[] {
    const out: string[] = [];
    let cumulative = 0;
    this.buckets.forEach((bound, i) => {
      cumulative += state.counts[i]!;
      out.push(
        formatSample(`${this.name}_bucket`, [...labels, ["le", formatValue(bound)]], cumulative),
      );
    });
    out.push(formatSample(`${this.name}_bucket`, [...labels, ["le", "+Inf"]], state.count));
    out.push(formatSample(`${this.name}_sum`, labels, state.sum));
    out.push(formatSample(`${this.name}_count`, labels, state.count));
    return out;
  }
}

/** The families of one exposition, rendered in the order they were declared. */
export class MetricRegistry {
  #maxSeries: number;
  #families: Family<string, unknown>[] = [];
  #collectors: (() => void)[] = [];

  constructor(options: MetricRegistryOptions = {}) {
    const maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
    if (!Number.isInteger(maxSeries) || maxSeries < 1) {
      throw new RangeError(`maxSeries must be a positive integer, got ${maxSeries}`);
    }
    this.#maxSeries = maxSeries;
  }

  /** Declares a counter. */
  counter<L extends string = never>(options: FamilyOptions<L>): Counter<L> {
    return this.#add(new Counter(options, this.#maxSeries));
  }

  /** Declares a gauge. */
  gauge<L extends string = never>(options: FamilyOptions<L>): Gauge<L> {
    return this.#add(new Gauge(options, this.#maxSeries));
  }

  /** Declares a histogram with fixed, increasing bucket bounds (`+Inf` is added). */
  histogram<L extends string = never>(
    options: FamilyOptions<L> & { buckets: readonly number[] },
  ): Histogram<L> {
    return this.#add(new Histogram(options, this.#maxSeries));
  }

  /** Runs `collect` at the start of every render, to set values computed at scrape time. */
  beforeRender(collect: () => void): void {
    this.#collectors.push(collect);
  }

  /** Every declared family's name and how many observations it folded. */
  folds(): { name: string; folds: number }[] {
    return this.#families.map((f) => ({ name: f.name, folds: f.folds }));
  }

  /** The whole exposition; every line ends with a line feed. Families without series are left out. */
  render(): string {
    for (const collect of this.#collectors) collect();
    const lines = this.#families.flatMap((f) => f.render());
    return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
  }

  #add<F extends Family<string, unknown>>(family: F): F {
    if (this.#families.some((f) => f.name === family.name)) {
      throw new TypeError(`Metric ${family.name} is already declared`);
    }
    this.#families.push(family);
    return family;
  }
}
