/**
 * The Prometheus text exposition format 0.0.4, line by line: names, escaping, values.
 * See https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format.
 * @module
 */

/** The Content-Type of a 0.0.4 text exposition. */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Whether `name` is a valid metric name. */
export function isMetricName(name: string): boolean {
  return METRIC_NAME.test(name);
}

/** Whether `name` is a valid label name (names starting `__` are reserved for Prometheus). */
export function isLabelName(name: string): boolean {
  return LABEL_NAME.test(name) && !name.startsWith("__");
}

/** A label value inside double quotes: backslash, double quote and line feed are escaped. */
export function escapeLabelValue(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** HELP text: backslash and line feed are escaped (a double quote is not, per the spec). */
export function escapeHelp(text: string): string {
  return text.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
}

/** A sample value (or `le` bound) as Go's ParseFloat reads it: `+Inf`, `-Inf`, `NaN` spelled out. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

/** One sample line, without the trailing line feed: `name{a="x",b="y"} value`. */
export function formatSample(
  name: string,
  labels: readonly (readonly [string, string])[],
  value: number,
): string {
  const body = labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",");
  return `${name}${body ? `{${body}}` : ""} ${formatValue(value)}`;
}
